"""Which addresses a CalDAV (or CardDAV) request may reach, and an HTTP session that reaches only
those (contract §12).

The rule is pure: an address is allowed when it is a public one, or when an operator's network
(`CALAGENT_CALDAV_ALLOW_NETWORKS`) contains it. Loopback, private, link-local, multicast, reserved
and unspecified addresses are otherwise refused, and so is a public-looking IPv6 address that
carries a refused IPv4 address inside it (IPv4-mapped, 6to4).

`Guard.check` takes a URL, resolves its host once through a `Resolver` port and checks every
address it resolves to. `Guard.session()` is the HTTP session the `caldav` library sends through:
every request it sends — the first one, each redirect hop, each collection a server names — is
checked before a byte goes out, and its connections are made by a resolver that answers only with
the addresses that were checked (a host nobody checked cannot be connected to at all). The host
name itself stays in the URL, so the Host header, TLS SNI and the certificate check are the
original host's; only the lookup is pinned, which is what makes DNS rebinding harmless.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

import niquests

if TYPE_CHECKING:
    from urllib3.contrib.resolver import BaseResolver, ProtocolResolver
else:
    # The urllib3 niquests runs on (urllib3-future, under either name): the resolver a session
    # is given must be its class.
    from niquests.packages.urllib3.contrib.resolver import BaseResolver, ProtocolResolver

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

MAX_REDIRECTS = 5


class InvalidUrl(ValueError):
    """Not an http(s) URL with a host this guard can read unambiguously."""


class AddressNotAllowed(Exception):
    """The URL leads to an address the rule refuses; no request was made to it."""

    code = "address_not_allowed"


class Unresolvable(OSError):
    """The host has no address: nothing to connect to (an unreachable server, not a refusal)."""


# ---- the rule ------------------------------------------------------------------------------------


def parse_networks(text: str) -> tuple[Network, ...]:
    """`CALAGENT_CALDAV_ALLOW_NETWORKS`: comma-separated CIDRs (a bare address is one host)."""
    return tuple(ipaddress.ip_network(part.strip(), strict=False) for part in text.split(",") if part.strip())


def _inside(address: IPAddress) -> list[IPAddress]:
    """The address and every IPv4 address it carries inside it."""
    found: list[IPAddress] = [address]
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            found.append(address.ipv4_mapped)
        if address.sixtofour is not None:
            found.append(address.sixtofour)
    return found


def _public(address: IPAddress) -> bool:
    # `is_global` alone lets multicast (224.0.0.0/4, ff0e::/16) through, and some reserved IPv6
    # ranges too; every category the contract names is refused by its own test.
    return (
        address.is_global
        and not address.is_multicast
        and not address.is_reserved
        and not address.is_private
        and not address.is_loopback
        and not address.is_link_local
        and not address.is_unspecified
    )


@dataclass(frozen=True)
class AddressRule:
    allowed: tuple[Network, ...] = ()

    @classmethod
    def from_setting(cls, text: str | None) -> AddressRule:
        return cls(parse_networks(text or ""))

    def permits(self, address: IPAddress) -> bool:
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            # ::ffff:a.b.c.d is a.b.c.d on the wire: an allowed IPv4 network allows it too.
            address = address.ipv4_mapped
        if any(address.version == n.version and address in n for n in self.allowed):
            return True
        return all(_public(a) for a in _inside(address))


# ---- reading a URL -------------------------------------------------------------------------------

# inet_aton(3) reads "2130706433", "0x7f000001", "0177.0.0.1" and "127.1" as 127.0.0.1, and so do
# the system's resolver and some HTTP stacks: such a host is read as the address it spells.
_NUMERIC_PART = re.compile(r"^(0x[0-9a-f]*|[0-9]+)$")


def _inet_aton(host: str) -> ipaddress.IPv4Address | None:
    parts = host.split(".")
    if not 1 <= len(parts) <= 4 or not all(_NUMERIC_PART.match(p) for p in parts):
        return None
    values = []
    for part in parts:
        if part.startswith("0x"):
            values.append(int(part[2:] or "0", 16))
        elif len(part) > 1 and part.startswith("0"):
            if not all(c in "01234567" for c in part):
                return None
            values.append(int(part, 8))
        else:
            values.append(int(part))
    *head, last = values
    if any(v > 255 for v in head) or last >= 256 ** (4 - len(head)):
        return None
    number = 0
    for v in head:
        number = number * 256 + v
    number = number * 256 ** (4 - len(head)) + last
    return ipaddress.IPv4Address(number)


def literal_address(host: str) -> IPAddress | None:
    """The address a host names by itself (no lookup), however it is spelled; None for a name."""
    text = host.strip("[]").lower()
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        pass
    return _inet_aton(text.rstrip("."))


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str  # lower-case, IDNA-encoded, without brackets: the name the session's lookup sees
    port: int


def target_of(url: str) -> Target:
    """The scheme, host and port a URL leads to; `InvalidUrl` when that is not plain to read."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in url):
        raise InvalidUrl("the address contains control characters")
    parts = urlsplit(url)
    if any(c.isspace() or c == "\\" for c in parts.netloc):
        # Parsers disagree on where such a host ends: the one checked might not be the one reached.
        raise InvalidUrl("the server address contains spaces or backslashes in its host")
    if parts.scheme.lower() not in ("http", "https"):
        raise InvalidUrl("the server address must be an http(s) URL")
    if "@" in parts.netloc:
        # user:password@host: credentials are given separately, and the "@" is the classic way
        # to make a URL look like it leads somewhere it does not.
        raise InvalidUrl("the server address must not contain a user name or password")
    host = parts.hostname or ""
    if not host:
        raise InvalidUrl("the server address has no host")
    try:
        port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
    except ValueError as exc:
        raise InvalidUrl("the server address has an invalid port") from exc
    if literal_address(host) is None:
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError as exc:
            raise InvalidUrl("the server address has an invalid host name") from exc
    return Target(parts.scheme.lower(), host.lower(), port)


