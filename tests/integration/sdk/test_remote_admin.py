"""API tokens, workspace members, audit events and system information through the SDK."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from wepush.sdk.remote import InvalidRequest, InvalidResponse, ResourceInUse, WePushClient

from ._service import WS, ScriptedService, problem, reply, ws_path

PLAINTEXT = "wpt_abcdef_0123456789-issued-once"
TOKENS = ws_path("api-tokens")
AUDIT = ws_path("audit-events")


def token(token_id: str = "tok-1", **extra: Any) -> dict[str, Any]:
    return {
        "id": token_id,
        "workspaceId": WS,
        "name": f"token {token_id}",
        "role": "OPERATOR",
        "issuedRole": "OPERATOR",
        "systemAdmin": False,
        "tokenPrefix": "wpt_abcdef",
        "createdAt": "2026-08-22T08:30:00Z",
        **extra,
    }


def audit_event(event_id: str, workspace_id: str | None = WS) -> dict[str, Any]:
    return {
        "id": event_id,
        "workspaceId": workspace_id,
        "occurredAt": "2026-08-22T08:30:00Z",
        "actor": {"type": "API_TOKEN", "id": "tok-1"},
        "action": "account.update",
        "resourceType": "ACCOUNT",
        "resourceId": "acc-1",
        "outcome": "SUCCESS",
    }


def page(items: list[dict[str, Any]], next_cursor: str | None = None) -> dict[str, Any]:
    return {"items": items, "page": {"hasMore": next_cursor is not None, "nextCursor": next_cursor}}


def test_a_created_token_is_readable_once_and_never_shown_in_its_repr(
    service: ScriptedService, client: WePushClient
) -> None:
    service.script("POST", TOKENS, reply(201, token(token=PLAINTEXT)))

    created = client.workspace(WS).tokens.create({"name": "ci", "role": "OPERATOR"})

    assert created.token == PLAINTEXT
    assert created.token_prefix == "wpt_abcdef"
    assert PLAINTEXT not in repr(created)
    assert PLAINTEXT not in str(created)
    assert PLAINTEXT not in repr({"created": created})
    (sent,) = service.seen("POST", TOKENS)
    # The operation refuses an Idempotency-Key (a replay would need the plaintext kept).
    assert "Idempotency-Key" not in sent.headers
    assert sent.body == b'{"name": "ci", "role": "OPERATOR"}'


def test_a_malformed_token_answer_is_invalid_response_without_the_token(
    service: ScriptedService, client: WePushClient
) -> None:
    broken = token(token=PLAINTEXT)
    broken["systemAdmin"] = PLAINTEXT
    service.script("POST", TOKENS, reply(201, broken))

    with pytest.raises(InvalidResponse) as raised:
        client.workspace(WS).tokens.create({"name": "ci", "role": "OPERATOR"})

    assert "/systemAdmin" in str(raised.value)
    assert PLAINTEXT not in str(raised.value)
    assert raised.value.__context__ is None


def test_tokens_are_listed_across_pages_and_revoked(service: ScriptedService, client: WePushClient) -> None:
    service.script(
        "GET", TOKENS, reply(200, page([token("tok-1")], "c-2")), reply(200, page([token("tok-2")]))
    )
    service.script("DELETE", ws_path("api-tokens", "tok-1"), reply(204))
    tokens = client.workspace(WS).tokens

    listed = [found.id for found in tokens.iterate(page_size=1)]
    tokens.revoke("tok-1")

    assert listed == ["tok-1", "tok-2"]
    assert [seen.query for seen in service.seen("GET", TOKENS)] == [
        {"limit": "1"},
        {"limit": "1", "cursor": "c-2"},
    ]
    assert len(service.seen("DELETE", ws_path("api-tokens", "tok-1"))) == 1


def test_workspace_audit_events_are_searched_with_every_filter(
    service: ScriptedService, client: WePushClient
) -> None:
    service.script("GET", AUDIT, reply(200, page([audit_event("ev-1")], "c-2")), reply(200, page([])))
    after = datetime(2026, 8, 1, tzinfo=UTC)

    events = list(
        client.workspace(WS).audit.iterate(
            page_size=10,
            action="account.update",
            actor_id="tok-1",
            resource_type="ACCOUNT",
            resource_id="acc-1",
            occurred_after=after,
            occurred_before=datetime(2026, 9, 1, 8, tzinfo=timezone(timedelta(hours=8))),
        )
    )

    assert [event.id for event in events] == ["ev-1"]
    first, second = service.seen("GET", AUDIT)
    assert first.query["action"] == "account.update"
    assert first.query["actorId"] == "tok-1"
    assert first.query["resourceType"] == "ACCOUNT"
    assert first.query["resourceId"] == "acc-1"
    # RFC 3339 in UTC, as the Service requires ("+0000" without its colon is refused).
    assert first.query["occurredAfter"] == "2026-08-01T00:00:00.000000Z"
    assert first.query["occurredBefore"] == "2026-09-01T00:00:00.000000Z"
    assert second.query["cursor"] == "c-2"
    assert second.query["action"] == "account.update"


NAIVE = datetime(2026, 8, 1)  # no zone: local time or UTC, nobody can tell

NAIVE_FILTERS: dict[str, tuple[Callable[[WePushClient], Any], str]] = {
    "runs created after": (lambda c: c.workspace(WS).runs.list(created_after=NAIVE), "created_after"),
    "runs created before": (
        lambda c: list(c.workspace(WS).runs.iterate(created_before=NAIVE)),
        "created_before",
    ),
    "workspace audit": (lambda c: c.workspace(WS).audit.list(occurred_after=NAIVE), "occurred_after"),
    "system audit": (lambda c: list(c.audit.iterate(occurred_before=NAIVE)), "occurred_before"),
}


@pytest.mark.parametrize("case", sorted(NAIVE_FILTERS))
def test_a_naive_date_filter_is_refused_before_it_is_sent(
    service: ScriptedService, client: WePushClient, case: str
) -> None:
    call, argument = NAIVE_FILTERS[case]

    with pytest.raises(InvalidRequest) as raised:
        call(client)

    assert [(e.field, e.code) for e in raised.value.errors] == [(argument, "INVALID")]
    assert "timezone-aware" in str(raised.value)
    assert service.requests == []


def test_a_date_filter_before_the_year_1000_is_sent_as_rfc_3339(
    service: ScriptedService, client: WePushClient
) -> None:
    service.script("GET", ws_path("runs"), reply(200, page([])))

    client.workspace(WS).runs.list(created_after=datetime.min.replace(tzinfo=UTC))

    # strftime would write "1-01-01"; every run is younger than the bound sent instead.
    assert service.seen("GET", ws_path("runs"))[0].query["createdAfter"] == "1000-01-01T00:00:00.000000Z"


def test_system_audit_events_and_info_live_on_the_client(
    service: ScriptedService, client: WePushClient
) -> None:
    service.script("GET", "/api/v1/audit-events", reply(200, page([audit_event("ev-9", None)])))
    service.script(
        "GET",
        "/api/v1/system/info",
        reply(
            200,
            {
                "version": "0.1.0",
                "apiVersion": "v1",
                "mode": "STANDALONE",
                "serverTime": "2026-08-22T08:30:00Z",
            },
        ),
    )

    found = client.audit.list(action="workspace.create")
    info = client.system_info()

    assert [event.id for event in found.items] == ["ev-9"]
    assert service.seen("GET", "/api/v1/audit-events")[0].query == {"action": "workspace.create"}
    assert (info.version, info.api_version, info.mode) == ("0.1.0", "v1", "STANDALONE")


def test_a_member_is_removed_and_the_last_admin_is_kept(
    service: ScriptedService, client: WePushClient
) -> None:
    member = f"/api/v1/workspaces/{WS}/members/user-1"
    service.script("DELETE", member, reply(204), problem(409, "RESOURCE_IN_USE"))

    client.workspaces.remove_member(WS, "user-1")
    with pytest.raises(ResourceInUse):
        client.workspaces.remove_member(WS, "user-1")

    assert len(service.seen("DELETE", member)) == 2
