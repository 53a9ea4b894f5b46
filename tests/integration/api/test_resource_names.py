"""Names are what people tell resources apart by, so a name that cannot be seen for what it is is refused.

A name made of spaces, one padded with them, one holding a line break (it splits a log line or a CSV
cell) or an invisible character (a zero-width space or a bidirectional override makes two different names
look the same in a list) is a 400 naming ``/name`` on every create and update, and the stored name stays
as it was. Names in any script, with emoji and inner spaces, are kept as given, and so are the joiners and
variation selectors emoji and scripts need.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tests.helpers_app import RunningApp
from tests.integration.api._support import (
    API,
    accounts_url,
    create_account,
    default_workspace,
    http_account,
    service,
)
from tests.integration.api._support_content import (
    HTTP_CONTENT,
    create_audience,
    create_message,
    job_body,
    job_world,
    ws_url,
)

_RULE = (
    "must not start or end with white space, nor contain control characters, line breaks or invisible "
    "formatting characters"
)
UNSEEN = (
    "   ",
    " leading",
    "trailing ",
    "tab\tinside",
    "line\nbreak",
    # Python's ``$`` would match before a final line break; the contract's patterns are ECMA-262's.
    "final line break\n",
    "carriage\rreturn",
    "next\u0085line",
    "line\u2028separator",
    "zero\u200bwidth",
    "word\u2060joiner",
    "\ufeffbyte order mark",
    "right-to-left \u202eoverride",
    "isolate \u2066here\u2069",
    "delete\u007fcharacter",
    "\u3000ideographic space",
    # Default-ignorable characters: each made a look-alike of "customers" beside it.
    "cust\u00adomers",  # soft hyphen
    "customers\u200e",  # left-to-right mark
    "cust\u200fomers",  # right-to-left mark
    "customers\u061c",  # Arabic letter mark
    "cust\u034fomers",  # combining grapheme joiner
    "cust\u180eomers",  # Mongolian vowel separator
    "cust\u2061omers",  # function application
    "cust\u2064omers",  # invisible plus
    "cust\u206aomers",  # deprecated: inhibit symmetric swapping
    "cust\u206fomers",  # deprecated: nominal digit shapes
    "cust\u17b4omers",  # Khmer vowel inherent AQ
    "cust\u17b5omers",  # Khmer vowel inherent AA
    "\u115fcustomers",  # Hangul choseong filler
    "cust\u1160omers",  # Hangul jungseong filler
    "\u3164",  # Hangul filler, a name that shows as nothing
    "cust\uffa0omers",  # halfwidth Hangul filler
    "cust\ufff9omers\ufffb",  # interlinear annotation anchor and terminator
    # Joiners and selectors where they join or select nothing, and tag characters outside a flag.
    "lookalike\u200d",
    "\u200dlookalike",
    "lookalike\u200c",
    "\ufe0flookalike",
    "lookalike\ufe0f",
    "\u200d",
    "\u200d\u200d",
    "lookalike\U000e0041",
    "look\U000e007falike",
    "flag \U000e0067\U000e0062\U000e007f",  # tags without the black flag
)
SEEN = (
    "Order notifications",
    "双十一 促销  通知",
    "VIP 😀",
    "family 👨\u200d👩\u200d👧",
    "نامه\u200cها",
    # What emoji and scripts need stays allowed: ZWJ sequences, VS16 (emoji presentation), ZWNJ in
    # Persian, Mongolian free variation selectors and the tag characters of a subdivision flag.
    "coders 👩\u200d💻",
    "love ❤\ufe0f",
    "rainbow 🏳\ufe0f\u200d🌈",
    "می\u200cخواهم",
    "\u182e\u180b\u1820",
    "🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f",
    "a",
)


def _refused(response: httpx.Response) -> None:
    assert response.status_code == 400, response.text
    problem = response.json()
    assert problem["code"] == "VALIDATION_FAILED"
    assert problem["errors"][0]["field"] == "/name"
    assert _RULE in problem["detail"]


async def _check_creates(app: RunningApp, url: str, body: dict[str, Any], *, name_prefix: str) -> None:
    for name in UNSEEN:
        _refused(await app.client.post(url, headers=app.admin(), json={**body, "name": name}))
    for number, name in enumerate(SEEN):
        created = await app.client.post(
            url, headers=app.admin(), json={**body, "name": f"{name_prefix}{number} {name}"}
        )
        assert created.status_code == 201, created.text
        assert created.json()["name"] == f"{name_prefix}{number} {name}"


async def _check_update(app: RunningApp, url: str, current: dict[str, Any], update: dict[str, Any]) -> None:
    for name in UNSEEN:
        _refused(await app.client.put(url, headers=app.admin(), json={**update, "name": name}))
    stored = await app.client.get(url, headers=app.admin())
    assert (stored.json()["name"], stored.json()["version"]) == (current["name"], current["version"])


async def test_every_create_and_update_refuses_a_name_that_cannot_be_seen_for_what_it_is(
    tmp_path: Path,
) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)

        await _check_creates(app, f"{API}/workspaces", {}, name_prefix="ws")
        workspace = (await app.client.get(f"{API}/workspaces/{ws}", headers=app.admin())).json()
        await _check_update(app, f"{API}/workspaces/{ws}", workspace, {"version": workspace["version"]})

        await _check_creates(app, ws_url(ws, "audiences"), {}, name_prefix="aud")
        audience = await create_audience(app, ws, "prospects")
        await _check_update(
            app, ws_url(ws, "audiences", audience["id"]), audience, {"version": audience["version"]}
        )

        message = await create_message(app, ws, "welcome")
        await _check_creates(
            app,
            ws_url(ws, "messages"),
            {"providerId": "wepush.http", "content": HTTP_CONTENT},
            name_prefix="msg",
        )
        await _check_update(
            app, ws_url(ws, "messages", message["id"]), message, {"version": message["version"]}
        )

        account_body = http_account("orders")
        await _check_creates(app, accounts_url(ws), account_body, name_prefix="acct")
        account = await create_account(app, ws, http_account("billing"))
        await _check_update(
            app,
            accounts_url(ws, account["id"]),
            account,
            {
                "config": account["config"],
                "secrets": {"http-account-token": {"operation": "KEEP"}},
                "version": 1,
            },
        )

        job_world_body = job_body(await job_world(app, ws))
        await _check_creates(app, ws_url(ws, "jobs"), job_world_body, name_prefix="job")
        job = (await app.client.post(ws_url(ws, "jobs"), headers=app.admin(), json=job_world_body)).json()
        await _check_update(
            app,
            ws_url(ws, "jobs", job["id"]),
            job,
            {**job_world_body, "policies": job["policies"], "version": job["version"]},
        )

        await _check_creates(app, ws_url(ws, "api-tokens"), {"role": "VIEWER"}, name_prefix="token")


async def test_a_name_stored_before_the_rule_still_reads_and_can_be_renamed(tmp_path: Path) -> None:
    """The rule is on what requests send; names already stored are returned as they are (the response
    schema keeps the old, wider rule), so a workspace upgraded from an earlier release can rename them."""
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        audience = await create_audience(app, ws, "prospects")
        assert app.runtime.engine is not None
        async with app.runtime.engine.begin() as connection:
            await connection.exec_driver_sql(
                "UPDATE audience SET name = ' padded ' WHERE id = ?", (audience["id"],)
            )
        read = await app.client.get(ws_url(ws, "audiences", audience["id"]), headers=app.admin())
        assert (read.status_code, read.json()["name"]) == (200, " padded ")
        renamed = await app.client.put(
            ws_url(ws, "audiences", audience["id"]),
            headers=app.admin(),
            json={"name": "padded", "version": audience["version"]},
        )
        assert (renamed.status_code, renamed.json()["name"]) == (200, "padded")
