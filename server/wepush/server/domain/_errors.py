"""Domain errors. Each carries a stable ``code`` that crosses every boundary unchanged."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from ._resources import ResourceReferences
    from ._run_state import RunCommandType, RunState


class DomainError(Exception):
    """Base class; ``code`` is the stable error code (see the Problem ``code`` enum)."""

    code: ClassVar[str] = "INTERNAL_ERROR"


class DatabaseBusy(DomainError):
    """The database stayed locked by other writers past its busy timeout (standalone SQLite has one
    writer at a time): nothing was done, and the same request can simply be sent again."""

    code: ClassVar[str] = "SERVICE_NOT_READY"
    retry_after_seconds: ClassVar[int] = 5

    def __init__(self) -> None:
        super().__init__("The database is busy with other writes; nothing was done, retry shortly.")


class DatabaseUnavailable(DomainError):
    """The database cannot be used right now: it does not answer, refused or lost the connection, or
    (standalone) its disk is full or read-only. A transient outage for the caller, not a fault of the
    request: 503 with Retry-After, as ``/health/ready`` shows (check ``database``). A write interrupted
    before its commit was rolled back; send it again (with its Idempotency-Key) once the database is back."""

    code: ClassVar[str] = "SERVICE_NOT_READY"
    retry_after_seconds: ClassVar[int] = 10

    def __init__(self) -> None:
        super().__init__("The database cannot be used right now; retry shortly.")


class ArtifactStoreUnreachable(DomainError):
    """The store that holds artifact bytes cannot be reached (no connection, a timeout) or answers with
    a server error. Nothing was lost: the same request succeeds once the store is back, which
    ``/health/ready`` shows (check ``artifacts``)."""

    code: ClassVar[str] = "SERVICE_NOT_READY"
    retry_after_seconds: ClassVar[int] = 10

    def __init__(self) -> None:
        super().__init__("The artifact store cannot be reached right now; nothing was lost, retry shortly.")


class NotFound(DomainError):
    code: ClassVar[str] = "RESOURCE_NOT_FOUND"

    def __init__(self, resource_type: str, resource_id: str) -> None:
        super().__init__(f"{resource_type} {resource_id} was not found")
        self.resource_type = resource_type
        self.resource_id = resource_id


class VersionConflict(DomainError):
    """An optimistic update found a different version (or state) than the one it was based on."""

    code: ClassVar[str] = "VERSION_CONFLICT"

    def __init__(
        self,
        resource_type: str,
        resource_id: str,
        expected_version: int,
        *,
        current: int | None = None,
        unit: str = "version",
    ) -> None:
        # With the current number known, say it: a request based on a number never reached is no
        # "no longer" but a wrong number.
        if current is None:
            text = f"{resource_type} {resource_id} is no longer at {unit} {expected_version}"
        else:
            text = f"{resource_type} {resource_id} is at {unit} {current}, not {expected_version}"
        super().__init__(text)
        self.resource_type = resource_type
        self.resource_id = resource_id
        self.expected_version = expected_version


class DuplicateResource(DomainError):
    """A uniqueness rule (revision number, command id ...) would be broken, usually by a concurrent writer."""

    code: ClassVar[str] = "VERSION_CONFLICT"

    def __init__(self, resource_type: str, detail: str) -> None:
        super().__init__(f"{resource_type} already exists: {detail}")
        self.resource_type = resource_type
        self.detail = detail


class NameAlreadyUsed(DuplicateResource):
    """Another live resource of the same type in the workspace already has this name."""

    code: ClassVar[str] = "VALIDATION_FAILED"

    def __init__(self, resource_type: str, name: str) -> None:
        super().__init__(resource_type, f"name {name!r} is already used")
        self.name = name


class ResourceInUse(DomainError):
    """Deleting a resource that a Run (or another live resource) still references."""

    code: ClassVar[str] = "RESOURCE_IN_USE"

    def __init__(self, resource_type: str, resource_id: str, references: ResourceReferences) -> None:
        super().__init__(f"{resource_type} {resource_id} is referenced by {references.describe()}")
        self.resource_type = resource_type
        self.resource_id = resource_id
        self.references = references


class RunStateConflict(DomainError):
    code: ClassVar[str] = "RUN_STATE_CONFLICT"

    def __init__(
        self,
        run_id: str,
        current_state: RunState,
        attempted: str,
        allowed_commands: Sequence[RunCommandType],
    ) -> None:
        # The command as the API spells it (change-concurrency), not as the code does.
        super().__init__(f"Run cannot {attempted.replace('_', '-')} from {current_state.value}")
        self.run_id = run_id
        self.current_state = current_state
        self.attempted = attempted
        self.allowed_commands = tuple(allowed_commands)


class LeaseExpired(DomainError):
    """A write carried a lease id, epoch or fencing token that is no longer the active one."""

    code: ClassVar[str] = "LEASE_EXPIRED"

    def __init__(self, lease_id: str) -> None:
        super().__init__(f"lease {lease_id} is not active for this epoch and token")
        self.lease_id = lease_id


class IdempotencyConflict(DomainError):
    code: ClassVar[str] = "IDEMPOTENCY_CONFLICT"

    def __init__(self, scope: str) -> None:
        super().__init__(f"the idempotency key was already used in scope {scope}")
        self.scope = scope


class ImportStateConflict(DomainError):
    code: ClassVar[str] = "IMPORT_STATE_CONFLICT"

    def __init__(self, import_id: str, current_state: str, attempted: str, *, why: str | None = None) -> None:
        super().__init__(why or f"audience import {import_id} cannot {attempted} from {current_state}")
        self.import_id = import_id
        self.current_state = current_state
        self.attempted = attempted
