from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.helpers_app import running_app, standalone_config

SECRET = "S3CR3T-do-not-echo-4711"


async def _workspace_id(app: object) -> str:
    client = app.client  # type: ignore[attr-defined]
    response = await client.get("/api/v1/workspaces", headers=app.admin())  # type: ignore[attr-defined]
    workspace_id: str = response.json()["items"][0]["id"]
    return workspace_id


async def test_validation_errors_name_the_field_and_never_echo_the_value(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with running_app(standalone_config(tmp_path)) as app:
        workspace_id = await _workspace_id(app)
        body = {
            "name": "webhook",
            "providerId": "wepush.http",
            "config": {
                "baseUrl": "https://hooks.example.com",
                "auth": {"type": "BEARER", "token": {"$secret": "token"}},
            },
            "secrets": {"token": {"operation": "REPLACE", "value": SECRET, "unexpected": True}},
        }
        response = await app.client.post(
            f"/api/v1/workspaces/{workspace_id}/accounts", json=body, headers=app.admin()
        )
        assert response.status_code == 400
        problem = response.json()
        assert problem["code"] == "VALIDATION_FAILED"
        assert problem["errors"][0]["field"].startswith("/secrets/token")
        assert SECRET not in response.text
        wrong_type = await app.client.post(
            f"/api/v1/workspaces/{workspace_id}/accounts", json={**body, "name": 4711}, headers=app.admin()
        )
        assert wrong_type.status_code == 400
        assert wrong_type.json()["errors"][0]["field"] == "/name"
    assert SECRET not in caplog.text


@pytest.mark.parametrize(
    ("secret", "field", "detail"),
    [
        ({"operation": "REPLACE", "value": ""}, "/secrets/token/value", "must satisfy minLength=1"),
        ({"operation": "KEEP", "value": SECRET}, "/secrets/token", "('value' was unexpected)"),
        ({"operation": "ROTATE", "value": SECRET}, "/secrets/token/operation", "must be one of"),
        (SECRET, "/secrets/token", 'must satisfy type="object"'),
    ],
)
async def test_a_secret_operation_is_refused_for_what_is_wrong_inside_it(
    tmp_path: Path, secret: object, field: str, detail: str
) -> None:
    async with running_app(standalone_config(tmp_path)) as app:
        workspace_id = await _workspace_id(app)
        body = {
            "name": "webhook",
            "providerId": "wepush.http",
            "config": {"baseUrl": "https://hooks.example.com"},
            "secrets": {"token": secret},
        }
        response = await app.client.post(
            f"/api/v1/workspaces/{workspace_id}/accounts", json=body, headers=app.admin()
        )
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == field
    assert detail in response.json()["detail"]
    assert SECRET not in response.text


async def test_a_body_that_is_not_utf8_is_a_400_not_a_500(tmp_path: Path) -> None:
    async with running_app(standalone_config(tmp_path)) as app:
        response = await app.client.post(
            "/api/v1/workspaces",
            content=b'{"name": "\xff\xfe"}',
            headers={**app.admin(), "Content-Type": "application/json"},
        )
        assert response.status_code == 400
        assert response.json()["code"] == "VALIDATION_FAILED"


async def test_malformed_json_is_reported_by_position(tmp_path: Path) -> None:
    async with running_app(standalone_config(tmp_path)) as app:
        response = await app.client.post(
            "/api/v1/workspaces",
            content=b'{"name": "x",',
            headers={**app.admin(), "Content-Type": "application/json"},
        )
        assert response.status_code == 400
        assert "line 1" in response.json()["detail"]


async def test_a_json_body_saved_with_a_byte_order_mark_is_read_without_it(tmp_path: Path) -> None:
    # What `curl -d @ws.json` sends after PowerShell 5's `Set-Content -Encoding utf8` wrote the file.
    async with running_app(standalone_config(tmp_path)) as app:
        response = await app.client.post(
            "/api/v1/workspaces",
            content="\ufeff".encode() + b'{"name": "from-windows"}',
            headers={**app.admin(), "Content-Type": "application/json"},
        )
        assert response.status_code == 201, response.text
        assert response.json()["name"] == "from-windows"
        only_mark = await app.client.post(
            "/api/v1/workspaces",
            content="\ufeff".encode(),
            headers={**app.admin(), "Content-Type": "application/json"},
        )
        assert only_mark.status_code == 400
        assert "empty" in only_mark.json()["detail"]


async def test_problems_carry_the_trace_id_of_the_request(tmp_path: Path) -> None:
    async with running_app(standalone_config(tmp_path)) as app:
        response = await app.client.get("/api/v1/providers", headers={"X-Trace-Id": "trace-xyz-42"})
        assert response.status_code == 401
        assert response.json()["traceId"] == "trace-xyz-42"


@pytest.mark.parametrize(
    ("query", "headers", "field", "message"),
    [
        ("limit=0", {}, "limit", "query parameter 'limit': must satisfy minimum=1"),
        ("limit=101", {}, "limit", "query parameter 'limit': must satisfy maximum=100"),
        (f"limit={SECRET}", {}, "limit", "query parameter 'limit': must satisfy type=\"integer\""),
        (f"state=RUNNING&state={SECRET}", {}, "state", "query parameter 'state' item 1: must be one of"),
        (f"{SECRET}=1", {}, SECRET, f"query parameter '{SECRET}' is not defined for this operation"),
        ("b=1&a=2", {}, "a", "query parameters 'a', 'b' are not defined for this operation"),
        ("limit=5&limit=50", {}, "limit", "query parameter 'limit': is given more than once"),
    ],
)
async def test_a_bad_parameter_is_named_with_its_rule_never_its_value_or_schema(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    query: str,
    headers: dict[str, str],
    field: str,
    message: str,
) -> None:
    caplog.set_level(logging.DEBUG)
    async with running_app(standalone_config(tmp_path)) as app:
        workspace_id = await _workspace_id(app)
        response = await app.client.get(
            f"/api/v1/workspaces/{workspace_id}/runs?{query}", headers={**app.admin(), **headers}
        )
    assert response.status_code == 400
    problem = response.json()
    assert problem["code"] == "VALIDATION_FAILED"
    assert problem["errors"][0]["field"] == field
    assert problem["detail"].startswith(message)
    assert "Failed validating" not in response.text
    if field != SECRET:
        assert SECRET not in response.text
        # The test client's own request log shows the URL it sent; every Service record must not.
        service_records = [r.getMessage() for r in caplog.records if not r.name.startswith("httpx")]
        assert not [m for m in service_records if SECRET in m]


async def test_an_array_filter_may_repeat_where_a_single_value_may_not(tmp_path: Path) -> None:
    async with running_app(standalone_config(tmp_path)) as app:
        runs = f"/api/v1/workspaces/{await _workspace_id(app)}/runs"
        repeated = await app.client.get(f"{runs}?state=RUNNING&state=PAUSED&limit=5", headers=app.admin())
        assert repeated.status_code == 200, repeated.text


async def test_an_overlong_header_parameter_is_named_and_not_echoed(tmp_path: Path) -> None:
    key = SECRET * 20
    async with running_app(standalone_config(tmp_path)) as app:
        workspace_id = await _workspace_id(app)
        response = await app.client.post(
            f"/api/v1/workspaces/{workspace_id}/audiences",
            json={"name": "clients"},
            headers={**app.admin(), "Idempotency-Key": key},
        )
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "Idempotency-Key"
    assert response.json()["detail"] == "header parameter 'Idempotency-Key': must satisfy maxLength=128"
    assert SECRET not in response.text


async def test_a_method_the_resource_does_not_have_is_405_naming_the_allowed_ones(tmp_path: Path) -> None:
    async with running_app(standalone_config(tmp_path)) as app:
        response = await app.client.patch("/api/v1/workspaces", headers=app.admin())
        # Both ``…/commands/pause`` (POST) and ``…/commands/{commandId}`` (GET) match this path.
        command = await app.client.delete("/api/v1/workspaces/w/runs/r/commands/pause", headers=app.admin())
    assert (command.status_code, command.headers["allow"]) == (405, "GET, POST")
    assert response.status_code == 405
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.headers["allow"] == "GET, POST"
    assert response.json()["detail"] == "PATCH is not an operation of this path; it allows GET, POST."


async def test_a_path_no_operation_matches_is_a_404_that_says_so(tmp_path: Path) -> None:
    async with running_app(standalone_config(tmp_path)) as app:
        workspace_id = await _workspace_id(app)
        typo = await app.client.get(f"/api/v1/workspaces/{workspace_id}/mesages", headers=app.admin())
        not_a_number = await app.client.get(
            f"/api/v1/workspaces/{workspace_id}/messages/m/revisions/abc", headers=app.admin()
        )
        missing = await app.client.get(f"/api/v1/workspaces/{workspace_id}/messages/m", headers=app.admin())
    for response in (typo, not_a_number):
        assert (response.status_code, response.json()["code"]) == (404, "RESOURCE_NOT_FOUND")
        assert response.json()["detail"].startswith("No operation of this API is at this path")
    # A route that matched but found nothing keeps its own, specific detail.
    assert missing.status_code == 404
    assert "No operation" not in missing.json()["detail"]


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b'{"name": NaN}', "NaN or infinite"),
        (b'{"name": -Infinity}', "NaN or infinite"),
        (b'{"name": 1e400}', "NaN or infinite"),
        (b'{"name": ' + b"9" * 5000 + b"}", "too many digits"),
        (b'{"name": ' + b"[" * 50_000 + b"]" * 50_000 + b"}", "nested deeper than 64 levels"),
        (b'{"name": ' + b"[" * 200 + b"]" * 200 + b"}", "nested deeper than 64 levels"),
    ],
    ids=["nan", "infinity", "overflowing-float", "5000-digits", "nested-50000", "nested-200"],
)
async def test_json_python_reads_but_json_does_not_allow_is_a_400(
    tmp_path: Path, body: bytes, says: str
) -> None:
    async with running_app(standalone_config(tmp_path)) as app:
        response = await app.client.post(
            "/api/v1/workspaces", content=body, headers={**app.admin(), "Content-Type": "application/json"}
        )
        assert response.status_code == 400, response.text
        assert response.json()["code"] == "VALIDATION_FAILED"
        assert says in response.json()["detail"]


