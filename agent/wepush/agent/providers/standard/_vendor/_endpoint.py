"""Vendor endpoints: production hosts are pinned; only a loopback override exists, for tests.

The override is a factory constructor argument and never part of account
configuration, so a stored account can never redirect a provider (and its
credentials) anywhere but the vendor's official host.
"""

from __future__ import annotations

import ipaddress

from yarl import URL

__all__ = ["host_header", "loopback_override", "vendor_base"]

_LOOPBACK_NAMES = frozenset({"localhost"})


def loopback_override(value: str | None) -> URL | None:
    """Parse a test endpoint such as ``http://127.0.0.1:8080``; anything but loopback is refused."""
    if value is None:
        return None
    url = URL(value)
    if url.scheme not in {"http", "https"} or not url.host:
        raise ValueError("endpoint_override must be an http(s) URL")
    if url.user is not None or url.query_string or url.fragment or url.path not in {"", "/"}:
        raise ValueError("endpoint_override names only scheme, host and port")
    host = url.host
    if host not in _LOOPBACK_NAMES:
        try:
            literal = ipaddress.ip_address(host)
        except ValueError:
            raise ValueError("endpoint_override must point at a loopback address") from None
        if not literal.is_loopback:
            raise ValueError("endpoint_override must point at a loopback address")
    return url.with_path("")


def vendor_base(official_host: str, override: URL | None) -> URL:
    """``https://<official host>`` unless a test override is in force."""
    if override is not None:
        return override
    return URL.build(scheme="https", host=official_host)


def host_header(url: URL) -> str:
    """The ``Host`` value a client sends for ``url`` (port only when it is not the default)."""
    host = url.raw_host or ""
    if ":" in host:
        host = f"[{host}]"
    if url.explicit_port is not None and not url.is_default_port():
        return f"{host}:{url.explicit_port}"
    return host
