"""Staged rows are readable while the import is STAGED or COMMITTED and not past its deadline."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from wepush.server.application.imports import IMPORT_TTL, staging_readable
from wepush.server.domain import AudienceImport, ImportFormat, ImportState, ImportStateConflict

CREATED = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def _import(state: ImportState) -> AudienceImport:
    return AudienceImport(
        workspace_id="w",
        audience_id="a",
        state=state,
        format=ImportFormat.CSV,
        options={},
        expires_at=CREATED + IMPORT_TTL,
        created_at=CREATED,
        updated_at=CREATED,
    )


@pytest.mark.parametrize("state", [ImportState.STAGED, ImportState.COMMITTED])
def test_staged_and_committed_imports_are_readable_until_their_deadline(state: ImportState) -> None:
    just_before = CREATED + IMPORT_TTL - timedelta(seconds=1)
    assert staging_readable(_import(state), just_before, "preview").state is state
    with pytest.raises(ImportStateConflict):
        staging_readable(_import(state), CREATED + IMPORT_TTL, "preview")


def test_a_committed_import_past_its_deadline_says_its_staged_rows_are_gone() -> None:
    with pytest.raises(
        ImportStateConflict, match=r"cannot preview any more \(staged rows are kept 24 hours\) from COMMITTED"
    ):
        staging_readable(_import(ImportState.COMMITTED), CREATED + IMPORT_TTL, "preview")


def test_an_open_import_past_its_deadline_reads_as_expired() -> None:
    with pytest.raises(ImportStateConflict, match="cannot download errors from EXPIRED"):
        staging_readable(
            _import(ImportState.STAGED), CREATED + IMPORT_TTL + timedelta(hours=1), "download errors"
        )


def test_an_import_not_yet_staged_is_not_readable() -> None:
    with pytest.raises(ImportStateConflict, match="from CREATED"):
        staging_readable(_import(ImportState.CREATED), CREATED, "preview")
