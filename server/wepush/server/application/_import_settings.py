"""The settings of one CSV/TXT audience import: how the file is read and how columns become recipient fields.

Settings are fixed when the import is created and stored in the import's ``options`` document; the
upload reads them back. Every rule that can be checked without the file is checked here, so a wrong
mapping is a 400 at creation instead of a failed upload later.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from wepush.server.application._deps import ImportLimits
from wepush.server.application.errors import FieldIssue, ValidationFailed
from wepush.server.domain import ImportFormat, JsonObject

__all__ = [
    "ENCODINGS",
    "FIELD_NAME",
    "RECEIVED_BY_KEY",
    "SOURCE_COLUMNS_KEY",
    "ImportSettings",
    "source_columns",
]

#: Codec names as Python spells them; GB18030 is a superset of GBK and GB2312, so one name reads all three;
#: UTF-16 takes its byte order from its byte-order mark (``ImportText``).
ENCODINGS: Final = ("utf-8", "utf-8-sig", "gb18030", "utf-16")
#: A recipient field name as message templates spell a placeholder (``{{mobile}}``); the contract's
#: RecipientFieldName pattern.
FIELD_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,127}")
#: Characters that would make the delimiter indistinguishable from quoting or line structure.
_BAD_DELIMITERS: Final = frozenset({'"', "\r", "\n"})
#: Key under which the upload records the file's source columns (the header, or "1".."n").
SOURCE_COLUMNS_KEY: Final = "sourceColumns"
#: Key under which an upload records the name of the Service instance receiving the file.
RECEIVED_BY_KEY: Final = "receivedBy"


def _pointer(*parts: str) -> str:
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)


@dataclass(frozen=True, slots=True)
class ImportSettings:
    """``field_mapping`` maps a source column (header value, or 1-based position without header) to a
    recipient field. Duplicates are identified by the item id when ``item_id_field`` is set, otherwise
    by the combined ``dedupe_keys``; with neither, a TXT import's one field identifies its recipients (a
    list of numbers or addresses is a list of recipients: the same line twice is one recipient), and in a
    CSV import every row is its own recipient."""

    format: ImportFormat
    field_mapping: Mapping[str, str]
    has_header: bool = True
    delimiter: str = ","
    encoding: str = "utf-8"
    item_id_field: str | None = None
    dedupe_keys: tuple[str, ...] = ()
    #: Strip every CSV value (TXT lines always are): a stray space must not make another recipient.
    trim_whitespace: bool = True

    @property
    def key_fields(self) -> tuple[str, ...]:
        """The recipient fields whose values identify a recipient (must be non-empty on every row)."""
        if self.item_id_field is not None:
            return (self.item_id_field,)
        if not self.dedupe_keys and self.format is ImportFormat.TXT and len(self.field_mapping) == 1:
            return tuple(self.field_mapping.values())
        return self.dedupe_keys

    def issues(self, limits: ImportLimits) -> list[FieldIssue]:
        """Every inconsistency of the settings, addressed by JSON pointer into the request body."""
        out: list[FieldIssue] = []
        if self.encoding not in ENCODINGS:
            out.append(FieldIssue("/encoding", "NOT_ALLOWED", f"must be one of {', '.join(ENCODINGS)}"))
        # A letter or digit would split the values themselves (a delimiter "1" splits phone numbers).
        if len(self.delimiter) != 1 or self.delimiter in _BAD_DELIMITERS or self.delimiter.isalnum():
            out.append(
                FieldIssue(
                    "/delimiter",
                    "INVALID_DELIMITER",
                    "must be one character, not a quote, a line break, a letter or a digit",
                )
            )
        if not self.field_mapping:
            out.append(FieldIssue("/fieldMapping", "TOO_FEW_FIELDS", "must map at least one column"))
        if len(self.field_mapping) > limits.max_columns:
            out.append(
                FieldIssue("/fieldMapping", "TOO_MANY_FIELDS", f"maps more than {limits.max_columns} columns")
            )
        if self.format is ImportFormat.TXT and len(self.field_mapping) != 1:
            out.append(
                FieldIssue("/fieldMapping", "TXT_SINGLE_COLUMN", "a TXT import has exactly one column")
            )
        seen: dict[str, str] = {}
        for column, field_name in self.field_mapping.items():
            where = _pointer("fieldMapping", column)
            if not self.has_header and not _is_position(column):
                out.append(
                    FieldIssue(where, "NOT_A_POSITION", "without a header, columns are 1-based positions")
                )
            elif not self.has_header and self.format is ImportFormat.TXT and column != "1":
                out.append(FieldIssue(where, "NOT_A_POSITION", "a TXT file without header has only column 1"))
            if not field_name:
                out.append(FieldIssue(where, "TOO_SHORT", "the recipient field name must not be empty"))
            elif not FIELD_NAME.fullmatch(field_name):
                out.append(
                    FieldIssue(
                        where,
                        "INVALID_FIELD_NAME",
                        "a recipient field name is what templates use ({{name}}): a letter or _, then "
                        "letters, digits, _ or -, at most 128 characters",
                    )
                )
            elif field_name in seen:
                out.append(
                    FieldIssue(
                        where,
                        "DUPLICATE_FIELD",
                        f"field {field_name!r} is already mapped from another column",
                    )
                )
            seen[field_name] = column
        if self.item_id_field is not None and self.item_id_field not in seen:
            out.append(
                FieldIssue("/itemIdField", "UNKNOWN_FIELD", "must be one of the mapped recipient fields")
            )
        for index, key in enumerate(self.dedupe_keys):
            if key not in seen:
                out.append(
                    FieldIssue(
                        f"/dedupeKeys/{index}", "UNKNOWN_FIELD", "must be one of the mapped recipient fields"
                    )
                )
        if len(set(self.dedupe_keys)) != len(self.dedupe_keys):
            out.append(FieldIssue("/dedupeKeys", "DUPLICATE_ITEMS", "must not repeat a field"))
        if self.item_id_field is not None and self.dedupe_keys and self.dedupe_keys != (self.item_id_field,):
            # Recipients are unique by item id within a snapshot, so the item id *is* the duplicate key.
            out.append(
                FieldIssue(
                    "/dedupeKeys",
                    "CONFLICTS_WITH_ITEM_ID",
                    "with itemIdField set, duplicates are rows with the same item id: omit dedupeKeys or "
                    "set it to [itemIdField]",
                )
            )
        return out

    def validate(self, limits: ImportLimits) -> ImportSettings:
        problems = self.issues(limits)
        if problems:
            raise ValidationFailed("The import settings are inconsistent.", problems)
        return self

    def to_options(self) -> JsonObject:
        options: JsonObject = {
            "hasHeader": self.has_header,
            "delimiter": self.delimiter,
            "encoding": self.encoding,
            "fieldMapping": dict(self.field_mapping),
            "dedupeKeys": list(self.dedupe_keys),
            "trimWhitespace": self.trim_whitespace,
        }
        if self.item_id_field is not None:
            options["itemIdField"] = self.item_id_field
        return options

    @classmethod
    def from_options(cls, format: ImportFormat, options: Mapping[str, Any]) -> ImportSettings:
        return cls(
            format=format,
            field_mapping=dict(options["fieldMapping"]),
            has_header=bool(options["hasHeader"]),
            delimiter=str(options["delimiter"]),
            encoding=str(options["encoding"]),
            item_id_field=options.get("itemIdField"),
            dedupe_keys=tuple(options.get("dedupeKeys", ())),
            # Imports stored before the setting existed kept their values as they were.
            trim_whitespace=bool(options.get("trimWhitespace", False)),
        )


def _is_position(column: str) -> bool:
    return column.isascii() and column.isdigit() and not column.startswith("0")


def source_columns(options: Mapping[str, Any]) -> Sequence[str]:
    """The file's columns as recorded by the upload (empty before the upload)."""
    found = options.get(SOURCE_COLUMNS_KEY, [])
    return [str(c) for c in found] if isinstance(found, list) else []
