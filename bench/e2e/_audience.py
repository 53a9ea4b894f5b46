"""The one audience and message both contenders send: the same recipients, request, success rule and
concurrency, whether they go through the Service or through the embedded SDK."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from wepush.agent.engine import RecipientRecord

SECRET = "bench-e2e-bearer-secret-5d1c"  # a made-up bearer for the loopback vendor mock
PROVIDER_ID = "wepush.http"
FIELDS = ("mobile", "name")

MESSAGE_CONTENT: dict[str, Any] = {
    "method": "POST",
    "path": "/notify",
    "headers": {"Content-Type": "application/json"},
    "bodyTemplate": '{"to":"{{mobile}}","text":"hello {{name}}"}',
    "successCondition": {"status": [200], "jsonPath": "$.success", "equals": True},
}


def account_config(vendor_url: str) -> dict[str, Any]:
    return {"baseUrl": vendor_url, "auth": {"type": "BEARER", "token": {"$secret": "token"}}}


def _row(n: int) -> tuple[str, str]:
    return f"138{n:08d}", f"user {n}"


def write_csv(path: Path, count: int) -> Path:
    """The audience file a user uploads: a header and one row per recipient."""
    with path.open("w", encoding="utf-8", newline="") as out:
        out.write(",".join(FIELDS) + "\n")
        for n in range(1, count + 1):
            out.write(",".join(_row(n)) + "\n")
    return path


def recipients(count: int) -> Iterator[RecipientRecord]:
    """The same recipients as the file, for the embedded SDK (streamed, never materialised)."""
    for n in range(1, count + 1):
        mobile, name = _row(n)
        yield RecipientRecord.of(f"item-{n}", n, {"mobile": mobile, "name": name})
