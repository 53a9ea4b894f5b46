"""The SDK's administrative calls against a real `wepush serve` on loopback: tokens, members, audit, info."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers_process import running_service
from wepush.sdk.remote import (
    AuthenticationRequired,
    InvalidRequest,
    NotFound,
    WePushClient,
)


@pytest.fixture(scope="module")
def admin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WePushClient]:
    data_dir: Path = tmp_path_factory.mktemp("sdk-service") / "data"
    with running_service(data_dir) as service:
        token = (data_dir / "bootstrap-admin.token").read_text(encoding="utf-8").strip()
        with WePushClient(service.base_url, token) as client:
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
