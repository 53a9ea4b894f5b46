from __future__ import annotations

import pytest

from wepush.agent.providers.http import AddressPolicy, AddressRefusedError
from wepush.agent.providers.http._address_policy import legacy_numeric_host

REFUSED = [
    ("127.0.0.1", "loopback"),
    ("127.255.0.9", "loopback"),
    ("::1", "loopback"),
    ("10.0.0.1", "private"),
    ("10.255.255.255", "private"),
    ("172.16.0.1", "private"),
    ("172.31.255.254", "private"),
    ("192.168.1.1", "private"),
    ("169.254.169.254", "cloud metadata endpoint"),
    ("169.254.170.2", "cloud metadata endpoint"),
    ("169.254.170.23", "cloud metadata endpoint"),
    ("169.254.0.23", "cloud metadata endpoint"),
    ("168.63.129.16", "cloud metadata endpoint"),
    ("169.254.1.1", "link-local"),
    ("fe80::1", "link-local"),
    ("fd00:ec2::254", "cloud metadata endpoint"),
    ("100.100.100.200", "cloud metadata endpoint"),
    ("100.64.0.1", "carrier-grade NAT"),
    ("0.0.0.0", "unspecified"),
    ("::", "unspecified"),
    ("ff02::1", "multicast"),
    ("224.0.0.1", "multicast"),
    ("255.255.255.255", "reserved or broadcast"),
    ("240.0.0.1", "reserved or broadcast"),
    ("fc00::1", "unique-local"),
    ("fd12:3456::1", "unique-local"),
    ("::ffff:127.0.0.1", "loopback (embedded in IPv6)"),
    ("::ffff:10.0.0.1", "private (embedded in IPv6)"),
    ("::ffff:169.254.169.254", "cloud metadata endpoint (embedded in IPv6)"),
    ("::127.0.0.1", "loopback (embedded in IPv6)"),
    ("64:ff9b::7f00:1", "loopback (embedded in IPv6)"),
    ("64:ff9b::a9fe:a9fe", "cloud metadata endpoint (embedded in IPv6)"),
    ("2002:7f00:1::", "loopback (embedded in IPv6)"),
    ("2002:c0a8:101::1", "private (embedded in IPv6)"),
    ("192.0.2.10", "documentation"),
    ("2001:db8::1", "documentation"),
    ("198.18.0.1", "benchmarking"),
]


@pytest.mark.parametrize(("address", "reason"), REFUSED)
def test_internal_and_special_addresses_are_refused_by_default(address: str, reason: str) -> None:
    policy = AddressPolicy()

    assert policy.refusal_reason(address) == reason
    with pytest.raises(AddressRefusedError) as raised:
        policy.check(address)
    assert raised.value.reason == reason


@pytest.mark.parametrize("address", ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111", "2002:5db8:d822::1"])
def test_public_addresses_are_allowed(address: str) -> None:
    assert AddressPolicy().refusal_reason(address) is None


def test_allow_list_reopens_a_private_range_for_intranet_delivery() -> None:
    policy = AddressPolicy.from_cidrs(["10.0.0.0/8", "fd00::/8"])

    assert policy.refusal_reason("10.20.30.40") is None
    assert policy.refusal_reason("::ffff:10.0.0.1") is None
    assert policy.refusal_reason("fd12::1") is None
    assert policy.refusal_reason("192.168.1.1") == "private"


@pytest.mark.parametrize(
    ("cidr", "address", "reason"),
    [
        ("127.0.0.0/8", "127.0.0.1", "loopback"),
        ("169.254.0.0/16", "169.254.169.254", "cloud metadata endpoint"),
        ("100.64.0.0/10", "100.100.100.200", "cloud metadata endpoint"),
        ("fd00::/8", "fd00:ec2::254", "cloud metadata endpoint"),
        ("0.0.0.0/0", "0.0.0.0", "unspecified"),
        ("224.0.0.0/4", "224.0.0.1", "multicast"),
    ],
)
def test_allow_list_never_reopens_loopback_metadata_or_unspecified(
    cidr: str, address: str, reason: str
) -> None:
    assert AddressPolicy.from_cidrs([cidr]).refusal_reason(address) == reason


def test_allow_list_reopens_link_local_but_not_the_metadata_address_inside_it() -> None:
    policy = AddressPolicy.from_cidrs(["169.254.0.0/16"])

    assert policy.refusal_reason("169.254.10.10") is None
    assert policy.refusal_reason("169.254.169.254") == "cloud metadata endpoint"


def test_test_setting_reopens_loopback_only() -> None:
    policy = AddressPolicy(allow_loopback=True)

    assert policy.refusal_reason("127.0.0.1") is None
    assert policy.refusal_reason("::1") is None
    assert policy.refusal_reason("::ffff:127.0.0.1") is None
    assert policy.refusal_reason("10.0.0.1") == "private"
    assert policy.refusal_reason("169.254.169.254") == "cloud metadata endpoint"


def test_malformed_cidr_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"10\.0\.0\.1/8"):
        AddressPolicy.from_cidrs(["10.0.0.1/8"])


def test_a_non_address_is_refused() -> None:
    assert AddressPolicy().refusal_reason("example.com") == "not an IP address"


def test_refusal_message_names_the_reason_not_the_address() -> None:
    with pytest.raises(AddressRefusedError) as raised:
        AddressPolicy().check("10.1.2.3")

    assert "10.1.2.3" not in str(raised.value)
    assert "private" in str(raised.value)


@pytest.mark.parametrize(
    ("host", "legacy"),
    [
        ("127.1", True),
        ("2130706433", True),
        ("0x7f.0.0.1", True),
        ("0177.0.0.1", True),
        ("10.0.0.1", False),
        ("api.example.com", False),
        ("1.example.com", False),
    ],
)
def test_legacy_numeric_hosts_are_recognised(host: str, legacy: bool) -> None:
    assert legacy_numeric_host(host) is legacy
