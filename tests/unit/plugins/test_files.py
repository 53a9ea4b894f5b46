"""The version directory must hold exactly the files the manifest lists, byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.plugins._builder import PluginSpec, install_unsigned, write_plugin_sources
from wepush.agent.providers.plugins import ManifestError, PluginManifest, refresh_manifest
from wepush.agent.providers.plugins._files import PluginFilesError, read_verified_files
from wepush.agent.providers.plugins._manifest import parse_manifest


def _manifest(directory: Path) -> PluginManifest:
    return parse_manifest(json.loads((directory / "plugin.json").read_text(encoding="utf-8")))


def _problem(directory: Path) -> str:
    with pytest.raises(PluginFilesError) as caught:
        read_verified_files(directory, _manifest(directory))
    return str(caught.value)


def test_intact_directory_yields_every_listed_file(tmp_path: Path) -> None:
    directory = install_unsigned(tmp_path, PluginSpec())

    files = read_verified_files(directory, _manifest(directory))

    assert files.contents["greeting.py"] == (directory / "greeting.py").read_bytes()
    assert "plugin.json" not in files.contents
    assert "schemas/ui.schema.json" in files.contents


def test_file_of_another_size_is_reported_with_both_sizes(tmp_path: Path) -> None:
    directory = install_unsigned(tmp_path, PluginSpec())
    (directory / "LICENSE").write_text("MIT\n", encoding="utf-8")

    assert "LICENSE: size 4 differs from the manifest's 11" in _problem(directory)


def test_missing_listed_file_is_reported(tmp_path: Path) -> None:
    directory = install_unsigned(tmp_path, PluginSpec())
    (directory / "LICENSE").unlink()

    assert "LICENSE is missing" in _problem(directory)


def test_symbolic_link_is_refused_even_when_its_target_matches(tmp_path: Path) -> None:
    directory = install_unsigned(tmp_path, PluginSpec())
    (tmp_path / "outside").write_bytes((directory / "LICENSE").read_bytes())
    (directory / "LICENSE").unlink()
    (directory / "LICENSE").symlink_to(tmp_path / "outside")

    assert "LICENSE (symbolic link)" in _problem(directory)


def test_bundled_copy_of_the_wepush_packages_is_refused(tmp_path: Path) -> None:
    directory = write_plugin_sources(
        tmp_path / "p", PluginSpec(extra_files={"wepush/agent/__init__.py": b"# shadow\n"})
    )
    refresh_manifest(directory)

    assert "bundles a 'wepush' package" in _problem(directory)


def test_package_without_init_is_refused(tmp_path: Path) -> None:
    directory = write_plugin_sources(tmp_path / "p", PluginSpec())
    (directory / "__init__.py").unlink()
    refresh_manifest(directory)

    assert "lists no __init__.py" in _problem(directory)


def test_refreshing_the_manifest_drops_a_stale_signature(tmp_path: Path) -> None:
    directory = write_plugin_sources(tmp_path / "p", PluginSpec())
    (directory / "plugin.json.sig").write_text("stale\n", encoding="ascii")

    manifest = refresh_manifest(directory)

    assert not (directory / "plugin.json.sig").exists()
    assert manifest.key_id is None
    assert {entry.path for entry in manifest.files} >= {
        "__init__.py",
        "provider.json",
        "schemas/ui.schema.json",
    }


def test_manifest_cannot_be_written_without_its_head(tmp_path: Path) -> None:
    (tmp_path / "__init__.py").write_text("", encoding="utf-8")

    with pytest.raises(ManifestError, match="write it with pluginId"):
        refresh_manifest(tmp_path)
