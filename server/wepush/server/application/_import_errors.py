"""Why an upload stops: the file cannot be read or does not fit the settings (the import FAILS, 200), or it
breaks a limit (413)."""

from __future__ import annotations

from typing import ClassVar

from wepush.server.application.errors import ImportLimitExceeded, PayloadTooLarge

__all__ = ["ContentRejected", "HeaderRejected", "ImportLimitError", "UploadTooLarge"]


class ContentRejected(Exception):
    """The body cannot be read as the file it should be; the import FAILS with this reason and no rows."""


class HeaderRejected(ContentRejected):
    """The file's columns do not fit the mapping."""


class ImportLimitError(ImportLimitExceeded):
    """Row, column or line-length limit: 413 as the upload operation declares, with the import's own code."""

    status: ClassVar[int] = 413


class UploadTooLarge(PayloadTooLarge):
    """The body is larger than the import byte limit."""

    status: ClassVar[int] = 413
