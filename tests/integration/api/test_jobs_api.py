"""Jobs through the API: references checked in the workspace, effective policies, versions, deletion rules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.integration.api._support import default_workspace, service, uow
from tests.integration.api._support_content import (
    HTTP_CONTENT,
    create_message,
    expect,
    job_body,
    job_world,
    ws_url,
)
from wepush.server.domain import Account, utc_now


async def test_a_job_is_created_with_effective_policies_and_updated_by_version(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        world = await job_world(app, ws)
        policies = {"concurrency": {"max": 50, "target": 20}, "retry": {"maxAttempts": 2, "jitter": "PT0.5S"}}
        response = await app.client.post(
            ws_url(ws, "jobs"), headers=app.admin(), json=job_body(world, policies=policies)
        )
        job = expect(response, 201)
        assert response.headers["location"].endswith(f"/jobs/{job['id']}")
        assert (job["providerId"], job["messageRevision"], job["version"]) == ("wepush.http", 1, 1)
        assert job["policies"]["concurrency"] == {"min": 1, "max": 50, "target": 20}
        assert job["policies"]["retry"]["maxAttempts"] == 2
        assert job["policies"]["retry"]["jitter"] == "PT0.5S"
        assert job["policies"]["timeout"]["item"]
        assert expect(await app.client.get(ws_url(ws, "jobs", job["id"]), headers=app.admin()), 200) == job

        await app.client.post(
            ws_url(ws, "messages", world["messageId"], "revisions"),
            headers=app.admin(),
            json={"content": {**HTTP_CONTENT, "path": "/v2"}, "basedOnRevision": 1},
        )
        url = ws_url(ws, "jobs", job["id"])
        # Leaving the policies out would have reset the job's limits to the defaults: it is refused.
        bare = await app.client.put(
            url, headers=app.admin(), json=job_body(world, messageRevision=2, version=1)
        )
        assert await _errors(bare) == [("/policies", "INVALID")]
        assert bare.json()["errors"][0]["message"] == "/policies: is required"
        updated = expect(
            await app.client.put(
                url,
                headers=app.admin(),
                json=job_body(world, messageRevision=2, policies=job["policies"], version=1),
            ),
            200,
        )
        assert (updated["messageRevision"], updated["version"]) == (2, 2)
        assert updated["policies"] == job["policies"]
        defaults = expect(
            await app.client.put(url, headers=app.admin(), json=job_body(world, policies={}, version=2)), 200
        )
        assert defaults["policies"]["concurrency"] == {"min": 1, "max": 32, "target": 8}
        stale = await app.client.put(url, headers=app.admin(), json=job_body(world, policies={}, version=1))
        assert (stale.status_code, stale.json()["code"]) == (409, "VERSION_CONFLICT")

        listed = expect(
            await app.client.get(ws_url(ws, "jobs"), headers=app.admin(), params={"name": "WEEK"}), 200
        )
        assert [j["id"] for j in listed["items"]] == [job["id"]]


async def _errors(response: Any) -> list[tuple[str, str]]:
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["code"] == "VALIDATION_FAILED"
    return [(e["field"], e["code"]) for e in body["errors"]]


async def test_job_validation_names_each_bad_field(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        world = await job_world(app, ws)
        url = ws_url(ws, "jobs")

        async def post(**changes: Any) -> list[tuple[str, str]]:
            return await _errors(
                await app.client.post(url, headers=app.admin(), json=job_body({**world, **changes}))
            )

        assert await post(accountId="no-such-account") == [("/accountId", "NOT_FOUND")]
        assert await post(audienceSnapshotId="no-such-snapshot") == [("/audienceSnapshotId", "NOT_FOUND")]
        assert await _errors(
            await app.client.post(url, headers=app.admin(), json=job_body(world, messageRevision=9))
        ) == [("/messageRevision", "NOT_FOUND")]

        now = utc_now()
        other = Account(
            workspace_id=ws,
            name="fake account",
            provider_id="wepush.fake",
            provider_version="1.0.0",
            config={},
            schema_version="1",
            created_at=now,
            updated_at=now,
        )
        async with uow(app)() as tx:
            await tx.accounts.add(other)
        assert await post(accountId=other.id) == [("/messageId", "PROVIDER_MISMATCH")]

        inconsistent = await app.client.post(
            url, headers=app.admin(), json=job_body(world, policies={"concurrency": {"min": 10, "max": 5}})
        )
        assert ("/policies/concurrency/max", "OUT_OF_RANGE") in await _errors(inconsistent)
        jitter = await app.client.post(
            url,
            headers=app.admin(),
            json=job_body(world, policies={"retry": {"initialDelay": "PT1S", "jitter": "PT2S"}}),
        )
        assert await _errors(jitter) == [("/policies/retry/jitter", "OUT_OF_RANGE")]
        # A duration past what a timestamp can hold is named by its own field, not by "/policies".
        endless = await app.client.post(
            url, headers=app.admin(), json=job_body(world, policies={"timeout": {"item": "P99999999999999D"}})
        )
        assert await _errors(endless) == [("/policies/timeout/item", "MALFORMED")]
        assert expect(await app.client.get(url, headers=app.admin()), 200)["items"] == []


async def test_a_job_whose_message_sends_to_a_field_the_snapshot_lacks_is_refused(tmp_path: Path) -> None:
    """SMTP sends to the recipient field ``toField`` names ("email" unless set): with an audience of
    mobile numbers every item would fail "recipient has no field 'email'", so the job is refused."""
    async with service(tmp_path, catalog=None) as app:
        ws = await default_workspace(app)
        world = await job_world(app, ws)  # recipients have the fields mobile and name
        account = expect(
            await app.client.post(
                ws_url(ws, "accounts"),
                headers=app.admin(),
                json={
                    "name": "mail",
                    "providerId": "wepush.smtp",
                    "config": {"host": "smtp.example.test", "fromAddress": "ops@example.test"},
                },
            ),
            201,
        )

        async def smtp_message(name: str, content: dict[str, Any]) -> str:
            created = await app.client.post(
                ws_url(ws, "messages"),
                headers=app.admin(),
                json={"name": name, "providerId": "wepush.smtp", "content": content},
            )
            return str(expect(created, 201)["id"])

        by_default = await smtp_message("default field", {"subject": "Hi {{name}}", "textBody": "x"})
        display = await smtp_message(
            "display name", {"subject": "Hi", "textBody": "x", "toField": "name", "nameField": "fullname"}
        )
        usable = await smtp_message("mobile field", {"subject": "Hi", "textBody": "x", "toField": "mobile"})
        url = ws_url(ws, "jobs")
        mail = {**world, "accountId": account["id"]}

        refused = await app.client.post(
            url, headers=app.admin(), json=job_body({**mail, "messageId": by_default})
        )
        named = await app.client.post(url, headers=app.admin(), json=job_body({**mail, "messageId": display}))
        accepted = await app.client.post(
            url, headers=app.admin(), json=job_body({**mail, "messageId": usable})
        )

    assert await _errors(refused) == [("/audienceSnapshotId", "RECIPIENT_FIELD_NOT_IN_AUDIENCE")]
    message = refused.json()["errors"][0]["message"]
    assert "'email' (toField)" in message
    assert "mobile, name" in message
    assert await _errors(named) == [("/audienceSnapshotId", "RECIPIENT_FIELD_NOT_IN_AUDIENCE")]
    assert "'fullname' (nameField)" in named.json()["errors"][0]["message"]
    expect(accepted, 201)


async def test_a_job_whose_message_uses_a_field_the_snapshot_lacks_is_refused(tmp_path: Path) -> None:
    # Every recipient would fail at send time with "recipient has no field 'city'": refused when saved.
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        world = await job_world(app, ws)  # recipients have the fields mobile and name
        url = ws_url(ws, "jobs")
        templated = await create_message(
            app,
            ws,
            "city news",
            {
                **HTTP_CONTENT,
                "path": "/cities/{{city}}",
                "headers": {"X-Greeting": "Hello {{name}}", "X-Zip": "{{ zip }}"},
            },
        )

        refused = await app.client.post(
            url, headers=app.admin(), json=job_body({**world, "messageId": templated["id"]})
        )

        assert await _errors(refused) == [("/audienceSnapshotId", "VARIABLE_NOT_IN_AUDIENCE")]
        message = refused.json()["errors"][0]["message"]
        assert "{{city}}, {{zip}}" in message
        assert "mobile, name" in message
        assert expect(await app.client.get(url, headers=app.admin()), 200)["items"] == []

        # The same check holds for an update that switches to that message.
        job = expect(await app.client.post(url, headers=app.admin(), json=job_body(world)), 201)
        switched = await app.client.put(
            ws_url(ws, "jobs", job["id"]),
            headers=app.admin(),
            json=job_body({**world, "messageId": templated["id"]}, policies={}, version=1),
        )
        assert await _errors(switched) == [("/audienceSnapshotId", "VARIABLE_NOT_IN_AUDIENCE")]

        # A revision that uses only fields the recipients have is accepted.
        expect(
            await app.client.post(
                ws_url(ws, "messages", templated["id"], "revisions"),
                headers=app.admin(),
                json={"content": {**HTTP_CONTENT, "path": "/people/{{name}}"}, "basedOnRevision": 1},
            ),
            201,
        )
        accepted = await app.client.post(
            url,
            headers=app.admin(),
            json=job_body({**world, "messageId": templated["id"]}, name="people", messageRevision=2),
        )
        expect(accepted, 201)


async def test_keeping_response_bodies_needs_a_message_that_reads_them(tmp_path: Path) -> None:
    # Before, the job was accepted and every Run's results silently held a summary only.
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        world = await job_world(app, ws)
        url = ws_url(ws, "jobs")
        keep = {"result": {"saveResponseBody": True}}

        refused = await app.client.post(url, headers=app.admin(), json=job_body(world, policies=keep))

        assert await _errors(refused) == [("/policies/result/saveResponseBody", "RESPONSE_BODY_NOT_READ")]
        assert "set saveResponseBody to true" in refused.json()["errors"][0]["message"]
        expect(
            await app.client.post(
                ws_url(ws, "messages", world["messageId"], "revisions"),
                headers=app.admin(),
                json={"content": {**HTTP_CONTENT, "saveResponseBody": True}, "basedOnRevision": 1},
            ),
            201,
        )
        kept = expect(
            await app.client.post(
                url, headers=app.admin(), json=job_body(world, policies=keep, messageRevision=2)
            ),
            201,
        )
        assert kept["policies"]["result"]["saveResponseBody"] is True
        # Going back to the revision that reads nothing is refused the same way.
        back = await app.client.put(
            ws_url(ws, "jobs", kept["id"]),
            headers=app.admin(),
            json=job_body(world, policies=keep, messageRevision=1, version=1),
        )
        assert await _errors(back) == [("/policies/result/saveResponseBody", "RESPONSE_BODY_NOT_READ")]


async def test_referenced_resources_cannot_be_deleted_until_the_job_is_gone(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        world = await job_world(app, ws)
        headers = {**app.admin(), "Idempotency-Key": "job-1"}
        job = expect(await app.client.post(ws_url(ws, "jobs"), headers=headers, json=job_body(world)), 201)
        replay = expect(await app.client.post(ws_url(ws, "jobs"), headers=headers, json=job_body(world)), 201)
        assert replay == job

        message_url = ws_url(ws, "messages", world["messageId"])
        in_use = await app.client.delete(message_url, headers=app.admin())
        assert (in_use.status_code, in_use.json()["code"]) == (409, "RESOURCE_IN_USE")
        snapshot = expect(
            await app.client.get(
                ws_url(ws, "audience-snapshots", world["audienceSnapshotId"]), headers=app.admin()
            ),
            200,
        )
        audience_url = ws_url(ws, "audiences", snapshot["audienceId"])
        assert (await app.client.delete(audience_url, headers=app.admin())).status_code == 409

        assert (
            await app.client.delete(ws_url(ws, "jobs", job["id"]), headers=app.admin())
        ).status_code == 204
        assert (await app.client.get(ws_url(ws, "jobs", job["id"]), headers=app.admin())).status_code == 404
        assert (await app.client.delete(message_url, headers=app.admin())).status_code == 204
        assert (await app.client.delete(audience_url, headers=app.admin())).status_code == 204


async def test_an_update_is_validated_like_a_create(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        world = await job_world(app, ws)
        job = expect(
            await app.client.post(ws_url(ws, "jobs"), headers=app.admin(), json=job_body(world)), 201
        )
        message = await create_message(app, ws, "second")
        response = await app.client.put(
            ws_url(ws, "jobs", job["id"]),
            headers=app.admin(),
            json=job_body({**world, "messageId": message["id"]}, messageRevision=4, policies={}, version=1),
        )
        assert await _errors(response) == [("/messageRevision", "NOT_FOUND")]
