"""Which remote addresses the HTTP Provider may connect to (SSRF protection).

The policy is applied to *resolved* addresses, never to host names: a name that
resolves to a loopback or private address is refused exactly like the literal
address. IPv6 forms that embed an IPv4 address (mapped, compatible, 6to4, NAT64)
are unwrapped and the embedded address is judged too, because the kernel or a
translator on the path would deliver the packet to that IPv4 destination.

Three tiers decide the verdict, in order:

1. *Never* ranges — unspecified, loopback, multicast, broadcast/reserved and the
   cloud metadata endpoints. Account configuration cannot re-open them; only the
   factory's explicit test setting may re-open loopback so tests can reach a
   server on 127.0.0.1.
2. *Internal* ranges — RFC 1918, CGNAT, link-local, unique-local, documentation
   and benchmarking ranges, and anything else the standard library does not
   consider globally routable. An account's ``allowedCidrs`` list re-opens these
   for intranet delivery; it is empty by default.
3. Everything else is public and allowed.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "AddressPolicy",
    "AddressRefusedError",
    "IPAddress",
    "IPNetwork",
    "legacy_numeric_host",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def _nets(*cidrs: str) -> tuple[IPNetwork, ...]:
    return tuple(ipaddress.ip_network(cidr) for cidr in cidrs)


# Metadata services hand out cloud credentials; they are refused even when an
# allow-list covers their range (169.254/16, 100.64/10 or fc00::/7).
_METADATA: frozenset[IPAddress] = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack
        "169.254.170.2",  # AWS ECS task metadata
        "169.254.170.23",  # AWS EKS Pod Identity agent
        "169.254.0.23",  # Tencent Cloud
        "168.63.129.16",  # Azure WireServer (a public address, so refused whatever the allow-list)
        "fd00:ec2::254",  # AWS IMDS over IPv6
        "100.100.100.200",  # Alibaba Cloud
    )
)

_NEVER: tuple[tuple[IPNetwork, str], ...] = tuple(
    (net, reason)
    for nets, reason in (
        (_nets("0.0.0.0/8", "::/128"), "unspecified"),
        (_nets("127.0.0.0/8", "::1/128"), "loopback"),
        (_nets("224.0.0.0/4", "ff00::/8"), "multicast"),
        (_nets("240.0.0.0/4"), "reserved or broadcast"),
    )
    for net in nets
)

_LOOPBACK: tuple[IPNetwork, ...] = _nets("127.0.0.0/8", "::1/128")

_INTERNAL: tuple[tuple[IPNetwork, str], ...] = tuple(
    (net, reason)
    for nets, reason in (
        (_nets("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"), "private"),
        (_nets("100.64.0.0/10"), "carrier-grade NAT"),
        (_nets("169.254.0.0/16", "fe80::/10"), "link-local"),
        (_nets("fc00::/7", "fec0::/10"), "unique-local"),
        (
            _nets("192.0.0.0/24", "192.88.99.0/24", "64:ff9b:1::/48", "2001::/32", "100::/64"),
            "special-purpose",
        ),
        (_nets("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32"), "documentation"),
        (_nets("198.18.0.0/15"), "benchmarking"),
    )
    for net in nets
)

_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_NUMERIC_LABEL = re.compile(r"(?i)^(?:0x[0-9a-f]*|[0-9]+)$")
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")


class AddressRefusedError(OSError):
    """A destination address was refused by the :class:`AddressPolicy`.

    Subclassing :class:`OSError` lets it travel through aiohttp's connector, which
    wraps resolver ``OSError`` s in ``ClientConnectorDNSError`` with this
    exception as ``os_error``; the session recognises it there.
    """

    def __init__(self, address: str, reason: str) -> None:
        super().__init__(f"destination address refused: {reason}")
        self.address = address
        self.reason = reason


def legacy_numeric_host(host: str) -> bool:
    """``127.1``, ``2130706433``, ``0x7f.0.0.1``: numeric forms resolvers turn into addresses.

    They are refused outright rather than resolved: no legitimate endpoint is
    written that way, and some parsers disagree about which address they mean.
    """
    labels = host.rstrip(".").split(".")
    if not all(_NUMERIC_LABEL.match(label) for label in labels):
        return False
    try:
        ipaddress.IPv4Address(host)
    except ValueError:
        return True
    return False


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 destination an IPv6 address stands for, if it embeds one."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64 or (address in _IPV4_COMPATIBLE and int(address) > 1):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


@dataclass(frozen=True, slots=True)
class AddressPolicy:
    """Decides whether the HTTP Provider may connect to an address.

    ``allowed_networks`` re-opens internal ranges (intranet delivery); it never
    re-opens the *never* tier. ``allow_loopback`` exists for tests only and is
    set from the factory's constructor, never from account configuration.
    """

    allowed_networks: tuple[IPNetwork, ...] = ()
    allow_loopback: bool = False

    @classmethod
    def from_cidrs(cls, cidrs: Iterable[str], *, allow_loopback: bool = False) -> AddressPolicy:
        """Build a policy from CIDR strings; raises ``ValueError`` on a malformed CIDR."""
        return cls(
            allowed_networks=tuple(ipaddress.ip_network(c, strict=True) for c in cidrs),
            allow_loopback=allow_loopback,
        )

    def refusal_reason(self, address: str | IPAddress) -> str | None:
        """``None`` when ``address`` may be contacted, otherwise a short reason."""
        try:
            ip = ipaddress.ip_address(address) if isinstance(address, str) else address
        except ValueError:
            return "not an IP address"
        if isinstance(ip, ipaddress.IPv6Address) and ip.scope_id:
            # A zone index only makes sense for link-local destinations.
            ip = ipaddress.IPv6Address(ip.compressed.split("%", 1)[0])
        reason = self._judge(ip)
        if reason is None and isinstance(ip, ipaddress.IPv6Address):
            embedded = _embedded_ipv4(ip)
            if embedded is not None:
                inner = self._judge(embedded)
                if inner is not None:
                    return f"{inner} (embedded in IPv6)"
        return reason

    def check(self, address: str | IPAddress) -> None:
        """Raise :class:`AddressRefusedError` unless ``address`` may be contacted."""
        reason = self.refusal_reason(address)
        if reason is not None:
            raise AddressRefusedError(str(address), reason)

    def _judge(self, ip: IPAddress) -> str | None:
        if ip in _METADATA:
            return "cloud metadata endpoint"
        if self.allow_loopback and any(ip in net for net in _LOOPBACK if net.version == ip.version):
            return None
        for net, reason in _NEVER:
            if net.version == ip.version and ip in net:
                return reason
        if any(net.version == ip.version and ip in net for net in self.allowed_networks):
            return None
        for net, reason in _INTERNAL:
            if net.version == ip.version and ip in net:
                return reason
        if isinstance(ip, ipaddress.IPv6Address) and _embedded_ipv4(ip) is not None:
            # Tunnelling prefixes are judged by their embedded address (caller).
            return None
        if not ip.is_global:
            return "not globally routable"
        return None
