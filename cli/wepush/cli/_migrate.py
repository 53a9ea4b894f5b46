"""``wepush migrate``: the single migration job (Alembic upgrade to head)."""

from __future__ import annotations

import sys
from pathlib import Path

from wepush.server.config import ConfigError, load_config


def migrate(*, config_file: Path | None, data_dir: Path | None) -> int:
    try:
        config = load_config(config_file, data_dir=data_dir)
    except ConfigError as exc:
        sys.stderr.write(f"wepush migrate: configuration error: {exc}\n")
        return 2
    from wepush.server.infra.db.migrate import upgrade_database

    config.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    upgrade_database(config.database.url)
    sys.stdout.write("wepush migrate: database schema is up to date\n")
    return 0
