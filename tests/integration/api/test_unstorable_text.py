"""Text no column stores is a 400 naming where it is, on SQLite and on PostgreSQL.

JSON can carry NUL (``\\u0000``) and unpaired surrogates (``\\ud800``) in any string; SQLite keeps them,
PostgreSQL refuses NUL in TEXT and JSONB and asyncpg cannot encode a surrogate, so on PostgreSQL each of
these requests used to end as a 500. The same holds for ids and filters in the URL (``/accounts/%00``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.helpers_app import RunningApp
from tests.integration.api._support import accounts_url, default_workspace, http_account, service
from tests.integration.api._support_content import HTTP_CONTENT, create_audience, ws_url

_RULE = "must not contain NUL (\\u0000) or an unpaired surrogate (\\ud800-\\udfff)"


def _raw_json(body: dict[str, Any]) -> str:
    # json.dumps escapes NUL and surrogates as \u sequences, as a client's JSON encoder does.
    return json.dumps(body)


async def _post(app: RunningApp, url: str, body: dict[str, Any]) -> Any:
    return await app.client.post(
        url, headers={**app.admin(), "Content-Type": "application/json"}, content=_raw_json(body)
    )


def _field(response: Any) -> str:
    assert response.status_code == 400, response.text
    problem = response.json()
    assert problem["code"] == "VALIDATION_FAILED"
    assert _RULE in problem["detail"]
    return str(problem["errors"][0]["field"])


async def _check(app: RunningApp) -> None:
    ws = await default_workspace(app)
    audiences = ws_url(ws, "audiences")
    assert _field(await _post(app, audiences, {"name": "a\u0000b"})) == "/name"
    assert _field(await _post(app, audiences, {"name": "ok", "description": "lone \ud800"})) == "/description"
    content = {**HTTP_CONTENT, "headers": {"X-Tag\u0000": "v"}}
    message = await _post(
        app, ws_url(ws, "messages"), {"name": "m", "providerId": "wepush.http", "content": content}
    )
    assert _field(message) == "/content/headers/<key>"
    account = http_account("orders", value="s3cr3t\u0000Zq9x")
    refused = await _post(app, accounts_url(ws), account)
    assert _field(refused) == "/secrets/http-account-token/value"
    assert "s3cr3t" not in refused.text
    assert "Zq9x" not in refused.text
    # A surrogate pair is one real character (an emoji) and is stored as it is.
    created = await _post(app, audiences, {"name": "VIP \ud83d\ude00"})
    assert (created.status_code, created.json()["name"]) == (201, "VIP 😀")
    # Ids and filters in the URL.
    for url, params in (
        (ws_url(ws, "accounts", "a%00b"), {}),
        (ws_url(ws, "audiences"), {"name": "a\u0000"}),
        (ws_url(ws, "runs"), {"jobId": "\u0000"}),
    ):
        found = await app.client.get(url, headers=app.admin(), params=params)
        assert found.status_code == 400, (url, found.text)
        assert _RULE in found.json()["detail"]
    # Nothing was stored by the refused requests.
    listed = (await app.client.get(audiences, headers=app.admin())).json()["items"]
    assert [audience["name"] for audience in listed] == ["VIP 😀"]


async def test_unstorable_text_is_refused_on_each_database(
    tmp_path: Path, database_backend: str, database_url: str
) -> None:
    async with service(
        tmp_path, WEPUSH_DATABASE_TYPE=database_backend, WEPUSH_DATABASE_URL=database_url
    ) as app:
        await _check(app)


async def test_a_json_body_without_a_content_type_is_read_as_the_json_it_was_validated_as(
    tmp_path: Path,
) -> None:
    # Connexion validated such a body as JSON and then handed the handler raw bytes (a 500).
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        created = await app.client.post(
            ws_url(ws, "audiences"), headers=app.admin(), content=b'{"name": "plain"}'
        )
        assert (created.status_code, created.json()["name"]) == (201, "plain")
        await create_audience(app, ws, "second")
        wrong = await app.client.post(
            ws_url(ws, "audiences"),
            headers={**app.admin(), "Content-Type": "application/x-www-form-urlencoded"},
            content=b"name=form",
        )
        assert (wrong.status_code, wrong.json()["code"]) == (415, "VALIDATION_FAILED")


async def test_refusals_name_the_field_they_are_about(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        await create_audience(app, ws, "taken")
        duplicate = await app.client.post(
            ws_url(ws, "audiences"), headers=app.admin(), json={"name": "taken"}
        )
        spaced_key = await app.client.post(
            ws_url(ws, "audiences"),
            headers={**app.admin(), "Idempotency-Key": "retry 1"},
            json={"name": "k1"},
        )
        form = await app.client.post(
            ws_url(ws, "audiences"),
            headers={**app.admin(), "Content-Type": "application/x-www-form-urlencoded"},
            content=b"name=form",
        )
        unimplemented = await app.client.get(ws_url(ws, "schedules"), headers=app.admin())

    assert [e["field"] for e in duplicate.json()["errors"]] == ["/name"]
    assert duplicate.json()["errors"][0]["code"] == "NAME_ALREADY_USED"
    assert spaced_key.status_code == 400
    assert spaced_key.json()["errors"] == [
        {
            "field": "Idempotency-Key",
            "code": "INVALID",
            "message": "Idempotency-Key must be 1..128 visible ASCII characters",
        }
    ]
    assert [e["field"] for e in form.json()["errors"]] == ["Content-Type"]
    assert unimplemented.status_code == 501
    assert unimplemented.json()["traceId"] == unimplemented.headers["X-Trace-Id"]
