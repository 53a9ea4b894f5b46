"""The SDK against a real `wepush serve` on loopback: tokens, members, audit, info and date filters."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import httpx
import pytest
from typing_extensions import Unpack

from tests.helpers_process import running_service
from wepush.sdk.remote import (
    AccessDenied,
    AuthenticationRequired,
    InvalidRequest,
    NotFound,
    WePushClient,
    WorkspaceClient,
)
from wepush.sdk.remote._audit import AuditFilters

BEIJING = timezone(timedelta(hours=8))
MICROSECOND = timedelta(microseconds=1)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """The Service's base URL and its bootstrap SYSTEM_ADMIN token."""
    data_dir: Path = tmp_path_factory.mktemp("sdk-service") / "data"
    with running_service(data_dir) as service:
        yield service.base_url, (data_dir / "bootstrap-admin.token").read_text(encoding="utf-8").strip()


@pytest.fixture(scope="module")
def admin(served: tuple[str, str]) -> Iterator[WePushClient]:
    with WePushClient(*served) as client:
        yield client


def _workspace_id(admin: WePushClient) -> str:
    return str(admin.workspaces.list().items[0].id)


def test_system_info_names_the_mode(admin: WePushClient) -> None:
    info = admin.system_info()

    assert info.api_version == "v1"
    assert info.mode == "STANDALONE"


def test_an_issued_token_works_until_it_is_revoked(admin: WePushClient) -> None:
    workspace = admin.workspace(_workspace_id(admin))

    issued = workspace.tokens.create({"name": "sdk viewer", "role": "VIEWER"})
    assert issued.token not in repr(issued)
    assert issued.id in [found.id for found in workspace.tokens.iterate(page_size=1)]
    with WePushClient(admin.endpoint, issued.token) as viewer:
        assert viewer.workspace(workspace.workspace_id).jobs.list().items == []
        workspace.tokens.revoke(issued.id)
        with pytest.raises(AuthenticationRequired):
            viewer.workspace(workspace.workspace_id).jobs.list()

    actions = [event.action for event in workspace.audit.iterate(resource_id=issued.id, page_size=1)]
    # Newest first (a refused request with the revoked token may be audited too).
    assert [action for action in actions if action in {"token.create", "token.revoke"}] == [
        "token.revoke",
        "token.create",
    ]
    assert [e.action for e in workspace.audit.iterate(resource_id=issued.id, action="token.create")] == [
        "token.create"
    ]


def test_a_misspelt_token_body_never_reaches_the_service(admin: WePushClient) -> None:
    workspace = admin.workspace(_workspace_id(admin))

    with pytest.raises(InvalidRequest) as raised:
        workspace.tokens.create({"name": "typo", "role": "VIEWER", "expiresAtt": "2030-01-01T00:00:00Z"})

    assert [e.field for e in raised.value.errors] == ["/expiresAtt"]
    assert "typo" not in [found.name for found in workspace.tokens.iterate()]


def test_removing_someone_who_is_no_member_is_not_found(admin: WePushClient) -> None:
    workspace_id = _workspace_id(admin)

    with pytest.raises(NotFound):
        admin.workspaces.remove_member(workspace_id, "no-such-user")


def test_system_audit_events_can_be_listed(admin: WePushClient) -> None:
    admin.audit.list(limit=1)

    # Each read of the system audit is itself audited there.
    assert "audit.read" in [event.action for event in admin.audit.iterate(action="audit.read")]


def _dry_run_job(workspace: WorkspaceClient) -> str:
    """A job over a one-recipient snapshot; dry runs of it need no confirmation and reach no vendor."""
    account = workspace.accounts.create(
        {"name": "filters", "providerId": "wepush.http", "config": {"baseUrl": "https://api.example.com"}}
    )
    message = workspace.messages.create(
        {"name": "filters", "providerId": "wepush.http", "content": {"method": "POST", "path": "/n"}}
    )
    audience = workspace.audiences.create({"name": "filters"})
    started = workspace.audiences.create_import(
        audience.id, {"format": "CSV", "hasHeader": True, "fieldMapping": {"mobile": "mobile"}}
    )
    workspace.audiences.upload(audience.id, started.id, b"mobile\n13800000001\n")
    snapshot = workspace.audiences.commit_import(audience.id, started.id, version=audience.version)
    job = workspace.jobs.create(
        {
            "name": "filters",
            "accountId": account.id,
            "messageId": message.id,
            "messageRevision": 1,
            "audienceSnapshotId": snapshot.id,
        }
    )
    return str(job.id)


