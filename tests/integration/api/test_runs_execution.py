"""Whole runs through the Run API with the embedded agent executing them against a loopback vendor:
start, follow the event stream to the end, inspect items and artifacts, resend the failures."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from tests.helpers_app import RunningApp
from tests.integration.api._support_content import HTTP_CONTENT
from tests.integration.api._support_runs import World, confirm, seed_world, service, start
from wepush.agent.providers.testing import RecordedRequest, ScriptedResponse, VendorServer

FAILING = "13800000002"
MESSAGE = HTTP_CONTENT


def _refuse(mobile: str) -> Any:
    def respond(request: RecordedRequest) -> ScriptedResponse:
        body = request.json()
        assert isinstance(body, dict)
        if body.get("mobile") == mobile:
            return ScriptedResponse(400, json={"success": False, "error": "invalid recipient"})
        return ScriptedResponse(200, json={"success": True})

    return respond


async def _http_world(app: RunningApp, vendor: VendorServer) -> World:
    return await seed_world(
        app,
        provider_id="wepush.http",
        account_config={"baseUrl": vendor.base_url, "auth": {"type": "NONE"}},
        message_content=MESSAGE,
        policies={"concurrency": {"min": 1, "max": 4, "target": 2}, "retry": {"maxAttempts": 1}},
    )


async def _until_completed(app: RunningApp, world: World, run_id: str) -> list[str]:
    """Follow the run's SSE stream; it ends by itself after RUN_COMPLETED (the in-process transport
    returns the response only then). Returns the event types in order."""
    response = await asyncio.wait_for(
        app.client.get(world.runs_url(run_id, "events"), headers=app.admin()), 60
    )
    assert response.status_code == 200
    return [line.removeprefix("event: ") for line in response.text.splitlines() if line.startswith("event: ")]


async def test_a_confirmed_run_executes_and_its_failures_are_resent(tmp_path: Path) -> None:
    async with VendorServer() as vendor, service(tmp_path, WEPUSH_AGENT_EMBEDDED_ENABLED="true") as app:
        vendor.respond_with(_refuse(FAILING))
        world = await _http_world(app, vendor)
        token = (await confirm(app, world))["confirmationToken"]
        run_id = (await start(app, world, {"confirmationToken": token})).json()["id"]
        events = await _until_completed(app, world, run_id)
        detail = (await app.client.get(world.runs_url(run_id), headers=app.admin())).json()
        failed_items = (
            await app.client.get(
                world.runs_url(run_id, "items"), headers=app.admin(), params={"state": "FAILED"}
            )
        ).json()
        artifacts = (await app.client.get(world.runs_url(run_id, "artifacts"), headers=app.admin())).json()
        failed_file = next(a for a in artifacts["items"] if a["type"] == "FAILED_ITEMS")
        download = await app.client.get(failed_file["contentHref"], headers=app.admin())
        first_requests = vendor.request_count

        # The vendor accepts everyone now: resend exactly the failed item.
        vendor.respond_with(None)
        confirmation = (
            await app.client.post(
                world.runs_url(run_id, "resend-confirmation"),
                headers=app.admin(),
                json={"outcomes": ["FAILED"]},
            )
        ).json()
        resend = await app.client.post(
            world.runs_url(run_id, "resend"),
            headers={**app.admin(), "Idempotency-Key": "resend-failed"},
            json={"outcomes": ["FAILED"], "confirmationToken": confirmation["confirmationToken"]},
        )
        resend_id = resend.json()["id"]
        await _until_completed(app, world, resend_id)
        resent = (await app.client.get(world.runs_url(resend_id), headers=app.admin())).json()

    assert events[0] == "run_created"
    assert events[-1] == "run_completed"
    assert detail["state"] == "PARTIAL"
    assert (detail["counts"]["succeeded"], detail["counts"]["failed"], detail["counts"]["total"]) == (3, 1, 4)
    assert detail["allowedCommands"] == []
    assert len(failed_items["items"]) == 1
    assert failed_items["items"][0]["sequence"] == 2
    assert download.status_code == 200
    lines = [json.loads(line) for line in download.text.splitlines()]
    assert [line["sequence"] for line in lines] == [2]
    assert first_requests == 4
    assert confirmation["matchingItems"] == 1
    assert resend.status_code == 202
    assert (resent["state"], resent["sourceRunId"], resent["counts"]["succeeded"]) == ("SUCCEEDED", run_id, 1)
    resent_bodies = [r.json() for r in vendor.requests[first_requests:]]
    assert resent_bodies == [{"mobile": FAILING}]


async def test_a_dry_run_executes_without_calling_the_vendor(tmp_path: Path) -> None:
    async with VendorServer() as vendor, service(tmp_path, WEPUSH_AGENT_EMBEDDED_ENABLED="true") as app:
        world = await _http_world(app, vendor)
        response = await start(app, world, {"dryRun": True})
        run_id = response.json()["id"]
        await _until_completed(app, world, run_id)
        detail = (await app.client.get(world.runs_url(run_id), headers=app.admin())).json()

    assert response.status_code == 202
    assert detail["dryRun"] is True
    assert detail["state"] == "SUCCEEDED"
    assert vendor.request_count == 0


async def _state_becomes(app: RunningApp, world: World, run_id: str, *states: str) -> dict[str, Any]:
    """Poll the run detail until it reports one of ``states`` (the executor applies commands
    asynchronously)."""

    async def poll() -> dict[str, Any]:
        while True:
            detail: dict[str, Any] = (
                await app.client.get(world.runs_url(run_id), headers=app.admin())
            ).json()
            if detail["state"] in states:
                return detail
            await asyncio.sleep(0.05)

    return await asyncio.wait_for(poll(), 30)


async def test_the_executor_applies_pause_resume_and_cancel(tmp_path: Path) -> None:
    gate = asyncio.Event()

    async def held(request: RecordedRequest) -> ScriptedResponse:
        await gate.wait()
        return ScriptedResponse(200, json={"success": True})

    async with VendorServer() as vendor, service(tmp_path, WEPUSH_AGENT_EMBEDDED_ENABLED="true") as app:
        vendor.respond_with(held)
        world = await seed_world(
            app,
            provider_id="wepush.http",
            account_config={"baseUrl": vendor.base_url, "auth": {"type": "NONE"}},
            message_content=MESSAGE,
            policies={"concurrency": {"min": 1, "max": 4, "target": 1}, "retry": {"maxAttempts": 1}},
        )
        token = (await confirm(app, world))["confirmationToken"]
        run_id = (await start(app, world, {"confirmationToken": token})).json()["id"]
        await asyncio.wait_for(vendor.wait_for_requests(1), 30)
        pause = await app.client.post(world.runs_url(run_id, "commands", "pause"), headers=app.admin())
        paused = await _state_becomes(app, world, run_id, "PAUSED")
        gate.set()
        pause_command = (
            await app.client.get(
                world.runs_url(run_id, "commands", pause.json()["commandId"]), headers=app.admin()
            )
        ).json()
        gate.clear()
        resume = await app.client.post(world.runs_url(run_id, "commands", "resume"), headers=app.admin())
        await _state_becomes(app, world, run_id, "RUNNING")
        await asyncio.wait_for(vendor.wait_for_requests(2), 30)
        cancel = await app.client.post(
            world.runs_url(run_id, "commands", "cancel"), headers=app.admin(), json={"reason": "stop now"}
        )
        # The item in flight is held until the executor has begun cancelling (the provider may abort
        # it, and the run end, at once): nothing else is dispatched.
        await _state_becomes(app, world, run_id, "CANCELLING", "CANCELLED")
        gate.set()
        events = await _until_completed(app, world, run_id)
        detail = (await app.client.get(world.runs_url(run_id), headers=app.admin())).json()

    assert (pause.status_code, resume.status_code, cancel.status_code) == (202, 202, 202)
    assert paused["allowedCommands"] == ["RESUME", "CANCEL", "CHANGE_CONCURRENCY"]
    assert pause_command["state"] == "APPLIED"
    assert {"command_acknowledged", "run_paused", "run_resumed", "run_cancelling"} <= set(events)
    assert detail["state"] == "CANCELLED"
    counts = detail["counts"]
    # The first item went through, the one in flight was cut off by the cancel (its outcome is the
    # provider's to classify), the two never dispatched are UNSENT.
    assert (counts["total"], counts["succeeded"], counts["unsent"]) == (4, 1, 2)
    assert counts["failed"] + counts["unknown"] == 1
    assert vendor.request_count == 2
