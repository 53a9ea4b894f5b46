"""What runs and what is read is what was verified, under a name no other code can collide with."""

from __future__ import annotations

import importlib
import sys
from importlib import resources
from pathlib import Path

import pytest

from tests.unit.plugins._builder import PluginSpec, install_unsigned
from wepush.agent.providers.catalog import ProviderCatalog
from wepush.agent.providers.plugins import PLUGIN_MODULE_ROOT, PluginLoader, PluginStatus


def _load_package(plugins: Path) -> str:
    catalog = ProviderCatalog()
    [health] = PluginLoader(plugins, developer_mode=True).load_into(catalog)
    assert health.status is PluginStatus.LOADED_UNSIGNED
    return type(catalog.get("acme.echo")).__module__.rpartition(".")[0]


def test_plugin_package_lives_under_its_own_prefix_and_not_on_sys_path(tmp_path: Path) -> None:
    install_unsigned(tmp_path, PluginSpec(greeting="isolation zero"))
    package = _load_package(tmp_path)

    assert package.startswith(f"{PLUGIN_MODULE_ROOT}.acme_echo_1_0_0_")
    assert all(str(tmp_path) not in entry for entry in sys.path)
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("greeting")


def test_a_module_added_after_verification_cannot_be_imported(tmp_path: Path) -> None:
    directory = install_unsigned(tmp_path, PluginSpec(greeting="isolation one"))
    package = _load_package(tmp_path)
    (directory / "late.py").write_text("LATE = True\n", encoding="utf-8")

    with pytest.raises(ModuleNotFoundError, match="among the plugin's verified files"):
        importlib.import_module(f"{package}.late")


def test_package_data_is_served_from_the_verified_bytes(tmp_path: Path) -> None:
    directory = install_unsigned(tmp_path, PluginSpec(greeting="isolation two"))
    package = _load_package(tmp_path)
    original = (directory / "provider.json").read_text(encoding="utf-8")
    (directory / "provider.json").write_text("{}", encoding="utf-8")

    root = resources.files(package)

    assert root.joinpath("provider.json").read_text(encoding="utf-8") == original
    assert sorted(entry.name for entry in root.joinpath("schemas").iterdir()) == [
        "account.schema.json",
        "message.schema.json",
        "recipient.schema.json",
        "ui.schema.json",
    ]
    assert not root.joinpath("missing.json").is_file()