def test_runs_are_filtered_by_creation_time(admin: WePushClient) -> None:
    workspace = admin.workspace(_workspace_id(admin))
    job_id = _dry_run_job(workspace)
    first = workspace.runs.start(job_id, dry_run=True)
    second = workspace.runs.start(job_id, dry_run=True)
    # The bound given in another zone is the same instant: the SDK sends it in UTC.
    at_second = second.created_at.astimezone(BEIJING)

    newer = [run.id for run in workspace.runs.iterate(job_id=job_id, created_after=at_second)]
    older = [run.id for run in workspace.runs.iterate(job_id=job_id, created_before=at_second)]
    between = workspace.runs.list(
        job_id=job_id, created_after=first.created_at, created_before=second.created_at
    )

    assert (newer, older) == ([second.id], [first.id])  # createdAfter inclusive, createdBefore exclusive
    assert [run.id for run in between.items] == [first.id]


def test_audit_events_are_filtered_by_occurrence_time(admin: WePushClient) -> None:
    workspace = admin.workspace(_workspace_id(admin))
    issued = [workspace.tokens.create({"name": f"audited {n}", "role": "VIEWER"}) for n in (1, 2)]
    first, second = (
        next(workspace.audit.iterate(action="token.create", resource_id=token.id)) for token in issued
    )
    assert first.occurred_at < second.occurred_at

    def created_tokens(**bounds: Unpack[AuditFilters]) -> list[str]:
        filters: AuditFilters = {**bounds, "action": "token.create"}
        found = workspace.audit.iterate(**filters)
        return [event.resource_id for event in found if event.resource_id in {t.id for t in issued}]

    # Both bounds are exclusive.
    assert created_tokens(occurred_after=first.occurred_at.astimezone(BEIJING)) == [issued[1].id]
    assert created_tokens(occurred_before=second.occurred_at) == [issued[0].id]
    assert created_tokens(
        occurred_after=first.occurred_at - MICROSECOND, occurred_before=second.occurred_at
    ) == [issued[0].id]


def test_refused_attempts_are_found_by_their_outcome(admin: WePushClient) -> None:
    workspace = admin.workspace(_workspace_id(admin))
    viewer_token = workspace.tokens.create({"name": "refused viewer", "role": "VIEWER"})
    with WePushClient(admin.endpoint, viewer_token.token) as viewer, pytest.raises(AccessDenied):
        viewer.workspace(workspace.workspace_id).audiences.create({"name": "not allowed"})
    denied = list(workspace.audit.iterate(outcome="DENIED", actor_id=viewer_token.id))

    assert [(str(getattr(e.outcome, "value", e.outcome)), e.action) for e in denied] == [
        ("DENIED", "audience.create")
    ]


def test_system_audit_events_are_filtered_by_occurrence_time(admin: WePushClient) -> None:
    admin.audit.list(limit=1)  # audited itself, so there is at least one event
    newest = admin.audit.list(limit=1).items[0]

    before = [event.id for event in admin.audit.iterate(occurred_before=newest.occurred_at)]
    after = [event.id for event in admin.audit.iterate(occurred_after=newest.occurred_at - MICROSECOND)]

    assert newest.id not in before
    assert newest.id in after
    assert all(
        event.occurred_at < newest.occurred_at
        for event in admin.audit.list(occurred_before=newest.occurred_at.astimezone(BEIJING)).items
    )


def test_a_naive_date_filter_is_refused_naming_the_argument(admin: WePushClient) -> None:
    workspace = admin.workspace(_workspace_id(admin))

    with pytest.raises(InvalidRequest) as raised:
        workspace.runs.list(created_after=datetime(2026, 1, 1))  # naive: the mistake under test

    assert [(e.field, e.code) for e in raised.value.errors] == [("created_after", "INVALID")]
    assert "timezone-aware" in str(raised.value)


