"""Every integer a client can send has a range its column holds: without one, ``"version": 2**63`` passed
validation and failed in the database driver as a 500 (found by the seeded fuzzer)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

OPENAPI = Path(__file__).resolve().parents[2] / "contracts" / "openapi"
_LIMITS = {"int32": 2**31 - 1, "int64": 2**63 - 1}
#: Stored in 32-bit INTEGER columns (versions, revisions, lease epochs).
_INT32 = {
    "ResourceVersion",
    "LeaseEpoch",
    "MessageRevisionNumber",
    "messageRevision",
    "revision",
    "basedOnRevision",
}


def _walk(node: Any, where: list[str]) -> Iterator[tuple[list[str], dict[str, Any]]]:
    if isinstance(node, dict):
        if node.get("type") == "integer":
            yield where, node
        for key, value in node.items():
            yield from _walk(value, [*where, str(key)])
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _walk(value, [*where, str(index)])


def _integers() -> Iterator[tuple[str, dict[str, Any]]]:
    for path in sorted(OPENAPI.rglob("*.yaml")):
        for where, schema in _walk(yaml.safe_load(path.read_text(encoding="utf-8")), []):
            yield f"{path.relative_to(OPENAPI)}#{'/'.join(where)}", schema


INTEGERS = list(_integers())


def test_the_contract_has_integers() -> None:
    assert len(INTEGERS) > 50


@pytest.mark.parametrize(("where", "schema"), INTEGERS, ids=[where for where, _ in INTEGERS])
def test_each_integer_has_a_maximum_its_format_holds(where: str, schema: dict[str, Any]) -> None:
    assert "maximum" in schema, f"{where}: no maximum"
    # Without a format an integer is a small count or limit: it must fit 32 bits.
    assert schema["maximum"] <= _LIMITS[schema.get("format", "int32")], where
    if set(where.replace("#", "/").split("/")) & _INT32:
        assert schema["maximum"] <= _LIMITS["int32"], f"{where} is stored in a 32-bit column"
        assert schema.get("format", "int32") == "int32", where
