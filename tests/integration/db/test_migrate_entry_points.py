"""``wepush.server.infra.db.migrate`` from a checkout, from the wheel layout, and the alembic CLI."""

from __future__ import annotations

import asyncio
import logging
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import wepush
from tests.fixtures.db import waiting_on_a_lock
from wepush.server.infra.db import (
    create_database,
    current_revision,
    current_revision_async,
    head_revision,
    is_up_to_date,
    migrate,
    upgrade_database,
)
from wepush.server.infra.db.migrate import MIGRATIONS_DIR_ENV, script_location

REPO = Path(__file__).resolve().parents[3]


def test_sync_helpers_migrate_a_new_sqlite_database(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'standalone.db'}"
    assert current_revision(url) is None

    upgrade_database(url)

    assert current_revision(url) == head_revision()
    assert is_up_to_date(url)


def test_reading_the_revision_logs_nothing_and_an_upgrade_logs_its_steps(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'standalone.db'}"
    caplog.set_level(logging.INFO, logger="alembic")

    upgrade_database(url)
    upgrading = [r.getMessage() for r in caplog.records if r.name.startswith("alembic")]
    caplog.clear()
    for _ in range(3):  # as readiness probes do
        assert is_up_to_date(url)

    assert [r.getMessage() for r in caplog.records if r.name.startswith("alembic")] == []
    assert any(m.startswith("Running upgrade") and head_revision() in m for m in upgrading)
    assert not any(m.startswith(("Context impl", "Will assume")) for m in upgrading)


def test_the_checkout_migrations_directory_is_found_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MIGRATIONS_DIR_ENV, raising=False)
    assert script_location() == REPO / "migrations"


def test_the_wheel_layout_wepush_migrations_is_used_outside_a_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The wheel force-includes migrations/ as wepush/_migrations inside the namespace package; an
    # installed package has no checkout beside it.
    installed = tmp_path / "site-packages" / "wepush"
    shutil.copytree(REPO / "migrations", installed / "_migrations")
    monkeypatch.delenv(MIGRATIONS_DIR_ENV, raising=False)
    monkeypatch.setattr(migrate, "_checkout_migrations", lambda: tmp_path / "no-checkout" / "migrations")
    monkeypatch.setattr(wepush, "__path__", [str(installed), *wepush.__path__])

    assert script_location() == installed / "_migrations"
    url = f"sqlite+aiosqlite:///{tmp_path / 'from-wheel.db'}"
    upgrade_database(url)
    assert is_up_to_date(url)


def test_an_explicit_migrations_directory_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    override = tmp_path / "custom-migrations"
    shutil.copytree(REPO / "migrations", override)
    monkeypatch.setenv(MIGRATIONS_DIR_ENV, str(override))
    assert script_location() == override


def test_the_alembic_command_line_migrates_with_its_own_engine(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}"
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "alembic",
            "-c",
            str(REPO / "alembic.ini"),
            "-x",
            f"url={url}",
            "upgrade",
            "head",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert is_up_to_date(url)


@pytest.mark.postgres
async def test_a_migration_started_while_another_runs_waits_for_it_and_then_succeeds(
    empty_postgres_url: str,
) -> None:
    # Two migration jobs at once (a retried deployment job, two release scripts) used to both find the
    # schema unmigrated; the second then failed on a duplicate key when it created the same tables.
    engine = create_database(empty_postgres_url)
    try:
        async with engine.connect() as first:
            await first.begin()
            await first.run_sync(migrate._upgrade, migrate.alembic_config(empty_postgres_url), "head")
            second = await asyncio.create_subprocess_exec(
                sys.executable,
                "-c",
                "import sys; from wepush.server.infra.db import upgrade_database; upgrade_database(sys.argv[1])",
                empty_postgres_url,
                stderr=asyncio.subprocess.PIPE,
            )
            waiting = await waiting_on_a_lock(engine, second.communicate())
            await first.commit()
        _, stderr = await asyncio.wait_for(waiting, timeout=120)
    finally:
        await engine.dispose()

    assert second.returncode == 0, stderr.decode(errors="replace")[-2000:]
    assert await current_revision_async(empty_postgres_url) == head_revision()
