"""Typed errors of the remote SDK.

Every non-2xx answer of the Service is ``application/problem+json`` with a stable ``code``; callers branch
on the exception class or on ``code``, never on ``title``/``detail``. Network failures that survive the
retry policy surface as :class:`TransportError`. No message or repr ever carries the API token: the token
only lives in request headers, and none of these classes look at requests.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "AccessDenied",
    "AuthenticationRequired",
    "Conflict",
    "CursorExpired",
    "FieldError",
    "IdempotencyConflict",
    "InvalidRequest",
    "InvalidResponse",
    "NotFound",
    "ProblemError",
    "RateLimited",
    "ResourceInUse",
    "RunStateConflict",
    "ServiceUnavailable",
    "TransportError",
    "ValidationFailed",
    "VersionConflict",
    "WePushError",
    "problem_error_from_response",
]

# A proxy's HTML error page must not flood logs through the exception message.
_MAX_TEXT = 512


class WePushError(Exception):
    """Base class of every error the remote SDK raises."""


def _rebuild(cls: type[WePushError], kwargs: Mapping[str, Any]) -> WePushError:
    """Unpickling hook: the errors take keyword arguments, which Exception's own pickling cannot pass."""
    return cls(**kwargs)


class TransportError(WePushError):
    """The request never produced an HTTP answer (connect failure, reset, timeout), even after retries."""

    def __init__(self, message: str, *, method: str, path: str, attempts: int) -> None:
        super().__init__(f"{method} {path} failed after {attempts} attempt(s): {message}")
        self.reason = message
        self.method = method
        self.path = path
        self.attempts = attempts

    def __reduce__(self) -> tuple[Any, ...]:
        state = {"message": self.reason, "method": self.method, "path": self.path, "attempts": self.attempts}
        return (_rebuild, (type(self), state))


class InvalidResponse(WePushError):
    """The Service answered something the contract does not allow (for example a malformed event)."""


@dataclass(frozen=True, slots=True)
class FieldError:
    """One field-level validation failure of a problem's ``errors`` list."""

    field: str
    code: str
    message: str


#: Field errors a problem's message lists; the rest stay in ``errors``.
_SHOWN_FIELD_ERRORS = 5


def _describe(errors: Sequence[FieldError]) -> str:
    shown = [f"{e.field}: {e.message} ({e.code})" for e in errors[:_SHOWN_FIELD_ERRORS]]
    more = len(errors) - len(shown)
    return "; ".join(shown) + (f"; and {more} more" if more else "")


