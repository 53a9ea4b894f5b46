"""``wepush migrate``: the single migration job (Alembic upgrade to head)."""

from __future__ import annotations

import argparse

from wepush.cli._operator import EXIT_USAGE, operator_config, run_operator


def migrate(args: argparse.Namespace) -> int:
    config = operator_config("migrate", args)
    if config is None:
        return EXIT_USAGE
    from wepush.server.infra.db.migrate import upgrade_database

    def upgrade() -> str:
        config.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        return f"wepush migrate: {upgrade_database(config.database.url).describe()}"

    return run_operator("migrate", upgrade)
