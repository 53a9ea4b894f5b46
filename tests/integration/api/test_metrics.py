"""``GET /metrics`` after a real run: the embedded agent sends through the HTTP provider to a loopback
vendor (one recipient refused, one answered 503 once and retried), and the exposition tells what the agent
counted and what the shared database holds, on SQLite and on PostgreSQL."""

from __future__ import annotations

import asyncio
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers_app import RunningApp
from tests.integration.api._support_content import HTTP_CONTENT
from tests.integration.api._support_runs import World, confirm, seed_world, service, start
from wepush.agent.providers.testing import RecordedRequest, ScriptedResponse, VendorServer
from wepush.server.infra.db import head_revision

REFUSED, BUSY = "13800000002", "13800000003"
HTTP = "wepush.http"
MESSAGE = HTTP_CONTENT
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def _vendor_script() -> Any:
    busy_once = {BUSY}

    def respond(request: RecordedRequest) -> ScriptedResponse:
        body = request.json()
        assert isinstance(body, dict)
        if body.get("mobile") == REFUSED:
            return ScriptedResponse(400, json={"success": False, "error": "invalid recipient"})
        if body.get("mobile") in busy_once:
            busy_once.discard(str(body["mobile"]))
            return ScriptedResponse(503, json={"success": False})
        return ScriptedResponse(200, json={"success": True})

    return respond


async def _run_to_its_end(app: RunningApp, vendor: VendorServer) -> World:
    vendor.respond_with(_vendor_script())
    world = await seed_world(
        app,
        provider_id=HTTP,
        account_config={"baseUrl": vendor.base_url, "auth": {"type": "NONE"}},
        message_content=MESSAGE,
        policies={
            "concurrency": {"min": 1, "max": 4, "target": 2},
            "retry": {"maxAttempts": 2, "initialDelay": "PT0.1S", "jitter": 0},
        },
    )
    token = (await confirm(app, world))["confirmationToken"]
    run_id = (await start(app, world, {"confirmationToken": token})).json()["id"]
    # The event stream ends by itself after RUN_COMPLETED.
    await asyncio.wait_for(app.client.get(world.runs_url(run_id, "events"), headers=app.admin()), 60)
    return world


async def _scrape(app: RunningApp) -> tuple[str, Samples]:
    response = await app.client.get("/metrics")  # no credential, like the health probes
    assert response.status_code == 200, response.text
    samples = {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }
    return response.headers["content-type"], samples


