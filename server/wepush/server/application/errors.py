"""Application-level errors. Like domain errors they carry a stable ``code`` the API maps to a status."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from wepush.server.domain import DomainError


@dataclass(frozen=True, slots=True)
class FieldIssue:
    """One problem with one field: ``field`` is a JSON-pointer-like path (``/config/baseUrl``)."""

    field: str
    code: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"field": self.field, "code": self.code, "message": self.message}


class AccessDenied(DomainError):
    code: ClassVar[str] = "ACCESS_DENIED"

    def __init__(self, detail: str = "The caller's role does not allow this operation.") -> None:
        super().__init__(detail)


class ValidationFailed(DomainError):
    code: ClassVar[str] = "VALIDATION_FAILED"

    def __init__(self, detail: str, issues: Sequence[FieldIssue] = ()) -> None:
        super().__init__(detail)
        self.issues = tuple(issues)


class ProviderConfigInvalid(ValidationFailed):
    """The provider's own semantic validation refused the configuration (422)."""

    code: ClassVar[str] = "PROVIDER_CONFIG_INVALID"


class ProviderNotAvailable(DomainError):
    code: ClassVar[str] = "PROVIDER_NOT_AVAILABLE"

    def __init__(self, provider_id: str) -> None:
        super().__init__(f"provider {provider_id} is not available in the catalog")
        self.provider_id = provider_id


class ImportLimitExceeded(DomainError):
    code: ClassVar[str] = "IMPORT_LIMIT_EXCEEDED"


class PayloadTooLarge(DomainError):
    code: ClassVar[str] = "PAYLOAD_TOO_LARGE"
