from __future__ import annotations

from pathlib import Path

from tests.helpers_app import standalone_config
from wepush.agent.providers.spi import ConfigDocument
from wepush.server.composition._catalog import build_catalog

_LOOPBACK_ACCOUNT = {"baseUrl": "http://127.0.0.1:9", "auth": {"type": "NONE"}}


def _loopback_accepted(tmp_path: Path, **env: str) -> bool:
    catalog, _plugins = build_catalog(standalone_config(tmp_path, **env))
    factory = catalog.get("wepush.http")
    assert factory is not None
    document = ConfigDocument.from_json("wepush.http/account", "1", _LOOPBACK_ACCOUNT)
    return factory.validate_account(document).ok


def test_the_http_provider_refuses_loopback_targets_by_default(tmp_path: Path) -> None:
    assert _loopback_accepted(tmp_path) is False


def test_the_explicit_test_setting_lets_the_http_provider_reach_loopback(tmp_path: Path) -> None:
    assert _loopback_accepted(tmp_path, WEPUSH_SECURITY_LOOPBACK_TARGETS_FOR_TESTS="true") is True
