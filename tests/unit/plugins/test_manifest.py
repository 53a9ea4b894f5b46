from __future__ import annotations

import copy
from typing import Any

import pytest

from wepush.agent.providers.plugins import ManifestError, SpiRange
from wepush.agent.providers.plugins._manifest import parse_manifest, read_manifest_json, version_key

VALID: dict[str, Any] = {
    "pluginId": "acme.echo",
    "version": "1.2.3",
    "spi": {"min": "1", "max": "2"},
    "providers": ["acme.echo"],
    "publisher": {"name": "Acme"},
    "files": [{"path": "__init__.py", "sha256": "0" * 64, "size": 0}],
    "signature": {"algorithm": "Ed25519", "keyId": "a" * 64},
}


def _with(**changes: Any) -> dict[str, Any]:
    document = copy.deepcopy(VALID)
    document.update(changes)
    return document


def test_valid_manifest_is_parsed_into_typed_fields() -> None:
    manifest = parse_manifest(VALID)

    assert (manifest.plugin_id, manifest.version, manifest.providers) == (
        "acme.echo",
        "1.2.3",
        ("acme.echo",),
    )
    assert manifest.spi == SpiRange("1", "2")
    assert manifest.key_id == "a" * 64
    assert manifest.files[0].path == "__init__.py"


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        (_with(files=[{"path": "../escape.py", "sha256": "0" * 64, "size": 1}]), "at files/0/path"),
        (_with(providers=[]), "at providers"),
        (_with(pluginId="Acme"), "at pluginId"),
        (_with(extra=True), "Additional properties are not allowed"),
        (_with(signature={"algorithm": "RSA", "keyId": "a" * 64}), "at signature/algorithm"),
    ],
    ids=["path-traversal", "no-providers", "bad-id", "unknown-key", "wrong-algorithm"],
)
def test_manifest_that_breaks_the_contract_schema_is_refused_with_the_location(
    document: dict[str, Any], expected: str
) -> None:
    with pytest.raises(ManifestError, match="does not match the manifest schema") as caught:
        parse_manifest(document)

    assert expected in str(caught.value)


def test_empty_spi_range_is_refused() -> None:
    with pytest.raises(ManifestError, match=r"SPI range 3\.\.1 is empty"):
        parse_manifest(_with(spi={"min": "3", "max": "1"}))


def test_manifest_may_not_list_itself_or_a_file_twice() -> None:
    entry = {"path": "plugin.json", "sha256": "0" * 64, "size": 1}
    with pytest.raises(ManifestError, match=r"must not list plugin\.json"):
        parse_manifest(_with(files=[*VALID["files"], entry]))
    with pytest.raises(ManifestError, match=r"lists __init__\.py more than once"):
        parse_manifest(_with(files=VALID["files"] * 2))


def test_manifest_bytes_must_be_json() -> None:
    with pytest.raises(ManifestError, match="not valid JSON"):
        read_manifest_json(b"{not json")


@pytest.mark.parametrize(("spi", "accepted"), [("1", True), ("2", True), ("3", False), ("2.1", True)])
def test_spi_range_is_inclusive_on_the_major_version(spi: str, accepted: bool) -> None:
    assert SpiRange("1", "2").accepts(spi) is accepted


def test_versions_sort_by_semantic_version_precedence() -> None:
    versions = ["1.10.0", "1.0.0", "1.0.0-beta", "1.0.0-alpha.1", "1.0.0-alpha", "1.9.0", "1.0.0-alpha.beta"]

    ordered = sorted(versions, key=lambda v: version_key(v) or ((0, 0, 0), False, ()))

    assert ordered == [
        "1.0.0-alpha",
        "1.0.0-alpha.1",
        "1.0.0-alpha.beta",
        "1.0.0-beta",
        "1.0.0",
        "1.9.0",
        "1.10.0",
    ]
    assert version_key("latest") is None
