"""Accounts through the real API: CRUD, validation order, versions, references, roles and idempotency."""

from __future__ import annotations

from pathlib import Path

from tests.integration.api._support import (
    accounts_url,
    add_job_using,
    create_account,
    create_workspace,
    default_workspace,
    http_account,
    issue_token,
    service,
)
from wepush.agent.providers.catalog import ProviderCatalog
from wepush.agent.providers.fake import FakeProviderFactory


async def test_account_crud_reports_secrets_as_status_only(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        created = await create_account(app, ws, http_account())
        assert created["providerId"] == "wepush.http"
        assert created["config"]["auth"]["token"] == {"$secret": "http-account-token"}
        assert created["secrets"]["http-account-token"]["configured"] is True
        assert created["secrets"]["http-account-token"]["updatedAt"].endswith("Z")
        assert created["version"] == 1

        got = await app.client.get(accounts_url(ws, created["id"]), headers=app.admin())
        assert got.status_code == 200
        assert got.json() == created

        # Same destination, so the stored secret may be kept (a new baseUrl would need it sent again).
        update = http_account("orders-renamed", value=None, requestTimeout="PT7S")
        update.pop("providerId")
        update["secrets"] = {"http-account-token": {"operation": "KEEP"}}
        update["version"] = 1
        updated = await app.client.put(accounts_url(ws, created["id"]), headers=app.admin(), json=update)
        assert updated.status_code == 200, updated.text
        assert updated.json()["name"] == "orders-renamed"
        assert updated.json()["config"]["requestTimeout"] == "PT7S"
        assert updated.json()["version"] == 2
        assert updated.json()["secrets"] == created["secrets"]  # KEEP: same secret, same change time

        deleted = await app.client.delete(accounts_url(ws, created["id"]), headers=app.admin())
        assert deleted.status_code == 204
        gone = await app.client.get(accounts_url(ws, created["id"]), headers=app.admin())
        assert gone.status_code == 404
        assert gone.json()["code"] == "RESOURCE_NOT_FOUND"


async def test_list_filters_by_provider_and_name_and_pages_with_cursors(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        for name in ("Orders EU", "orders US", "billing", "Shipping orders"):
            await create_account(app, ws, http_account(name))
        named = await app.client.get(accounts_url(ws), headers=app.admin(), params={"name": "ORDERS"})
        assert sorted(a["name"] for a in named.json()["items"]) == [
            "Orders EU",
            "Shipping orders",
            "orders US",
        ]
        other = await app.client.get(
            accounts_url(ws), headers=app.admin(), params={"providerId": "wepush.smtp"}
        )
        assert other.json()["items"] == []

        seen: list[str] = []
        params: dict[str, str | int] = {"limit": 2, "name": "orders"}
        while True:
            page = (await app.client.get(accounts_url(ws), headers=app.admin(), params=params)).json()
            seen.extend(a["name"] for a in page["items"])
            if not page["page"]["hasMore"]:
                break
            params["cursor"] = page["page"]["nextCursor"]
        assert seen == ["Shipping orders", "orders US", "Orders EU"]  # newest first, each exactly once

        reused = await app.client.get(
            accounts_url(ws), headers=app.admin(), params={"limit": 2, "cursor": str(params["cursor"])}
        )
        assert reused.status_code == 400
        assert reused.json()["code"] == "CURSOR_INVALID"  # the cursor is bound to the name filter


async def test_schema_violations_name_each_field(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        body = http_account(connectTimeout="five seconds", surprise=True)
        del body["config"]["baseUrl"]
        response = await app.client.post(accounts_url(ws), headers=app.admin(), json=body)
        assert response.status_code == 400
        problem = response.json()
        assert problem["code"] == "VALIDATION_FAILED"
        issues = {(e["field"], e["code"]) for e in problem["errors"]}
        assert ("/config/baseUrl", "REQUIRED") in issues
        assert ("/config/surprise", "UNKNOWN_FIELD") in issues
        assert ("/config/connectTimeout", "PATTERN_MISMATCH") in issues


async def test_secret_reference_must_name_a_configured_secret(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        response = await app.client.post(accounts_url(ws), headers=app.admin(), json=http_account(value=None))
        assert response.status_code == 400
        assert response.json()["errors"] == [
            {
                "field": "/config/auth/token",
                "code": "SECRET_NOT_CONFIGURED",
                "message": "references the secret 'http-account-token', which is not configured in 'secrets'",
            }
        ]


async def test_provider_semantic_refusal_is_422_with_its_issues(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        # Schema-valid, but the provider refuses loopback destinations unless built for tests.
        body = http_account(base_url="http://127.0.0.1:8080/hook")
        response = await app.client.post(accounts_url(ws), headers=app.admin(), json=body)
        assert response.status_code == 422
        problem = response.json()
        assert problem["code"] == "PROVIDER_CONFIG_INVALID"
        assert [(e["field"], e["code"]) for e in problem["errors"]] == [
            ("/config/baseUrl", "ADDRESS_REFUSED")
        ]
        listed = await app.client.get(accounts_url(ws), headers=app.admin())
        assert listed.json()["items"] == []


async def test_unknown_provider_is_a_field_error(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        body = {**http_account(), "providerId": "acme.pigeon"}
        response = await app.client.post(accounts_url(ws), headers=app.admin(), json=body)
        assert response.status_code == 400
        assert response.json()["errors"][0]["field"] == "/providerId"


async def test_account_whose_provider_left_the_catalog_is_not_available(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        created = await create_account(app, ws, http_account())
    # The same data directory, restarted with a catalog that no longer has the HTTP provider.
    async with service(tmp_path, catalog=ProviderCatalog.from_factories([FakeProviderFactory()])) as app:
        update = {"name": "x", "config": created["config"], "version": 1}
        response = await app.client.put(accounts_url(ws, created["id"]), headers=app.admin(), json=update)
        assert response.status_code == 503
        assert response.json()["code"] == "PROVIDER_NOT_AVAILABLE"
        readable = await app.client.get(accounts_url(ws, created["id"]), headers=app.admin())
        assert readable.status_code == 200


async def test_stale_version_is_a_conflict(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        created = await create_account(app, ws, http_account())
        update = {
            "name": "first",
            "config": created["config"],
            "secrets": {"http-account-token": {"operation": "KEEP"}},
            "version": 1,
        }
        first = await app.client.put(accounts_url(ws, created["id"]), headers=app.admin(), json=update)
        assert first.status_code == 200
        second = await app.client.put(
            accounts_url(ws, created["id"]), headers=app.admin(), json={**update, "name": "second"}
        )
        assert second.status_code == 409
        assert second.json()["code"] == "VERSION_CONFLICT"
        current = await app.client.get(accounts_url(ws, created["id"]), headers=app.admin())
        assert current.json()["name"] == "first"


async def test_account_referenced_by_a_job_cannot_be_deleted(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        created = await create_account(app, ws, http_account())
        await add_job_using(app, ws, created["id"])
        response = await app.client.delete(accounts_url(ws, created["id"]), headers=app.admin())
        assert response.status_code == 409
        assert response.json()["code"] == "RESOURCE_IN_USE"
        still = await app.client.get(accounts_url(ws, created["id"]), headers=app.admin())
        assert still.status_code == 200
        assert still.json()["secrets"]["http-account-token"]["configured"] is True


async def test_viewer_reads_but_every_write_is_denied(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        created = await create_account(app, ws, http_account())
        _, viewer = await issue_token(app, ws, "VIEWER")
        assert (await app.client.get(accounts_url(ws), headers=viewer)).status_code == 200
        assert (await app.client.get(accounts_url(ws, created["id"]), headers=viewer)).status_code == 200
        update = {"name": "x", "config": created["config"], "version": 1}
        writes = [
            await app.client.post(accounts_url(ws), headers=viewer, json=http_account("mine")),
            await app.client.put(accounts_url(ws, created["id"]), headers=viewer, json=update),
            await app.client.delete(accounts_url(ws, created["id"]), headers=viewer),
            await app.client.post(accounts_url(ws, created["id"], "connection-test"), headers=viewer),
        ]
        assert [r.status_code for r in writes] == [403, 403, 403, 403]
        assert {r.json()["code"] for r in writes} == {"ACCESS_DENIED"}
        unchanged = await app.client.get(accounts_url(ws, created["id"]), headers=app.admin())
        assert unchanged.json() == created


async def test_operator_manages_accounts(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        _, operator = await issue_token(app, ws, "OPERATOR")
        response = await app.client.post(accounts_url(ws), headers=operator, json=http_account())
        assert response.status_code == 201


async def test_another_workspace_account_is_not_found(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        created = await create_account(app, ws, http_account())
        other = await create_workspace(app, "team-b")
        _, outsider = await issue_token(app, other, "ADMIN")
        for response in (
            await app.client.get(accounts_url(ws, created["id"]), headers=outsider),
            await app.client.get(accounts_url(ws), headers=outsider),
            await app.client.delete(accounts_url(ws, created["id"]), headers=outsider),
            # The right account id under the wrong workspace is not found either.
            await app.client.get(accounts_url(other, created["id"]), headers=outsider),
        ):
            assert response.status_code == 404
            assert response.json()["code"] == "RESOURCE_NOT_FOUND"


async def test_idempotent_create_replays_and_refuses_a_different_body(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        headers = {**app.admin(), "Idempotency-Key": "create-orders-001"}
        first = await app.client.post(accounts_url(ws), headers=headers, json=http_account())
        again = await app.client.post(accounts_url(ws), headers=headers, json=http_account())
        assert first.status_code == again.status_code == 201
        assert again.json() == first.json()
        assert again.headers["location"] == first.headers["location"]
        listed = await app.client.get(accounts_url(ws), headers=app.admin())
        assert len(listed.json()["items"]) == 1

        # Only the secret value differs: still a different request.
        changed = await app.client.post(
            accounts_url(ws), headers=headers, json=http_account(value="tok-another-value-123")
        )
        assert changed.status_code == 409
        assert changed.json()["code"] == "IDEMPOTENCY_CONFLICT"


async def test_schema_refusals_name_the_rule_and_never_quote_what_was_sent(tmp_path: Path) -> None:
    # A secret typed straight into a field that wants a reference, or into an unchecked pattern.
    pasted = "sk-live-PASTED-BEARER-9d1c"
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        body = http_account(base_url=f"https://user:{pasted}@hooks.example.com x")
        body["config"]["auth"]["token"] = pasted
        account = await app.client.post(accounts_url(ws), headers=app.admin(), json=body)
        message = await app.client.post(
            f"/api/v1/workspaces/{ws}/messages",
            headers=app.admin(),
            json={
                "name": "greeting",
                "providerId": "wepush.http",
                "content": {
                    "method": "POST",
                    "path": "/notify",
                    "headers": {"Authorization": 7},
                    "secret": pasted,
                },
            },
        )
        nameless = await app.client.post(f"/api/v1/workspaces/{ws}/audiences", headers=app.admin(), json={})

    assert account.status_code == 400
    assert pasted not in account.text
    issues = {e["field"]: e["message"] for e in account.json()["errors"]}
    assert issues["/config/baseUrl"] == "does not match the required pattern"
    assert issues["/config/auth/token"].startswith("must satisfy type=")
    assert message.status_code == 400
    assert pasted not in message.text
    assert [e["field"] for e in nameless.json()["errors"]] == ["/name"]
    assert nameless.json()["errors"][0]["message"] == "/name: is required"
