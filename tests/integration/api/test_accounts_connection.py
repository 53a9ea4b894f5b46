"""The explicit connection test, against a vendor stand-in on loopback."""

from __future__ import annotations

import socket
from pathlib import Path

from tests.integration.api._support import (
    API,
    OTHER_SECRET_VALUE,
    SECRET_VALUE,
    accounts_url,
    create_account,
    default_workspace,
    http_account,
    loopback_catalog,
    service,
    vendor_server,
)
from wepush.agent.providers.testing import ScriptedResponse, VendorServer


def _unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_connection_test_uses_the_stored_secret_and_is_never_implicit(tmp_path: Path) -> None:
    async with vendor_server(SECRET_VALUE) as vendor, service(tmp_path, catalog=loopback_catalog()) as app:
        ws = await default_workspace(app)
        created = await create_account(app, ws, http_account(base_url=vendor.base_url))
        assert vendor.seen_authorization == []  # saving never contacts the endpoint

        response = await app.client.post(
            accounts_url(ws, created["id"], "connection-test"), headers=app.admin()
        )
        assert response.status_code == 200
        result = response.json()
        assert result["ok"] is True
        assert result["checked"] is True  # the HTTP provider reached the endpoint
        assert "category" not in result
        assert result["latencyMs"] >= 0
        assert vendor.seen_authorization == [f"Bearer {SECRET_VALUE}"]


async def test_rejected_credentials_are_reported_as_an_authentication_failure(tmp_path: Path) -> None:
    async with (
        vendor_server(OTHER_SECRET_VALUE) as vendor,
        service(tmp_path, catalog=loopback_catalog()) as app,
    ):
        ws = await default_workspace(app)
        created = await create_account(app, ws, http_account(base_url=vendor.base_url))
        response = await app.client.post(
            accounts_url(ws, created["id"], "connection-test"), headers=app.admin(), json={"timeout": "PT3S"}
        )
        assert response.status_code == 200
        result = response.json()
        assert (result["ok"], result["category"]) == (False, "AUTHENTICATION")
        assert SECRET_VALUE not in response.text

        audit = await app.client.get(
            f"{API}/workspaces/{ws}/audit-events",
            headers=app.admin(),
            params={"action": "account.test-connection"},
        )
        [event] = audit.json()["items"]
        assert (event["outcome"], event["resourceId"]) == ("FAILED", created["id"])
        assert event["details"]["summary"] == "Connection test failed: AUTHENTICATION"


async def test_unreachable_endpoint_is_a_network_failure(tmp_path: Path) -> None:
    async with service(tmp_path, catalog=loopback_catalog()) as app:
        ws = await default_workspace(app)
        base_url = f"http://127.0.0.1:{_unused_port()}/api"
        created = await create_account(app, ws, http_account(base_url=base_url))
        response = await app.client.post(
            accounts_url(ws, created["id"], "connection-test"), headers=app.admin()
        )
        assert response.status_code == 200
        assert (response.json()["ok"], response.json()["category"]) == (False, "NETWORK")


async def test_timeout_out_of_range_is_refused(tmp_path: Path) -> None:
    async with service(tmp_path, catalog=loopback_catalog()) as app:
        ws = await default_workspace(app)
        created = await create_account(app, ws, http_account(base_url="http://127.0.0.1:9/api"))
        url = accounts_url(ws, created["id"], "connection-test")
        for timeout in ("PT0S", "PT10M", "P99999999999999D"):
            response = await app.client.post(url, headers=app.admin(), json={"timeout": timeout})
            assert response.status_code == 400
            assert response.json()["errors"][0]["field"] == "/timeout"


async def test_connection_test_of_a_missing_account_is_not_found(tmp_path: Path) -> None:
    async with service(tmp_path, catalog=loopback_catalog()) as app:
        ws = await default_workspace(app)
        response = await app.client.post(
            accounts_url(ws, "no-such-account", "connection-test"), headers=app.admin()
        )
        assert response.status_code == 404


async def test_a_query_credential_is_sealed_and_sent_only_in_the_query_string(tmp_path: Path) -> None:
    query_auth = {
        "type": "QUERY",
        "parameterName": "access_token",
        "value": {"$secret": "http-account-token"},
    }
    async with VendorServer() as vendor, service(tmp_path, catalog=loopback_catalog()) as app:
        vendor.enqueue("/", ScriptedResponse(204))
        ws = await default_workspace(app)
        created = await create_account(app, ws, http_account(base_url=vendor.url("/"), auth=query_auth))
        assert created["config"]["auth"] == query_auth

        response = await app.client.post(
            accounts_url(ws, created["id"], "connection-test"), headers=app.admin()
        )

        assert (response.status_code, response.json()["ok"]) == (200, True)
        [received] = vendor.requests
        assert dict(received.query) == {"access_token": SECRET_VALUE}
        assert "Authorization" not in received.headers


async def test_a_credential_pasted_into_the_base_url_query_is_refused_unechoed(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        body = http_account(base_url=f"https://api.example.com/send?access_token={SECRET_VALUE}")

        response = await app.client.post(accounts_url(ws), headers=app.admin(), json=body)

        assert response.status_code == 422, response.text
        issues = {(e["field"], e["code"]) for e in response.json()["errors"]}
        assert ("/config/baseUrl", "CREDENTIALS_IN_URL") in issues
        assert SECRET_VALUE not in response.text
        listed = await app.client.get(accounts_url(ws), headers=app.admin())
        assert listed.json()["items"] == []


async def test_a_valid_bot_account_passes_and_says_the_vendor_was_not_contacted(tmp_path: Path) -> None:
    """Feishu's bot has no call without a side effect: a valid account is ok, unchecked, not a failure."""
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        created = await create_account(
            app,
            ws,
            {
                "name": "team bot",
                "providerId": "wepush.feishu-bot",
                "config": {"webhook": {"$secret": "feishu-webhook"}},
                "secrets": {"feishu-webhook": {"operation": "REPLACE", "value": "0123456789abcdef0123"}},
            },
        )
        response = await app.client.post(
            accounts_url(ws, created["id"], "connection-test"), headers=app.admin()
        )

    assert response.status_code == 200
    body = response.json()
    assert (body["ok"], body["checked"], "category" in body) == (True, False, False)
    assert "no side-effect-free check" in body["message"]
