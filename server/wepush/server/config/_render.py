"""Render the effective configuration for the start-up log with every secret masked."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

import yaml

from wepush.server.config._model import ServiceConfig

MASK = "******"
_SECRET_KEYS = frozenset({"secret-access-key", "password", "token", "master-key"})


def _mask_url(value: str) -> str:
    try:
        parts = urlsplit(value)
    except ValueError:
        return value
    if parts.password is None:
        return value
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    userinfo = f"{parts.username}:{MASK}@" if parts.username else f"{MASK}@"
    return urlunsplit((parts.scheme, userinfo + host, parts.path, parts.query, parts.fragment))


def _mask(node: Any, key: str | None = None) -> Any:
    if isinstance(node, dict):
        return {k: _mask(v, k) for k, v in node.items()}
    if isinstance(node, list):
        return [_mask(v) for v in node]
    if key in _SECRET_KEYS and node not in (None, ""):
        return MASK
    if isinstance(node, str) and "://" in node:
        return _mask_url(node)
    return node


def render_effective_config(config: ServiceConfig) -> str:
    """YAML text of the effective configuration, secrets masked, derived paths filled in."""
    document = _mask(config.document)
    document["wepush"]["database"]["url"] = _mask_url(config.database.url)
    document["wepush"]["server"]["public-base-url"] = config.server.public_base_url
    rendered: str = yaml.safe_dump(document, sort_keys=False, default_flow_style=False)
    return rendered
