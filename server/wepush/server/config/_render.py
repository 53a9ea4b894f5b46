"""Render the effective configuration for the start-up log with every secret masked."""

from __future__ import annotations

import re
from typing import Any

import yaml

from wepush.server.config._model import ServiceConfig

MASK = "******"
_SECRET_KEYS = frozenset({"secret-access-key", "password", "token", "master-key"})


#: ``scheme://user:password@rest`` as SQLAlchemy reads it: the password runs to the first ``@`` and
#: may hold ``#``, ``/`` or ``?``, which a URL parser would take for the start of the fragment, path or
#: query (and then show the password).
_USERINFO = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^:@/]*):(?P<password>[^@]*)@", re.DOTALL)
#: Query parameters that carry credentials (``?password=…`` is a libpq and asyncpg connection option).
_SECRET_QUERY = re.compile(
    r"(?P<name>[?&](?:password|passwd|secret|token|access[_-]?key|secret[_-]?access[_-]?key)=)[^&#]*",
    re.IGNORECASE,
)


def _mask_url(value: str) -> str:
    masked = _USERINFO.sub(lambda m: f"{m['head']}:{MASK}@", value, count=1)
    return _SECRET_QUERY.sub(lambda m: m["name"] + MASK, masked)


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
    # The URL decides the database; the printed type says which one it chose.
    document["wepush"]["database"]["type"] = config.database.type
    document["wepush"]["server"]["public-base-url"] = config.server.public_base_url
    rendered: str = yaml.safe_dump(document, sort_keys=False, default_flow_style=False)
    return rendered
