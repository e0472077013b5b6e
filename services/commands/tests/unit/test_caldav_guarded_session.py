"""The guarded HTTP session every CalDAV request goes through (contract §12), against listeners on
distinct loopback addresses: what is refused never gets a connection, redirects are checked hop by
hop, and the connection goes to the address that was checked, however the name resolves later."""

from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from calagent.commands.caldav.addresses import (
    AddressNotAllowed,
    AddressRule,
    Guard,
    IPAddress,
    PinnedResolver,
)
from calagent.devtools.testing.listeners import Answer, Listener

pytestmark = pytest.mark.unit

ALLOWED = "127.0.0.2"
REFUSED = "127.0.0.3"
RULE = AddressRule.from_setting(f"{ALLOWED}/32")


class ScriptedResolver:
    """Answers each lookup with the next answer (the last one again when they run out)."""

    def __init__(self, *answers: str) -> None:
        self.answers = [ipaddress.ip_address(a) for a in answers]
        self.asked: list[str] = []

    def resolve(self, host: str, port: int) -> list[IPAddress]:
        self.asked.append(host)
        return [self.answers[min(len(self.asked), len(self.answers)) - 1]]


@pytest.fixture
def refused() -> Iterator[Listener]:
    with Listener(REFUSED) as listener:
        yield listener


def test_a_refused_address_gets_no_connection(refused: Listener) -> None:
    with Listener(ALLOWED) as allowed, Guard(RULE).session() as session:
        assert session.get(allowed.url("/")).status_code == 200
        with pytest.raises(AddressNotAllowed):
            session.get(refused.url("/"))
        assert session.refused is not None
    assert allowed.connections == 1
    assert refused.connections == 0


def test_each_redirect_hop_is_checked_before_it_is_followed(refused: Listener) -> None:
    with (
        Listener(ALLOWED, lambda _: Answer(200, {}, b"landed")) as landing,
        Listener(ALLOWED, lambda s: Answer(307, {"Location": target[s.path]})) as redirector,
        Guard(RULE).session() as session,
    ):
        target = {"/good": landing.url("/here"), "/bad": refused.url("/there")}
        assert session.request("PROPFIND", redirector.url("/good")).text == "landed"
        with pytest.raises(AddressNotAllowed):
            session.request("PROPFIND", redirector.url("/bad"))
    assert [s.method for s in landing.requests] == ["PROPFIND"]
    assert refused.connections == 0


def test_a_name_that_resolves_elsewhere_later_is_still_reached_at_the_checked_address() -> None:
    """DNS rebinding: the first lookup says an allowed address, every later one a refused one.
    The session looks the name up once, connects to what it checked, and never asks again."""
    close = {"Connection": "close"}  # every request on a new connection: each one is a fresh dial
    with (
        Listener(ALLOWED, lambda _: Answer(200, close, b"first")) as first,
        Listener(REFUSED, lambda _: Answer(200, close, b"second"), port=first.port) as second,
    ):
        resolver = ScriptedResolver(ALLOWED, REFUSED)
        with Guard(RULE, resolver).session() as session:
            url = f"http://rebind.test:{first.port}/"
            answers = [session.get(url).text for _ in range(3)]
        assert answers == ["first"] * 3
        assert first.connections == 3
        assert second.connections == 0
        assert resolver.asked == ["rebind.test"]
        # A new operation looks the name up again, and is refused what it now resolves to.
        with Guard(RULE, resolver).session() as session, pytest.raises(AddressNotAllowed):
            session.get(url)
        assert second.connections == 0


def test_the_session_cannot_connect_to_a_host_nobody_checked() -> None:
    pins = PinnedResolver()
    pins.pin("calendar.test", [ipaddress.ip_address(ALLOWED)])
    assert [r[4][0] for r in pins.getaddrinfo("calendar.test", 80, socket.AF_UNSPEC, socket.SOCK_STREAM)] == [
        ALLOWED
    ]
    with pytest.raises(socket.gaierror):
        pins.getaddrinfo("other.test", 80, socket.AF_UNSPEC, socket.SOCK_STREAM)


def _certificate(tmp: Path, name: str) -> tuple[Path, ssl.SSLContext]:
    """A CA (its PEM file, for the client) and a server context with a certificate for `name`."""
    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(1)
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(2)
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=3650))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    ca_file = tmp / "ca.pem"
    ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    chain = tmp / "server.pem"
    chain.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        + leaf.public_bytes(serialization.Encoding.PEM)
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(chain)
    return ca_file, context


def test_tls_is_checked_against_the_name_in_the_url_not_the_address(tmp_path: Path) -> None:
    ca_file, context = _certificate(tmp_path, "calendar.test")
    with Listener(ALLOWED, lambda _: Answer(200, {}, b"secure"), tls=context) as server:
        resolver = ScriptedResolver(ALLOWED)
        with Guard(RULE, resolver).session() as session:
            answer = session.get(f"https://calendar.test:{server.port}/dav/", verify=str(ca_file))
        assert answer.text == "secure"
        [seen] = server.requests
        assert seen.headers["Host"] == f"calendar.test:{server.port}"
        assert server.server_names == ["calendar.test"]
        # The same server under a name its certificate does not carry is not trusted.
        with Guard(RULE, ScriptedResolver(ALLOWED)).session() as session, pytest.raises(Exception) as refused:
            session.get(f"https://other.test:{server.port}/dav/", verify=str(ca_file))
        assert not isinstance(refused.value, AddressNotAllowed)
        assert len(server.requests) == 1
