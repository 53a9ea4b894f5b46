"""Signed plugins load into the same catalog as built-ins; anything doubtful is REJECTED and the rest keeps working."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from tests.unit.plugins._builder import (
    PluginSpec,
    flip_one_byte,
    install_signed,
    install_unsigned,
    new_publisher,
)
from wepush.agent.engine import MappingSecretResolver, RecipientRecord
from wepush.agent.providers.catalog import CatalogState, ProviderCatalog, ProviderStatus
from wepush.agent.providers.http import HttpProviderFactory
from wepush.agent.providers.plugins import (
    PluginHealth,
    PluginLoader,
    PluginStatus,
    PublisherKeyPair,
)
from wepush.agent.providers.spi import CancellationToken, ConfigDocument, ProviderSendRequest
from wepush.agent.providers.testing import ContractSubject, open_session, run_through_engine

PUBLISHER = new_publisher()


def _catalog() -> ProviderCatalog:
    return ProviderCatalog.from_factories([HttpProviderFactory()], source="builtin")


def _load(
    plugins: Path,
    *,
    trusted: tuple[PublisherKeyPair, ...] = (PUBLISHER,),
    developer_mode: bool = False,
    catalog: ProviderCatalog | None = None,
) -> tuple[ProviderCatalog, PluginLoader, list[tuple[str, str | None, str]]]:
    audit: list[tuple[str, str | None, str]] = []
    loader = PluginLoader(
        plugins,
        trusted_keys=[pair.public_text for pair in trusted],
        developer_mode=developer_mode,
        on_rejected=lambda plugin_id, version, reason: audit.append((plugin_id, version, reason)),
    )
    catalog = catalog or _catalog()
    loader.load_into(catalog)
    return catalog, loader, audit


def _only(loader: PluginLoader) -> PluginHealth:
    [health] = loader.health()
    return health


def _subject(catalog: ProviderCatalog, provider_id: str) -> ContractSubject:
    factory = catalog.get(provider_id)
    assert factory is not None
    return ContractSubject(
        factory=factory,
        account=ConfigDocument.from_json("echo/account", "1", {}),
        message=ConfigDocument.from_json("echo/message", "1", {}),
        secrets=MappingSecretResolver({}),
        recipient=lambda n: RecipientRecord.of(f"item-{n}", n, {"address": f"user{n}@example.test"}),
    )


async def test_signed_plugin_loads_and_its_provider_sends_through_the_engine(tmp_path: Path) -> None:
    install_signed(tmp_path, PluginSpec(), PUBLISHER)

    catalog, loader, audit = _load(tmp_path)

    health = _only(loader)
    assert (health.status, health.version, health.providers) == (PluginStatus.ACTIVE, "1.0.0", ("acme.echo",))
    assert health.key_id == PUBLISHER.key_id
    assert catalog.health().state is CatalogState.HEALTHY
    assert [d.provider_id for d in catalog.list()] == ["acme.echo", "wepush.http"]
    observation = await run_through_engine(_subject(catalog, "acme.echo"), items=5, concurrency=2)
    assert observation.summary.succeeded == 5
    assert audit == []


async def test_plugin_code_and_package_data_come_from_the_verified_files(tmp_path: Path) -> None:
    install_signed(tmp_path, PluginSpec(greeting="verified greeting"), PUBLISHER)
    catalog, _, _ = _load(tmp_path)
    session = await open_session(_subject(catalog, "acme.echo"))
    record = RecipientRecord.of("item-1", 1, {"address": "a@example.test"})
    message = ConfigDocument.from_json("echo/message", "1", {})
    result = await session.send(
        ProviderSendRequest("run", "item-1", 1, record, message, "key", None), CancellationToken()
    )

    assert result.response_body == "verified greeting a@example.test"
    await session.close()
    assert catalog.list()[0].display_name == "Echo (plugin)"


def test_loading_writes_no_bytecode_into_the_plugin_directory(tmp_path: Path) -> None:
    directory = install_signed(tmp_path, PluginSpec(greeting="no cache"), PUBLISHER)

    _, loader, _ = _load(tmp_path)

    assert _only(loader).status is PluginStatus.ACTIVE
    assert sorted(p.name for p in directory.iterdir()) == [
        "LICENSE",
        "__init__.py",
        "_factory.py",
        "greeting.py",
        "plugin.json",
        "plugin.json.sig",
        "provider.json",
        "schemas",
    ]


def test_one_byte_changed_in_a_plugin_file_rejects_it_naming_the_file(tmp_path: Path) -> None:
    directory = install_signed(tmp_path, PluginSpec(), PUBLISHER)
    flip_one_byte(directory / "greeting.py")

    catalog, loader, audit = _load(tmp_path)

    health = _only(loader)
    assert health.status is PluginStatus.REJECTED
    assert "greeting.py: SHA-256 mismatch" in (health.reason or "")
    assert "acme.echo" not in catalog
    assert audit == [("acme.echo", "1.0.0", health.reason)]


def test_manifest_changed_after_signing_is_a_bad_signature(tmp_path: Path) -> None:
    directory = install_signed(tmp_path, PluginSpec(), PUBLISHER)
    manifest = json.loads((directory / "plugin.json").read_text(encoding="utf-8"))
    manifest["publisher"]["name"] = "Someone Else"
    (directory / "plugin.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")

    _, loader, _ = _load(tmp_path)

    health = _only(loader)
    assert health.status is PluginStatus.REJECTED
    assert (health.reason or "").startswith("bad signature")
    assert PUBLISHER.key_id in (health.reason or "")


def test_plugin_signed_by_an_untrusted_key_is_rejected(tmp_path: Path) -> None:
    stranger = new_publisher()
    install_signed(tmp_path, PluginSpec(), stranger)

    catalog, loader, audit = _load(tmp_path, trusted=(PUBLISHER,))

    health = _only(loader)
    assert health.status is PluginStatus.REJECTED
    assert (health.reason or "").startswith("untrusted publisher key")
    assert stranger.key_id in (health.reason or "")
    assert catalog.health().state is CatalogState.DEGRADED
    assert len(audit) == 1


def test_plugin_reusing_a_builtin_provider_id_is_rejected_and_the_builtin_keeps_working(
    tmp_path: Path,
) -> None:
    install_signed(tmp_path, PluginSpec(plugin_id="acme.http", provider_id="wepush.http"), PUBLISHER)
    builtin = HttpProviderFactory()
    catalog = ProviderCatalog.from_factories([builtin], source="builtin")

    _, loader, _ = _load(tmp_path, catalog=catalog)

    health = _only(loader)
    assert health.status is PluginStatus.REJECTED
    assert "duplicate provider id 'wepush.http': already provided by builtin[0]" in (health.reason or "")
    assert catalog.get("wepush.http") is builtin
    [rejected] = catalog.health().rejected
    assert (rejected.source, rejected.provider_id) == ("plugin:acme.http@1.0.0", "wepush.http")


def test_two_plugins_with_the_same_provider_id_keep_only_the_first(tmp_path: Path) -> None:
    install_signed(tmp_path, PluginSpec(plugin_id="acme.echo"), PUBLISHER)
    install_signed(tmp_path, PluginSpec(plugin_id="zeta.echo", provider_id="acme.echo"), PUBLISHER)

    _, loader, _ = _load(tmp_path)

    first, second = loader.health()
    assert (first.plugin_id, first.status) == ("acme.echo", PluginStatus.ACTIVE)
    assert (second.plugin_id, second.status) == ("zeta.echo", PluginStatus.REJECTED)
    assert "already provided by plugin:acme.echo@1.0.0" in (second.reason or "")


def test_incompatible_spi_range_is_rejected(tmp_path: Path) -> None:
    install_signed(tmp_path, PluginSpec(spi_min="2", spi_max="3"), PUBLISHER)

    _, loader, _ = _load(tmp_path)

    health = _only(loader)
    assert health.status is PluginStatus.REJECTED
    assert health.reason == (
        "incompatible SPI: the plugin supports Provider SPI 2..3, this agent implements 1"
    )


def test_missing_schema_is_rejected(tmp_path: Path) -> None:
    install_signed(tmp_path, PluginSpec(schemas=("account", "message", "recipient")), PUBLISHER)

    catalog, loader, _ = _load(tmp_path)

    health = _only(loader)
    assert health.status is PluginStatus.REJECTED
    assert "ui.schema.json is missing" in (health.reason or "")
    assert "acme.echo" not in catalog


def test_unlisted_python_file_is_rejected(tmp_path: Path) -> None:
    directory = install_signed(tmp_path, PluginSpec(), PUBLISHER)
    (directory / "sitecustomize.py").write_text("import os\n", encoding="utf-8")

    _, loader, _ = _load(tmp_path)

    health = _only(loader)
    assert health.status is PluginStatus.REJECTED
    assert "unlisted file(s) not covered by the manifest: sitecustomize.py" in (health.reason or "")


def test_unsigned_plugin_is_rejected_outside_developer_mode(tmp_path: Path) -> None:
    install_unsigned(tmp_path, PluginSpec())

    catalog, loader, _ = _load(tmp_path)

    health = _only(loader)
    assert health.status is PluginStatus.REJECTED
    assert "unsigned plugins load only in developer mode" in (health.reason or "")
    assert "acme.echo" not in catalog


def test_developer_mode_loads_an_unsigned_plugin_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    install_unsigned(tmp_path, PluginSpec())

    with caplog.at_level(logging.WARNING, logger="wepush.agent.providers.plugins"):
        catalog, loader, _ = _load(tmp_path, developer_mode=True)

    health = _only(loader)
    assert health.status is PluginStatus.LOADED_UNSIGNED
    assert "developer mode" in (health.reason or "")
    assert "acme.echo" in catalog
    [active] = [p for p in catalog.health().providers if p.provider_id == "acme.echo"]
    assert active.source == "plugin:acme.echo@1.0.0 [unsigned, developer mode]"
    assert any("LOADED_UNSIGNED" in record.getMessage() for record in caplog.records)


def test_developer_mode_still_rejects_a_bad_signature(tmp_path: Path) -> None:
    install_signed(tmp_path, PluginSpec(), new_publisher())

    _, loader, _ = _load(tmp_path, developer_mode=True)

    assert _only(loader).status is PluginStatus.REJECTED


async def test_rejected_plugin_degrades_the_catalog_while_the_others_keep_working(tmp_path: Path) -> None:
    install_signed(tmp_path, PluginSpec(plugin_id="acme.echo"), PUBLISHER)
    broken = install_signed(tmp_path, PluginSpec(plugin_id="acme.other", provider_id="acme.other"), PUBLISHER)
    flip_one_byte(broken / "_factory.py", offset=10)

    catalog, loader, audit = _load(tmp_path)

    assert [(h.plugin_id, h.status) for h in loader.health()] == [
        ("acme.echo", PluginStatus.ACTIVE),
        ("acme.other", PluginStatus.REJECTED),
    ]
    health = catalog.health()
    assert health.state is CatalogState.DEGRADED
    assert [(p.source, p.status) for p in health.rejected] == [
        ("plugin:acme.other@1.0.0", ProviderStatus.REJECTED)
    ]
    assert [entry[0] for entry in audit] == ["acme.other"]
    observation = await run_through_engine(_subject(catalog, "acme.echo"), items=3, concurrency=1)
    assert observation.summary.succeeded == 3
    assert "wepush.http" in catalog


def test_highest_release_is_active_unless_an_active_file_pins_a_version(tmp_path: Path) -> None:
    for version in ("1.0.0", "1.2.0", "2.0.0-rc.1"):
        install_signed(tmp_path, PluginSpec(version=version), PUBLISHER)

    _, automatic, _ = _load(tmp_path)
    (tmp_path / "acme.echo" / "active").write_text("1.0.0\n", encoding="utf-8")
    _, pinned, _ = _load(tmp_path)

    assert (_only(automatic).version, _only(automatic).other_versions) == ("1.2.0", ("1.0.0", "2.0.0-rc.1"))
    assert (_only(pinned).version, _only(pinned).status) == ("1.0.0", PluginStatus.ACTIVE)


def test_active_file_naming_a_missing_version_is_rejected(tmp_path: Path) -> None:
    install_signed(tmp_path, PluginSpec(), PUBLISHER)
    (tmp_path / "acme.echo" / "active").write_text("9.9.9\n", encoding="utf-8")

    _, loader, _ = _load(tmp_path)

    assert _only(loader).reason == "active names version '9.9.9', which is not installed"


def test_manifest_must_agree_with_its_directory(tmp_path: Path) -> None:
    directory = install_signed(tmp_path, PluginSpec(), PUBLISHER)
    directory.rename(tmp_path / "acme.echo" / "1.0.1")

    _, loader, _ = _load(tmp_path)

    assert _only(loader).reason == "plugin.json describes acme.echo@1.0.0 but lives in acme.echo/1.0.1/"


def test_missing_plugins_directory_means_no_plugins(tmp_path: Path) -> None:
    catalog, loader, _ = _load(tmp_path / "absent")

    assert loader.health() == ()
    assert catalog.health().state is CatalogState.HEALTHY


@pytest.mark.parametrize(
    ("init", "reason"),
    [
        (
            b"raise RuntimeError('vendor sdk missing')\n",
            "cannot be imported: RuntimeError: vendor sdk missing",
        ),
        (b"import sys\nsys.exit(3)\n", "cannot be imported: SystemExit: 3"),
        (b"FACTORIES = {}\n", "defines no PROVIDER_FACTORIES mapping"),
        (
            b"from ._factory import EchoProviderFactory\nPROVIDER_FACTORIES = {'acme.other': EchoProviderFactory}\n",
            "the manifest declares providers ['acme.echo'] but the package provides ['acme.other']",
        ),
    ],
    ids=["import-error", "sys-exit", "no-factories", "other-providers"],
)
def test_plugin_package_that_does_not_provide_what_it_declares_is_rejected(
    tmp_path: Path, init: bytes, reason: str
) -> None:
    install_signed(tmp_path, PluginSpec(extra_files={"__init__.py": init}), PUBLISHER)

    catalog, loader, _ = _load(tmp_path)

    health = _only(loader)
    assert health.status is PluginStatus.REJECTED
    assert reason in (health.reason or "")
    assert "acme.echo" not in catalog
    assert "wepush.http" in catalog
