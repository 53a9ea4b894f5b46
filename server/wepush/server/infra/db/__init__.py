"""SQLAlchemy 2 (async) persistence: engines, tables, repositories and the unit of work.

Rows never leave this package: every repository maps rows to domain entities explicitly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._database_lock import DatabaseInUse, DatabaseLock, sqlite_database_file
from ._ledger_sqlite import SqliteExecutionLedger, execution_ledger
from ._recovery_locks import DatabaseRecoveryLocks
from ._repo_agents import SqlAgentOutboxRepository, SqlAgentRepository
from ._repo_audience import DUPLICATE_ITEM_KEY, SqlAudienceImportRepository, SqlAudienceRepository
from ._repo_events import SqlRunCommandRepository, SqlRunEventRepository
from ._repo_leases import SqlLeaseRepository
from ._repo_records import SqlArtifactRepository, SqlAuditRepository, SqlIdempotencyRepository
from ._repo_resources import (
    SqlAccountRepository,
    SqlJobRepository,
    SqlMessageRepository,
    SqlScheduleRepository,
)
from ._repo_runs import SqlRunItemRepository, SqlRunRepository
from ._repo_workspace import SqlApiTokenRepository, SqlSecretRecordRepository, SqlWorkspaceRepository
from ._stored_figures import AgentFigures, StoredFigures, read_stored_figures
from ._uow import SqlUnitOfWork, SqlUnitOfWorkFactory
from .engine import READ_ONLY_OPTION, PoolSettings, create_database, normalize_database_url, run_database_task
from .migrate import (
    SchemaFit,
    SchemaState,
    UnknownSchemaRevision,
    current_revision,
    current_revision_async,
    head_revision,
    is_up_to_date,
    is_up_to_date_async,
    require_usable,
    revision_of,
    schema_state_async,
    schema_state_of,
    upgrade_database,
    upgrade_database_async,
)
from .tables import metadata

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

    from wepush.server.domain import UnitOfWorkFactory

    def _satisfies_the_ports(engine: AsyncEngine) -> UnitOfWorkFactory:
        # mypy proves here that the SQL unit of work implements every repository port.
        return SqlUnitOfWorkFactory(engine)


__all__ = [
    "DUPLICATE_ITEM_KEY",
    "READ_ONLY_OPTION",
    "AgentFigures",
    "DatabaseInUse",
    "DatabaseLock",
    "DatabaseRecoveryLocks",
    "PoolSettings",
    "SchemaFit",
    "SchemaState",
    "SqlAccountRepository",
    "SqlAgentOutboxRepository",
    "SqlAgentRepository",
    "SqlApiTokenRepository",
    "SqlArtifactRepository",
    "SqlAudienceImportRepository",
    "SqlAudienceRepository",
    "SqlAuditRepository",
    "SqlIdempotencyRepository",
    "SqlJobRepository",
    "SqlLeaseRepository",
    "SqlMessageRepository",
    "SqlRunCommandRepository",
    "SqlRunEventRepository",
    "SqlRunItemRepository",
    "SqlRunRepository",
    "SqlScheduleRepository",
    "SqlSecretRecordRepository",
    "SqlUnitOfWork",
    "SqlUnitOfWorkFactory",
    "SqlWorkspaceRepository",
    "SqliteExecutionLedger",
    "StoredFigures",
    "UnknownSchemaRevision",
    "create_database",
    "current_revision",
    "current_revision_async",
    "execution_ledger",
    "head_revision",
    "is_up_to_date",
    "is_up_to_date_async",
    "metadata",
    "normalize_database_url",
    "read_stored_figures",
    "require_usable",
    "revision_of",
    "run_database_task",
    "schema_state_async",
    "schema_state_of",
    "sqlite_database_file",
    "upgrade_database",
    "upgrade_database_async",
]