ACCOUNT = {
    "name": "refused",
    "providerId": "wepush.http",
    "config": {"baseUrl": "https://api.example.com", "auth": {"type": "BEARER", "token": {"$secret": "t"}}},
}
#: Bodies both sides refuse: (collection, body). The SDK must name the same field, code and rule.
REFUSED: dict[str, tuple[str, dict[str, Any]]] = {
    "name too long": ("audiences", {"name": "x" * 201}),
    "name with a leading space": ("audiences", {"name": " padded"}),
    "name missing": ("audiences", {"description": "no name"}),
    "name not a string": ("audiences", {"name": 7}),
    "role not one of the roles": ("api-tokens", {"name": "r", "role": "OWNER"}),
    "secret too long": (
        "accounts",
        {**ACCOUNT, "secrets": {"t": {"operation": "REPLACE", "value": "TOPSECRET-" + "x" * 70_000}}},
    ),
    "secret not an operation": ("accounts", {**ACCOUNT, "secrets": {"t": "TOPSECRET"}}),
    "secret operation without its value": (
        "accounts",
        {**ACCOUNT, "secrets": {"t": {"operation": "REPLACE"}}},
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_the_sdk_refuses_a_body_as_the_service_does(
    served: tuple[str, str], admin: WePushClient, case: str
) -> None:
    collection, body = REFUSED[case]
    workspace_id = _workspace_id(admin)
    creators: dict[str, Callable[[dict[str, Any]], Any]] = {
        "audiences": admin.workspace(workspace_id).audiences.create,
        "api-tokens": admin.workspace(workspace_id).tokens.create,
        "accounts": admin.workspace(workspace_id).accounts.create,
    }
    create = creators[collection]
    endpoint, token = served
    answer = httpx.post(
        f"{endpoint}/api/v1/workspaces/{workspace_id}/{collection}",
        json=body,
        headers={"Authorization": f"Bearer {token}"},
    )
    assert answer.status_code == 400, answer.text
    # The Service's message repeats where it is ("/name: must ..."); the SDK keeps that in ``field``.
    by_service = [(e["field"], e["code"], e["message"].split(": ", 1)[1]) for e in answer.json()["errors"]]

    with pytest.raises(InvalidRequest) as raised:
        create(body)

    assert [(e.field, e.code, e.message) for e in raised.value.errors] == by_service
    assert "TOPSECRET" not in str(raised.value)


def test_a_name_is_measured_after_composing_it_as_the_service_does(admin: WePushClient) -> None:
    workspace = admin.workspace(_workspace_id(admin))
    decomposed = "e\u0301" * 150  # 300 code points, 150 letters "é" once composed (NFC)

    created = workspace.audiences.create({"name": decomposed})

    assert created.name == "\u00e9" * 150
    with pytest.raises(InvalidRequest) as raised:
        workspace.audiences.create({"name": "e\u0301" * 201})
    assert [(e.field, e.message) for e in raised.value.errors] == [("/name", "must satisfy maxLength=200")]


def test_the_sdk_refuses_an_argument_as_the_service_does(
    served: tuple[str, str], admin: WePushClient
) -> None:
    workspace_id = _workspace_id(admin)
    endpoint, token = served
    answer = httpx.get(
        f"{endpoint}/api/v1/workspaces/{workspace_id}/accounts",
        params={"limit": "500"},
        headers={"Authorization": f"Bearer {token}"},
    )
    by_service = [(e["field"], e["code"], e["message"].split(": ", 1)[1]) for e in answer.json()["errors"]]

    with pytest.raises(InvalidRequest) as raised:
        admin.workspace(workspace_id).accounts.list(limit=500)

    assert [(e.field, e.code, e.message) for e in raised.value.errors] == by_service


def test_the_health_probes_report_a_ready_service(admin: WePushClient) -> None:
    readiness = admin.readiness()

    assert str(admin.liveness().status.value) == "UP"
    assert str(readiness.status.value) == "UP"
    assert readiness.checks is not None
    assert {"database", "migrations", "secrets", "artifacts"} <= set(readiness.checks)