async def test_an_instant_beyond_what_a_datetime_holds_in_utc_is_a_400(tmp_path: Path) -> None:
    async with running_app(standalone_config(tmp_path)) as app:
        workspace_id = await _workspace_id(app)
        base = f"/api/v1/workspaces/{workspace_id}"
        early = "0001-01-01T00:00:00+14:00"
        late = "9999-12-31T23:59:59-14:00"
        responses = [
            await app.client.get(f"{base}/runs", params={"createdBefore": early}, headers=app.admin()),
            await app.client.get(
                f"{base}/audit-events", params={"occurredBefore": early}, headers=app.admin()
            ),
            await app.client.post(
                f"{base}/api-tokens",
                json={"name": "far future", "role": "VIEWER", "expiresAt": late},
                headers=app.admin(),
            ),
        ]
        assert [(r.status_code, r.json()["code"]) for r in responses] == [(400, "VALIDATION_FAILED")] * 3
        assert [(r.json()["errors"][0]["field"], r.json()["errors"][0]["code"]) for r in responses] == [
            ("createdBefore", "OUT_OF_RANGE"),
            ("occurredBefore", "OUT_OF_RANGE"),
            ("/expiresAt", "OUT_OF_RANGE"),
        ]
        assert "outside the years 1 to 9999" in responses[2].json()["detail"]
        # The same instants written in UTC's own range are fine.
        ok = await app.client.get(
            f"{base}/runs", params={"createdBefore": "0001-01-01T00:00:00+00:00"}, headers=app.admin()
        )
        assert ok.status_code == 200


async def test_an_instant_written_with_a_lower_case_t_and_z_is_read_as_rfc_3339_allows(
    tmp_path: Path,
) -> None:
    async with running_app(standalone_config(tmp_path)) as app:
        workspace_id = await _workspace_id(app)
        base = f"/api/v1/workspaces/{workspace_id}"
        created = await app.client.post(
            f"{base}/api-tokens",
            json={"name": "lower case", "role": "VIEWER", "expiresAt": "2999-01-01t09:30:00z"},
            headers=app.admin(),
        )
        assert created.status_code == 201, created.text
        assert created.json()["expiresAt"].startswith("2999-01-01T09:30:00")
        listed = await app.client.get(
            f"{base}/audit-events",
            params={"occurredAfter": "2000-01-01t00:00:00+08:00", "action": "token.create"},
            headers=app.admin(),
        )
        assert listed.status_code == 200, listed.text
        # The bootstrap admin token's creation is listed too.
        assert created.json()["id"] in [event["resourceId"] for event in listed.json()["items"]]