def _at(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def _assert_the_run_is_told(app: RunningApp, content_type: str, samples: Samples) -> None:
    assert content_type == "text/plain; version=0.0.4; charset=utf-8"
    requests = "wepush_provider_requests_total"
    assert _at(samples, requests, provider=HTTP, result="SUCCEEDED", error_category="") == 3
    assert _at(samples, requests, provider=HTTP, result="FAILED", error_category="TEMPORARY_REMOTE") == 1
    assert _at(samples, requests, provider=HTTP, result="FAILED", error_category="INVALID_REQUEST") == 1
    assert _at(samples, "wepush_provider_retries_total", provider=HTTP, category="TEMPORARY_REMOTE") == 1
    assert _at(samples, "wepush_provider_request_duration_seconds_count", provider=HTTP) == 5
    assert _at(samples, "wepush_run_items_total", result="succeeded", provider=HTTP) == 3
    assert _at(samples, "wepush_run_items_total", result="failed", provider=HTTP) == 1
    assert _at(samples, "wepush_run_inflight", provider=HTTP) == 0
    assert _at(samples, "wepush_runs_total", state="PARTIAL", provider=HTTP) == 1
    assert _at(samples, "wepush_lease_expired_total") == 0
    agent = app.runtime.config.embedded_agent_name
    age = _at(samples, "wepush_agent_heartbeat_age_seconds", agent=agent)
    assert age is not None
    assert age >= 0
    assert _at(samples, "wepush_agent_active_runs", agent=agent) == 0
    assert (_at(samples, "wepush_artifact_upload_bytes_total", type="FAILED_ITEMS") or 0) > 0
    build = {
        "version": metadata.version("wepush-next"),
        "mode": "standalone",
        "schema_revision": head_revision(),
    }
    assert _at(samples, "wepush_build_info", **build) == 1


async def test_a_run_is_told_by_the_metrics_of_the_instance_that_sent_it(tmp_path: Path) -> None:
    async with VendorServer() as vendor, service(tmp_path, WEPUSH_AGENT_EMBEDDED_ENABLED="true") as app:
        await _run_to_its_end(app, vendor)
        content_type, samples = await _scrape(app)

    _assert_the_run_is_told(app, content_type, samples)


@pytest.mark.postgres
async def test_a_run_is_told_by_the_metrics_on_postgresql(tmp_path: Path, postgres_url: str) -> None:
    env = {
        "WEPUSH_DATABASE_TYPE": "postgresql",
        "WEPUSH_DATABASE_URL": postgres_url,
        "WEPUSH_AGENT_EMBEDDED_ENABLED": "true",
    }
    async with VendorServer() as vendor, service(tmp_path, **env) as app:
        await _run_to_its_end(app, vendor)
        content_type, samples = await _scrape(app)

    _assert_the_run_is_told(app, content_type, samples)


async def test_metrics_turned_off_answer_404_as_a_problem(tmp_path: Path) -> None:
    async with service(tmp_path, WEPUSH_METRICS_ENABLED="false") as app:
        response = await app.client.get("/metrics")

    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["code"] == "RESOURCE_NOT_FOUND"
    assert response.json()["detail"] == "metrics are turned off (wepush.metrics.enabled)"


async def test_a_dry_run_adds_no_item_results(tmp_path: Path) -> None:
    async with VendorServer() as vendor, service(tmp_path, WEPUSH_AGENT_EMBEDDED_ENABLED="true") as app:
        world = await seed_world(
            app,
            provider_id=HTTP,
            account_config={"baseUrl": vendor.base_url, "auth": {"type": "NONE"}},
            message_content=MESSAGE,
        )
        run_id = (await start(app, world, {"dryRun": True})).json()["id"]
        await asyncio.wait_for(app.client.get(world.runs_url(run_id, "events"), headers=app.admin()), 60)
        _, samples = await _scrape(app)

    # Nothing was delivered, so nothing is counted as succeeded; the run itself is still a run that ended.
    assert not [name for name, _ in samples if name.startswith(("wepush_run_items", "wepush_provider_"))]
    assert _at(samples, "wepush_runs_total", state="SUCCEEDED", provider=HTTP) == 1


async def test_http_requests_are_counted_per_contract_operation_never_per_path(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        listed = await app.client.get("/api/v1/workspaces", headers=app.admin())
        anonymous = await app.client.get("/api/v1/workspaces")
        # Paths no operation matches share one label, whatever a scanner tries.
        for attempt in ("/wp-login.php", "/api/v1/no-such-thing/1", "/api/v1/no-such-thing/2"):
            assert (await app.client.get(attempt)).status_code == 404
        _, samples = await _scrape(app)

    requests = "wepush_http_requests_total"
    assert (listed.status_code, anonymous.status_code) == (200, 401)
    assert _at(samples, requests, operation="listWorkspaces", method="GET", status="200") == 1
    assert _at(samples, requests, operation="listWorkspaces", method="GET", status="401") == 1
    assert _at(samples, requests, operation="unmatched", method="GET", status="404") == 3
    assert _at(samples, "wepush_http_request_duration_seconds_count", operation="listWorkspaces") == 2
    operations = {dict(labels).get("operation") for name, labels in samples if name == requests}
    assert operations == {"listWorkspaces", "unmatched"}  # this scrape is counted once it has answered