class InvalidRequest(WePushError, ValueError):
    """The SDK refused to send a request whose body or arguments break the contract.

    ``errors`` names each location (a JSON pointer such as ``/policies/concurrency`` into a body, or an
    argument's name) with the rule it breaks, as the Service's ``ValidationFailed`` does. Neither the
    message nor ``errors`` quotes the submitted value, which may be a secret. It is a ``ValueError`` too,
    so code written against the generated client's validation errors keeps working.
    """

    def __init__(self, subject: str, errors: Sequence[FieldError]) -> None:
        self.subject = subject
        self.errors: tuple[FieldError, ...] = tuple(errors)
        super().__init__(f"invalid {subject}: {_describe(self.errors)}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), {"subject": self.subject, "errors": self.errors}))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(subject={self.subject!r}, errors={len(self.errors)})"


class ProblemError(WePushError):
    """The Service refused the request with a problem document; ``code`` is the stable error code."""

    def __init__(
        self,
        *,
        status: int,
        code: str,
        title: str,
        detail: str | None = None,
        errors: Sequence[FieldError] = (),
        trace_id: str | None = None,
        body: Mapping[str, Any] | None = None,
    ) -> None:
        self.status = status
        self.code = code
        self.title = title
        self.detail = detail
        self.errors: tuple[FieldError, ...] = tuple(errors)
        self.trace_id = trace_id
        self.body: Mapping[str, Any] = dict(body or {})
        super().__init__(self._message())

    def _message(self) -> str:
        text = f"{self.status} {self.code}: {self.title}"
        if self.detail:
            text += f" - {self.detail}"
        if self.errors:
            # Which field broke which rule is usually the part the reader needs; the Service words it
            # without the submitted values.
            text += "; " + _describe(self.errors)
        if self.trace_id:
            text += f" (traceId {self.trace_id})"
        return text

    def _arguments(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "code": self.code,
            "title": self.title,
            "detail": self.detail,
            "errors": self.errors,
            "trace_id": self.trace_id,
            "body": dict(self.body),
        }

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled for multiprocessing and task queues, copied by copy.copy: rebuilt from the arguments.
        return (_rebuild, (type(self), self._arguments()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(status={self.status}, code={self.code!r}, trace_id={self.trace_id!r})"


class ValidationFailed(ProblemError):
    """400/413/422: the request is malformed or violates a limit; see ``errors`` and ``allowed_range``."""

    @property
    def allowed_range(self) -> tuple[int, int] | None:
        bounds = self.body.get("allowedRange")
        if (
            isinstance(bounds, Mapping)
            and isinstance(bounds.get("min"), int)
            and isinstance(bounds.get("max"), int)
        ):
            return (bounds["min"], bounds["max"])
        return None


class AuthenticationRequired(ProblemError):
    """401: the token is missing, unknown, expired or revoked."""


class AccessDenied(ProblemError):
    """403: the token's role does not allow the operation."""


class NotFound(ProblemError):
    """404: the resource does not exist or is not visible to the caller."""


class Conflict(ProblemError):
    """409: a version, idempotency, state or reference conflict."""


class VersionConflict(Conflict):
    """409 VERSION_CONFLICT: the resource changed since it was read; reload and retry."""


class IdempotencyConflict(Conflict):
    """409 IDEMPOTENCY_CONFLICT: the Idempotency-Key was used before with a different request."""


class RunStateConflict(Conflict):
    """409 RUN_STATE_CONFLICT: the run's state does not allow the command."""

    @property
    def current_state(self) -> str | None:
        value = self.body.get("currentState")
        return value if isinstance(value, str) else None

    @property
    def allowed_commands(self) -> tuple[str, ...]:
        value = self.body.get("allowedCommands")
        if isinstance(value, list):
            return tuple(item for item in value if isinstance(item, str))
        return ()


class ResourceInUse(Conflict):
    """409 RESOURCE_IN_USE: another resource still references this one."""


class _WithRetryAfter(ProblemError):
    def __init__(self, *, retry_after: float | None = None, **kwargs: Any) -> None:
        self.retry_after = retry_after
        super().__init__(**kwargs)

    def _arguments(self) -> dict[str, Any]:
        return {**super()._arguments(), "retry_after": self.retry_after}


class RateLimited(_WithRetryAfter):
    """429 RATE_LIMITED; ``retry_after`` is the server's requested wait in seconds, when it sent one."""


class ServiceUnavailable(_WithRetryAfter):
    """503: no capable provider or agent, or the Service is not ready; ``retry_after`` as for RateLimited."""


class CursorExpired(ProblemError):
    """410 CURSOR_EXPIRED: the event position was purged; reload the run detail instead of resuming."""


_BY_CODE: Mapping[str, type[ProblemError]] = {
    "VALIDATION_FAILED": ValidationFailed,
    "CURSOR_INVALID": ValidationFailed,
    "CONFIRMATION_REQUIRED": ValidationFailed,
    "PROVIDER_CONFIG_INVALID": ValidationFailed,
    "PAYLOAD_TOO_LARGE": ValidationFailed,
    "IMPORT_LIMIT_EXCEEDED": ValidationFailed,
    "AUTHENTICATION_REQUIRED": AuthenticationRequired,
    "ACCESS_DENIED": AccessDenied,
    "RESOURCE_NOT_FOUND": NotFound,
    "VERSION_CONFLICT": VersionConflict,
    "IDEMPOTENCY_CONFLICT": IdempotencyConflict,
    "RUN_STATE_CONFLICT": RunStateConflict,
    "RESOURCE_IN_USE": ResourceInUse,
    "CONFIRMATION_INVALID": Conflict,
    "IMPORT_STATE_CONFLICT": Conflict,
    "ARTIFACT_NOT_READY": Conflict,
    "LEASE_EXPIRED": Conflict,
    "RATE_LIMITED": RateLimited,
    "PROVIDER_NOT_AVAILABLE": ServiceUnavailable,
    "AGENT_NOT_AVAILABLE": ServiceUnavailable,
    "SERVICE_NOT_READY": ServiceUnavailable,
    "CURSOR_EXPIRED": CursorExpired,
}

_BY_STATUS: Mapping[int, type[ProblemError]] = {
    400: ValidationFailed,
    401: AuthenticationRequired,
    403: AccessDenied,
    404: NotFound,
    409: Conflict,
    410: CursorExpired,
    413: ValidationFailed,
    422: ValidationFailed,
    429: RateLimited,
    503: ServiceUnavailable,
}


def _text(value: object) -> str | None:
    return value[:_MAX_TEXT] if isinstance(value, str) and value else None


def _field_errors(value: object) -> list[FieldError]:
    if not isinstance(value, list):
        return []
    return [
        FieldError(
            field=str(item.get("field", "")),
            code=str(item.get("code", "")),
            message=str(item.get("message", "")),
        )
        for item in value
        if isinstance(item, Mapping)
    ]


def problem_error_from_response(
    status: int, body: bytes | str | None, *, retry_after: float | None = None
) -> ProblemError:
    """Build the typed error for a non-2xx answer.

    The class follows the problem's ``code`` first and the HTTP status second, so an unknown future code
    still lands in the right family. A body that is not a problem document (a proxy's error page) keeps
    the status and gets the code ``HTTP_<status>``, which is stable but says the Service did not answer.
    """
    document: dict[str, Any] = {}
    raw = body.decode("utf-8", "replace") if isinstance(body, bytes) else (body or "")
    try:
        parsed = json.loads(raw) if raw else None
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        document = parsed
    code = document.get("code") if isinstance(document.get("code"), str) else None
    cls = _BY_CODE.get(code or "") or _BY_STATUS.get(status) or ProblemError
    kwargs: dict[str, Any] = {
        "status": status,
        "code": code or f"HTTP_{status}",
        "title": _text(document.get("title")) or f"HTTP {status}",
        "detail": _text(document.get("detail")),
        "errors": _field_errors(document.get("errors")),
        "trace_id": _text(document.get("traceId")),
        "body": document,
    }
    if issubclass(cls, _WithRetryAfter):
        return cls(retry_after=retry_after, **kwargs)
    return cls(**kwargs)
