"""The address rule of connected calendars (contract §12), as a pure function: which addresses a
CalDAV request may reach, and how a URL's host is read."""

from __future__ import annotations

import ipaddress

import pytest

from calagent.commands.caldav.addresses import (
    AddressNotAllowed,
    AddressRule,
    Guard,
    InvalidUrl,
    IPAddress,
    literal_address,
    target_of,
)

pytestmark = pytest.mark.unit

NO_LIST = AddressRule.from_setting("")
HOME = AddressRule.from_setting("127.0.0.2/32, 192.168.1.0/24,fd00:1::/64")

# (address, allowed with no list, allowed with HOME's list)
ADDRESSES = [
    ("8.8.8.8", True, True),
    ("2606:4700:4700::1111", True, True),
    ("127.0.0.1", False, False),
    ("127.0.0.2", False, True),
    ("127.255.255.254", False, False),
    ("0.0.0.0", False, False),
    ("10.0.0.1", False, False),
    ("172.16.5.4", False, False),
    ("192.168.1.20", False, True),
    ("192.168.2.20", False, False),
    ("100.64.0.1", False, False),  # carrier-grade NAT
    ("169.254.169.254", False, False),  # link-local: the cloud metadata address
    ("224.0.0.1", False, False),  # multicast, which `is_global` alone lets through
    ("239.255.255.250", False, False),
    ("240.0.0.1", False, False),  # reserved
    ("255.255.255.255", False, False),
    ("198.18.0.1", False, False),  # benchmarking
    ("::1", False, False),
    ("::", False, False),
    ("fe80::1", False, False),
    ("fc00::1", False, False),
    ("fd00:1::5", False, True),
    ("ff02::1", False, False),
    ("ff0e::1", False, False),  # global-scope multicast
    ("::ffff:127.0.0.1", False, False),  # IPv4-mapped loopback
    ("::ffff:127.0.0.2", False, True),  # the allowed IPv4 address, mapped
    ("::ffff:8.8.8.8", True, True),
    ("::127.0.0.1", False, False),  # IPv4-compatible (deprecated) loopback
    ("2002:7f00:1::", False, False),  # 6to4 around 127.0.0.1
    ("2002:a00:1::", False, False),  # 6to4 around 10.0.0.1
    ("2002:808:808::", True, True),  # 6to4 around 8.8.8.8
    ("64:ff9b::7f00:1", False, False),  # NAT64 of 127.0.0.1
    ("2001:db8::1", False, False),  # documentation
    ("2001::1", False, False),  # Teredo
]


@pytest.mark.parametrize(("text", "open_", "home"), ADDRESSES)
def test_the_rule_allows_public_addresses_and_the_listed_networks_only(
    text: str, open_: bool, home: bool
) -> None:
    address = ipaddress.ip_address(text)
    assert NO_LIST.permits(address) is open_
    assert HOME.permits(address) is home


# Every spelling the system's resolver (inet_aton) reads as an address is read as that address.
SPELLINGS = [
    ("127.0.0.1", "127.0.0.1"),
    ("2130706433", "127.0.0.1"),
    ("0x7f000001", "127.0.0.1"),
    ("0X7F000001", "127.0.0.1"),
    ("0177.0.0.1", "127.0.0.1"),
    ("0x7f.0.0.1", "127.0.0.1"),
    ("127.1", "127.0.0.1"),
    ("127.0.1", "127.0.0.1"),
    ("127.0.0.1.", "127.0.0.1"),
    ("[::1]", "::1"),
    ("[::ffff:7f00:1]", "::ffff:127.0.0.1"),
    ("017700000001", "127.0.0.1"),
    ("0", "0.0.0.0"),
    ("calendar.example.com", None),
    ("localhost", None),
    ("1.2.3.4.5", None),
    ("08.0.0.1", None),  # not octal, not decimal: a name (and no resolver reads it as an address)
    ("256.0.0.1", None),
]


@pytest.mark.parametrize(("host", "address"), SPELLINGS)
def test_a_host_that_spells_an_address_is_read_as_that_address(host: str, address: str | None) -> None:
    assert literal_address(host) == (ipaddress.ip_address(address) if address is not None else None)


@pytest.mark.parametrize(
    "url",
    [
        "ftp://example.com/",
        "file:///etc/passwd",
        "gopher://127.0.0.1/",
        "http://user:pw@example.com/",
        "http://example.com@127.0.0.1/",
        "http://exa mple.com/",
        "http://example.com\\@127.0.0.1/",
        "http:///path-only",
        "http://example.com:99999/",
        "example.com/dav/",
    ],
)
def test_urls_that_are_not_plain_http_are_refused_before_anything_is_resolved(url: str) -> None:
    with pytest.raises(InvalidUrl):
        target_of(url)


class CountingResolver:
    def __init__(self, *answers: list[str]) -> None:
        self.answers = [[ipaddress.ip_address(a) for a in answer] for answer in answers]
        self.asked: list[str] = []

    def resolve(self, host: str, port: int) -> list[IPAddress]:
        self.asked.append(host)
        return self.answers[min(len(self.asked), len(self.answers)) - 1]


def test_every_address_a_name_resolves_to_must_be_allowed() -> None:
    resolver = CountingResolver(["93.184.215.14", "10.0.0.7"])
    with pytest.raises(AddressNotAllowed):
        Guard(NO_LIST, resolver).check("https://calendar.example.com/dav/")
    assert resolver.asked == ["calendar.example.com"]


def test_a_name_with_public_addresses_passes_and_a_literal_is_not_looked_up() -> None:
    resolver = CountingResolver(["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"])
    checked = Guard(NO_LIST, resolver).check("https://Calendar.Example.com:8443/dav/")
    assert (checked.target.host, checked.target.port) == ("calendar.example.com", 8443)
    assert [str(a) for a in checked.addresses] == ["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"]
    with pytest.raises(AddressNotAllowed):
        Guard(NO_LIST, resolver).check("http://0x7f000001/")
    assert resolver.asked == ["calendar.example.com"]
