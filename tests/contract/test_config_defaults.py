"""The configuration schema documents the defaults the Service really uses.

Operators read `contracts/jsonschema/config.schema.json` (and the generated docs) to learn what a key does
when it is left out; the loader has its own table of built-in defaults. Both must say the same thing: a
concrete default equals the loader's, and a ``null`` default that the description explains as "null
means <data-dir>/…" names the path the loader derives.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from wepush.server.config._loader import default_document

SCHEMA = json.loads(
    (Path(__file__).resolve().parents[2] / "contracts" / "jsonschema" / "config.schema.json").read_text()
)
_PLACEHOLDERS = {"<data-dir>": "${WEPUSH_DATA_DIR}", "<config-dir>": "${WEPUSH_CONFIG_DIR}"}
_NULL_MEANS = re.compile(r"null means (<[a-z-]+>/[\w.-]*[\w-])", re.IGNORECASE)
_ABSENT = object()


def _documented(node: dict[str, Any], loaded: Any, path: str) -> Iterator[tuple[str, dict[str, Any], Any]]:
    """Every property of the schema with the loader's value at the same path."""
    reference = node.get("$ref", "")
    if reference.startswith("#/$defs/"):
        node = {**SCHEMA["$defs"][reference.removeprefix("#/$defs/")], **node}
    yield path, node, loaded
    for key, child in (node.get("properties") or {}).items():
        value = loaded.get(key, _ABSENT) if isinstance(loaded, dict) else _ABSENT
        yield from _documented(child, value, f"{path}.{key}".lstrip("."))


def _keys() -> list[tuple[str, dict[str, Any], Any]]:
    return list(_documented(SCHEMA, default_document(), ""))


def test_every_concrete_default_is_the_one_the_loader_applies() -> None:
    checked = [
        (path, node["default"], loaded)
        for path, node, loaded in _keys()
        if "default" in node and node["default"] not in ({}, None)
    ]
    assert len(checked) > 20
    assert [(path, documented) for path, documented, loaded in checked if documented != loaded] == []


def test_a_null_default_names_the_path_the_loader_derives() -> None:
    derived = []
    for path, node, loaded in _keys():
        match = _NULL_MEANS.search(node.get("description", ""))
        if node.get("default", _ABSENT) is None and match:
            documented = match.group(1)
            for placeholder, variable in _PLACEHOLDERS.items():
                documented = documented.replace(placeholder, variable)
            derived.append((path, documented, loaded))
    assert len(derived) >= 4
    assert [(path, documented) for path, documented, loaded in derived if documented != loaded] == []
