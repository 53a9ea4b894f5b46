"""A secret follows its account only as long as the account sends it to the same place.

Nobody reads a stored secret back through the API, not even an ADMIN (seed: 不提供读取 Secret 明文的普通
API). An update that points the account somewhere else (another base URL or SMTP host, an opened CIDR
range, TLS verification turned off) while it KEEPs the stored secrets would defeat that: the next
connection test or Run hands the secret to the new destination. So such an update must send every
secret it keeps again, with REPLACE, which proves the caller knows it. The provider's account schema
says which members decide the destination by marking them ``x-wepush-destination``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

from wepush.server.application._accounts_schema import json_pointer
from wepush.server.application._accounts_secrets import SecretKeep, SecretWrite
from wepush.server.application.errors import FieldIssue

__all__ = ["DESTINATION_MARK", "destination_paths", "kept_secrets_sent_elsewhere"]

DESTINATION_MARK: Final = "x-wepush-destination"
_MISSING: Final = object()


def _resolved(schema: Any, root: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = schema.get("$ref") if isinstance(schema, Mapping) else None
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part) if isinstance(target, Mapping) else None
        if isinstance(target, Mapping):
            return {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
    return schema if isinstance(schema, Mapping) else {}


def destination_paths(
    schema: Mapping[str, Any], root: Mapping[str, Any] | None = None, path: tuple[str, ...] = ()
) -> Iterator[tuple[str, ...]]:
    """The config paths of members marked ``x-wepush-destination`` (through properties and branches)."""
    root = schema if root is None else root
    node = _resolved(schema, root)
    for name, member in (node.get("properties") or {}).items():
        resolved = _resolved(member, root)
        if resolved.get(DESTINATION_MARK) is True:
            yield (*path, name)
        else:
            yield from destination_paths(member, root, (*path, name))
    for keyword in ("allOf", "anyOf", "oneOf"):
        for branch in node.get(keyword) or ():
            yield from destination_paths(branch, root, path)
    for keyword in ("then", "else"):
        if isinstance(node.get(keyword), Mapping):
            yield from destination_paths(node[keyword], root, path)


def _value_at(config: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = config
    for part in path:
        if not isinstance(node, Mapping) or part not in node:
            return _MISSING
        node = node[part]
    return node


def kept_secrets_sent_elsewhere(
    schema: Mapping[str, Any],
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    writes: Mapping[str, SecretWrite],
) -> list[FieldIssue]:
    """One issue per KEEP secret when a destination member differs between ``before`` and ``after``."""
    moved = sorted(
        {path for path in destination_paths(schema) if _value_at(before, path) != _value_at(after, path)}
    )
    kept = sorted(name for name, write in writes.items() if isinstance(write, SecretKeep))
    if not moved or not kept:
        return []
    where = ", ".join("config" + json_pointer(path) for path in moved)
    return [
        FieldIssue(
            "/secrets" + json_pointer([name]),
            "SECRET_REENTRY_REQUIRED",
            f"the account's destination changed ({where}): send this secret again with REPLACE",
        )
        for name in kept
    ]