# ---- resolving and checking ----------------------------------------------------------------------


class Resolver(Protocol):
    def resolve(self, host: str, port: int) -> list[IPAddress]: ...


class SystemResolver:
    def resolve(self, host: str, port: int) -> list[IPAddress]:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        addresses: list[IPAddress] = []
        for _family, _type, _proto, _name, sockaddr in found:
            address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
            if address not in addresses:
                addresses.append(address)
        return addresses


@dataclass(frozen=True)
class Checked:
    target: Target
    addresses: tuple[IPAddress, ...]


@dataclass(frozen=True)
class Guard:
    rule: AddressRule
    resolver: Resolver = field(default_factory=SystemResolver)

    def check(self, url: str) -> Checked:
        """Resolve the URL's host once and check every address; `AddressNotAllowed` otherwise."""
        target = target_of(url)
        literal = literal_address(target.host)
        if literal is not None:
            addresses = [literal]
        else:
            try:
                addresses = self.resolver.resolve(target.host, target.port)
            except OSError as exc:
                raise Unresolvable(target.host) from exc
            if not addresses:
                raise Unresolvable(target.host)
        refused = [a for a in addresses if not self.rule.permits(a)]
        if refused:
            raise AddressNotAllowed(f"{target.host} leads to an address that is not allowed")
        return Checked(target, tuple(addresses))

    def session(self) -> GuardedSession:
        return GuardedSession(self)


# ---- the session ---------------------------------------------------------------------------------


AddrInfo = tuple[
    socket.AddressFamily, socket.SocketKind, int, str | bytes, tuple[str, int] | tuple[str, int, int, int]
]


class PinnedResolver(BaseResolver):
    """Answers only with addresses a `Guard` checked, and only for hosts it checked."""

    protocol = ProtocolResolver.MANUAL
    implementation = "calagent-pinned"

    def __init__(self) -> None:
        super().__init__(None, None)
        self._pins: dict[str, tuple[IPAddress, ...]] = {}

    def pin(self, host: str, addresses: Sequence[IPAddress]) -> None:
        with self._lock:
            self._pins[host.lower()] = tuple(addresses)

    def pinned(self, host: str) -> tuple[IPAddress, ...] | None:
        with self._lock:
            return self._pins.get(host.lower())

    def recycle(self) -> BaseResolver:
        return self

    def close(self) -> None:
        pass

    def is_available(self) -> bool:
        return True

    def getaddrinfo(
        self,
        host: bytes | str | None,
        port: str | int | None,
        family: socket.AddressFamily,
        type: socket.SocketKind,
        proto: int = 0,
        flags: int = 0,
        *,
        quic_upgrade_via_dns_rr: bool = False,
    ) -> list[AddrInfo]:
        name = host.decode("ascii") if isinstance(host, bytes) else (host or "")
        addresses = self.pinned(name.strip("[]"))
        if addresses is None:
            raise socket.gaierror(socket.EAI_NONAME, f"{name} was not checked")
        records: list[AddrInfo] = []
        for address in addresses:
            if isinstance(address, ipaddress.IPv4Address):
                if family == socket.AF_INET6:
                    continue
                records.append((socket.AF_INET, type, 6, "", (str(address), int(port or 0))))
            else:
                if family == socket.AF_INET:
                    continue
                records.append((socket.AF_INET6, type, 6, "", (str(address), int(port or 0), 0, 0)))
        if not records:
            raise socket.gaierror(socket.EAI_NONAME, f"{name} has no checked address of this family")
        return records


class GuardedSession(niquests.Session):
    """A session whose every request is checked first and connects only to checked addresses.

    Each host is looked up once per session: later requests to it (keep-alive or not) go to the
    addresses checked the first time. A refusal is kept in `refused`, so a caller can tell it
    apart even when a library turns the exception into one of its own.
    """

    def __init__(self, guard: Guard) -> None:
        self.pins = PinnedResolver()
        super().__init__(
            resolver=self.pins,
            # An OCSP or CRL check would be a request to an address the certificate names; HTTP/3
            # follows an Alt-Svc the server names. Neither goes through `send`.
            revocation_configuration=None,
            disable_http3=True,
        )
        self.guard = guard
        # No proxy, no .netrc from the environment: the connection goes to the checked address.
        self.trust_env = False
        self.max_redirects = MAX_REDIRECTS
        self.refused: AddressNotAllowed | None = None

    def check(self, url: str) -> Checked:
        target = target_of(url)
        pinned = self.pins.pinned(target.host)
        if pinned is not None:
            return Checked(target, pinned)
        try:
            checked = self.guard.check(url)
        except AddressNotAllowed as exc:
            self.refused = exc
            raise
        self.pins.pin(checked.target.host, checked.addresses)
        return checked

    def __enter__(self) -> GuardedSession:
        return self

    def send(self, request: niquests.PreparedRequest, **kwargs: Any) -> niquests.Response:
        self.check(str(request.url))
        return super().send(request, **kwargs)
