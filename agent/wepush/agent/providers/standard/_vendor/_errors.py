"""Error tables: every outcome a standard provider reports, with its category and retry advice.

One :class:`ErrorTable` per provider is the single source of truth: sessions
build results from it, the contract tests derive the claimed categories from it
and ``docs/providers.md`` shows it (a test keeps the two identical).

Each provider table starts from :func:`transport_rows`, the outcomes every
HTTP-speaking vendor shares, and adds rows for the vendor's own codes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from types import MappingProxyType

from wepush.agent.providers.common import RenderProblem, UnknownVariableError
from wepush.agent.providers.spi import ErrorCategory, ProviderResult

__all__ = ["ErrorRow", "ErrorTable", "row", "transport_rows"]

C = ErrorCategory


@dataclass(frozen=True, slots=True)
class ErrorRow:
    """A stable provider code, its category, retry advice and the vendor codes it covers."""

    code: str
    category: ErrorCategory
    retryable: bool
    meaning: str
    vendor_codes: tuple[str, ...] = ()
    retry_after: timedelta | None = None


def row(
    code: str,
    category: ErrorCategory,
    meaning: str,
    *vendor_codes: str,
    retryable: bool | None = None,
    retry_after: timedelta | None = None,
) -> ErrorRow:
    """A row whose retry advice defaults to the category's usual one."""
    default = category in {C.RATE_LIMITED, C.TEMPORARY_REMOTE, C.NETWORK}
    return ErrorRow(
        code, category, default if retryable is None else retryable, meaning, vendor_codes, retry_after
    )


def transport_rows(prefix: str, *, timeout_retryable: bool = False) -> tuple[ErrorRow, ...]:
    """Outcomes decided before or around the vendor's answer, shared by every HTTP vendor.

    A read timeout or a connection lost mid-request may hide a delivered message,
    so neither is retried unless the vendor deduplicates (``timeout_retryable``),
    and both end the item UNKNOWN rather than FAILED: the lost connection is
    category UNKNOWN, because NETWORK means nothing reached the vendor (its
    items end FAILED, and resending those must not duplicate a message).
    """
    p = prefix
    return (
        row(f"{p}_CONNECT_FAILED", C.NETWORK, "the vendor host could not be reached"),
        row(f"{p}_TLS_FAILED", C.NETWORK, "TLS handshake with the vendor failed", retryable=False),
        row(
            f"{p}_CONNECTION_LOST",
            C.UNKNOWN,
            "the connection dropped mid-request; the message may have been delivered",
            retryable=False,
        ),
        # NETWORK, not TIMEOUT: TIMEOUT says "may have been delivered" (UNKNOWN, retried only where safe).
        row(f"{p}_CONNECT_TIMEOUT", C.NETWORK, "connecting timed out; nothing was sent", retryable=True),
        row(
            f"{p}_TIMEOUT",
            C.TIMEOUT,
            "no answer in time; the message may have been delivered",
            retryable=timeout_retryable,
        ),
        row(f"{p}_CANCELLED", C.CANCELLED, "the run cancelled the call", retryable=False),
        row(f"{p}_INTERNAL_ERROR", C.INTERNAL, "an unexpected failure inside the provider"),
        row(
            f"{p}_RESPONSE_UNREADABLE",
            C.UNKNOWN,
            "HTTP 2xx without a readable vendor result; delivery is unconfirmed",
        ),
        row(f"{p}_HTTP_UNAUTHORIZED", C.AUTHENTICATION, "HTTP 401 without a vendor code"),
        row(f"{p}_HTTP_FORBIDDEN", C.AUTHORIZATION, "HTTP 403 without a vendor code"),
        row(f"{p}_HTTP_RATE_LIMITED", C.RATE_LIMITED, "HTTP 429 without a vendor code"),
        row(f"{p}_HTTP_SERVER_ERROR", C.TEMPORARY_REMOTE, "HTTP 5xx without a vendor code"),
        row(f"{p}_HTTP_REJECTED", C.PERMANENT_REMOTE, "another non-2xx status without a vendor code"),
        row(f"{p}_VENDOR_ERROR", C.PERMANENT_REMOTE, "a vendor error code this table does not list"),
        row(
            f"{p}_RECIPIENT_FIELD_MISSING",
            C.RECIPIENT_INVALID,
            "the recipient lacks a field the message uses",
        ),
        row(f"{p}_RECIPIENT_VALUE_INVALID", C.RECIPIENT_INVALID, "a recipient field cannot be used as given"),
    )


class ErrorTable:
    """Rows by provider code and by vendor code (one vendor code belongs to one row)."""

    def __init__(self, prefix: str, rows: Iterable[ErrorRow]) -> None:
        self.prefix = prefix
        by_code: dict[str, ErrorRow] = {}
        by_vendor: dict[str, ErrorRow] = {}
        for item in rows:
            if item.code in by_code:
                raise ValueError(f"duplicate provider code {item.code}")
            by_code[item.code] = item
            for vendor_code in item.vendor_codes:
                if vendor_code in by_vendor:
                    raise ValueError(f"vendor code {vendor_code} is mapped twice")
                by_vendor[vendor_code] = item
        self._by_code: Mapping[str, ErrorRow] = MappingProxyType(by_code)
        self._by_vendor: Mapping[str, ErrorRow] = MappingProxyType(by_vendor)

    @property
    def rows(self) -> tuple[ErrorRow, ...]:
        return tuple(self._by_code.values())

    @property
    def categories(self) -> frozenset[ErrorCategory]:
        return frozenset(item.category for item in self._by_code.values())

    def __getitem__(self, code: str) -> ErrorRow:
        return self._by_code[code]

    def local(self, suffix: str) -> ErrorRow:
        """The shared row ``<prefix>_<suffix>`` (e.g. ``local("TIMEOUT")``)."""
        return self._by_code[f"{self.prefix}_{suffix}"]

    def recipient_row(self, exc: UnknownVariableError | RenderProblem) -> ErrorRow:
        """The row for a Recipient that cannot be rendered: a missing field, or what the problem names."""
        return self.local(exc.suffix if isinstance(exc, RenderProblem) else "RECIPIENT_FIELD_MISSING")

    def for_vendor(self, vendor_code: str) -> ErrorRow | None:
        return self._by_vendor.get(vendor_code)

    def fail(
        self,
        code_or_row: str | ErrorRow,
        diagnostic: str,
        *,
        retry_after: timedelta | None = None,
        external_request_id: str | None = None,
    ) -> ProviderResult:
        item = code_or_row if isinstance(code_or_row, ErrorRow) else self._by_code[code_or_row]
        return ProviderResult.failure(
            item.category,
            item.code,
            diagnostic,
            retry_after if retry_after is not None else item.retry_after,
            item.retryable,
            external_request_id=external_request_id,
        )

    def markdown(self) -> str:
        """The table as Markdown rows, as shown in ``docs/providers.md``."""
        lines = [
            "| Provider code | Vendor codes | Category | Retry | Meaning |",
            "| --- | --- | --- | --- | --- |",
        ]
        for item in self._by_code.values():
            vendor = ", ".join(f"`{v}`" for v in item.vendor_codes) or "—"
            retry = "yes" if item.retryable else "no"
            lines.append(f"| `{item.code}` | {vendor} | {item.category.value} | {retry} | {item.meaning} |")
        return "\n".join(lines)
