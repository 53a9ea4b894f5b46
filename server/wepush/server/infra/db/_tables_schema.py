"""The schema's own bookkeeping: which releases can run on it."""

from __future__ import annotations

from sqlalchemy import Column, String, Table

from ._metadata import metadata

# Not a business table (no workspace, no version): one row, rewritten by every migration run, that tells a
# release which newer schemas it may run on during a rolling upgrade (see ``_compatibility``).
schema_compatibility = Table(
    "schema_compatibility",
    metadata,
    Column("revision", String(64), primary_key=True),
    Column("compatible_from", String(64), nullable=False),
)
