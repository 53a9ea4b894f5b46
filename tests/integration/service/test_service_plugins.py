from __future__ import annotations

from pathlib import Path

from tests.helpers_app import running_app, standalone_config
from tests.unit.plugins._builder import PluginSpec, flip_one_byte, install_signed, new_publisher


async def test_the_service_loads_signed_plugins_and_audits_rejected_ones(tmp_path: Path) -> None:
    publisher = new_publisher()
    plugins = tmp_path / "data" / "plugins"
    install_signed(plugins, PluginSpec(), publisher)
    tampered = install_signed(
        plugins, PluginSpec(plugin_id="acme.tampered", provider_id="acme.tampered"), publisher
    )
    flip_one_byte(tampered / "greeting.py")
    config = standalone_config(tmp_path, WEPUSH_PLUGINS_TRUSTED_KEYS=publisher.public_text)
    async with running_app(config) as app:
        assert app.runtime.catalog.get("acme.echo") is not None
        assert app.runtime.catalog.get("acme.tampered") is None
        assert app.runtime.catalog.get("wepush.http") is not None
        ready = await app.client.get("/health/ready")
        assert ready.status_code == 200
        providers = ready.json()["checks"]["providers"]["detail"]
        assert "DEGRADED" in providers
        workspace = (await app.client.get("/api/v1/workspaces", headers=app.admin())).json()["items"][0]["id"]
        audit = await app.client.get(
            f"/api/v1/workspaces/{workspace}/audit-events",
            params={"action": "plugin.rejected"},
            headers=app.admin(),
        )
        assert audit.status_code == 200
        events = audit.json()["items"]
        assert [(event["resourceType"], event["resourceId"]) for event in events] == [
            ("PLUGIN", "acme.tampered@1.0.0")
        ]
