"""Run execution: the frozen run snapshot, the fenced ports a run executes through, commands, recovery,
artifacts (store port, download, retention, rebuild) and the availability hint.

The embedded agent (``wepush.server.infra.execution``) drives these pieces; the API layer uses the
snapshot builder, the notifier and :class:`ArtifactDownloads`.
"""

from __future__ import annotations

from ._artifact_repair import OutcomeArtifactRepair, RepairReport
from ._artifacts import (
    ARTIFACT_KINDS,
    CSV_EXPORT,
    OUTCOME_TYPES,
    RUN_LOG,
    ArtifactKind,
    ResultArtifacts,
    RetentionPolicy,
    RunArtifactWriter,
    RunLog,
)
from ._commands import PENDING_COMMAND_STATES, ack_message, engine_command, pending_commands, reject_pending
from ._downloads import (
    ArtifactDownload,
    ArtifactDownloads,
    ArtifactNotReady,
    ByteRange,
    RangeNotSatisfiable,
    parse_range_header,
)
from ._events import EventGapError, FencedRunEventSink, move_run, path_to
from ._execution import ExecutionContext, RunExecution
from ._fence import LeaseGuard, TransactionScope, plain_transactions, retrying
from ._ledger import ExecutionLedger, UnitOfWorkLedger
from ._metrics import ExecutionMetrics, RunMeter
from ._notifier import HintListener, RunAvailabilityNotifier
from ._policies import (
    InvalidPolicies,
    merge_policies,
    normalize_policies,
    policies_from_json,
    policies_to_json,
)
from ._recipients import RecipientScope, SnapshotRecipientSource, read_recipients
from ._recovery import EXECUTING_STATES, RecoveryOutcome, RunRecovery
from ._recovery_locks import InProcessRecoveryLocks, RecoveryLocks
from ._results import FencedResultSink, engine_result, storable_text, stored_result
from ._retention import ArtifactRetention, RetentionReport
from ._secrets import RegisteredSecrets, StoredSecretResolver, open_secret_record
from ._settle import SETTLED_CODE, SettledItems, settle_items
from ._snapshot import (
    ACCOUNT_SECRET_OWNER,
    SNAPSHOT_SPEC_VERSION,
    AccountSnapshot,
    AudienceRef,
    InvalidSnapshot,
    MessageSnapshot,
    MissingSecret,
    ProviderPin,
    ResendOf,
    RunSnapshot,
    build_run_snapshot,
    resend_snapshot,
    secret_names,
    snapshot_for_job,
)
from ._spec import execution_spec, item_id_for, recipient_fields_record, recipient_record
from ._store import ArtifactObjectMissing, ArtifactStore, ArtifactUpload, StoredObject

__all__ = [
    "ACCOUNT_SECRET_OWNER",
    "ARTIFACT_KINDS",
    "CSV_EXPORT",
    "EXECUTING_STATES",
    "OUTCOME_TYPES",
    "PENDING_COMMAND_STATES",
    "RUN_LOG",
    "SETTLED_CODE",
    "SNAPSHOT_SPEC_VERSION",
    "AccountSnapshot",
    "ArtifactDownload",
    "ArtifactDownloads",
    "ArtifactKind",
    "ArtifactNotReady",
    "ArtifactObjectMissing",
    "ArtifactRetention",
    "ArtifactStore",
    "ArtifactUpload",
    "AudienceRef",
    "ByteRange",
    "EventGapError",
    "ExecutionContext",
    "ExecutionLedger",
    "ExecutionMetrics",
    "FencedResultSink",
    "FencedRunEventSink",
    "HintListener",
    "InProcessRecoveryLocks",
    "InvalidPolicies",
    "InvalidSnapshot",
    "LeaseGuard",
    "MessageSnapshot",
    "MissingSecret",
    "OutcomeArtifactRepair",
    "ProviderPin",
    "RangeNotSatisfiable",
    "RecipientScope",
    "RecoveryLocks",
    "RecoveryOutcome",
    "RegisteredSecrets",
    "RepairReport",
    "ResendOf",
    "ResultArtifacts",
    "RetentionPolicy",
    "RetentionReport",
    "RunArtifactWriter",
    "RunAvailabilityNotifier",
    "RunExecution",
    "RunLog",
    "RunMeter",
    "RunRecovery",
    "RunSnapshot",
    "SettledItems",
    "SnapshotRecipientSource",
    "StoredObject",
    "StoredSecretResolver",
    "TransactionScope",
    "UnitOfWorkLedger",
    "ack_message",
    "build_run_snapshot",
    "engine_command",
    "engine_result",
    "execution_spec",
    "item_id_for",
    "merge_policies",
    "move_run",
    "normalize_policies",
    "open_secret_record",
    "parse_range_header",
    "path_to",
    "pending_commands",
    "plain_transactions",
    "policies_from_json",
    "policies_to_json",
    "read_recipients",
    "recipient_fields_record",
    "recipient_record",
    "reject_pending",
    "resend_snapshot",
    "retrying",
    "secret_names",
    "settle_items",
    "snapshot_for_job",
    "storable_text",
    "stored_result",
]
