"""Confirmation tokens: proof that a person saw the impact of a send before starting it.

A token is ``base64url(payload) "." base64url(HMAC-SHA-256(confirmation key, payload))``. The payload binds

* ``p`` the purpose (``run`` for a job start, ``resend`` for a resend),
* ``w`` the workspace and ``s`` the subject (the job, or the source run),
* ``b`` a digest of everything the person confirmed: account version and secret versions, message revision,
  audience snapshot, provider version and the effective policies (or, for a resend, the outcomes and the
  matching item count),
* ``e`` the expiry (epoch seconds),
* ``n`` a random nonce, so that no two confirmations are the same token,
* ``d`` present (1) when a dry run was confirmed, only so that a refusal can say so (the digest binds it).

The server recomputes the digest from the current resources when the start arrives, so any edit in between
(or an expiry) refuses the start with CONFIRMATION_INVALID. A token starts one run: the run keeps its
SHA-256, unique in the workspace, so a second start with another Idempotency-Key is refused too (the same
key replays the first answer instead). The key is a sealed server key shared by every
Service instance, so a token issued by one instance is honoured by another.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections.abc import Collection
from datetime import UTC, datetime, timedelta
from typing import Final

from wepush.server.application._b64 import b64decode_canonical, b64encode_unpadded
from wepush.server.application._run_errors import ConfirmationInvalid
from wepush.server.application.execution import RunSnapshot
from wepush.server.domain import ItemState, Job, content_hash

CONFIRMATION_TTL: Final = timedelta(minutes=5)
RUN_PURPOSE: Final = "run"
RESEND_PURPOSE: Final = "resend"
#: Why a token no longer fits, by what it confirmed.
_CHANGED: Final = {
    RUN_PURPOSE: (
        "the start asks for other policyOverrides than were confirmed, or the job, its account, message,"
        " audience or policies changed since"
    ),
    RESEND_PURPOSE: "the outcomes asked for differ from the confirmed ones, or the run's items in them changed",
}
_DRY_RUN_CONFIRMED: Final = "it confirmed a dry run, not a real send"
_DOMAIN: Final = b"wepush/confirmation/v1."
_MIN_KEY_BYTES: Final = 32
_MAX_TOKEN_CHARS: Final = 1024


def confirmation_digest(token: str) -> str:
    """What a run keeps of the token that started it (SHA-256, hex): enough to refuse the token twice."""
    return hashlib.sha256(token.encode("ascii", errors="replace")).hexdigest()


def run_binding(job: Job, snapshot: RunSnapshot) -> str:
    """What a run confirmation promises: the job's inputs as the snapshot would freeze them now."""
    return content_hash(
        {
            "job": [job.id, job.version],
            "provider": [snapshot.provider.id, snapshot.provider.version],
            "account": [snapshot.account.id, snapshot.account.version],
            "secrets": dict(snapshot.account.secret_versions),
            "message": [snapshot.message.id, snapshot.message.revision],
            "audience": [snapshot.audience.snapshot_id, snapshot.audience.recipient_count],
            "policies": snapshot.policies,
            # What was confirmed was a dry run or a real send; one cannot stand for the other.
            "dryRun": snapshot.dry_run,
        }
    )


def resend_binding(source_run_id: str, outcomes: Collection[ItemState], matching: int) -> str:
    return content_hash(
        {"source": source_run_id, "outcomes": sorted(s.value for s in outcomes), "matching": matching}
    )


class ConfirmationSigner:
    __slots__ = ("_key",)

    def __init__(self, key: bytes) -> None:
        if len(key) < _MIN_KEY_BYTES:
            raise ValueError(f"the confirmation key must be at least {_MIN_KEY_BYTES} bytes")
        self._key = bytes(key)

    def __repr__(self) -> str:
        return "ConfirmationSigner(key=***)"

    def _tag(self, payload_text: str) -> bytes:
        return hmac.new(self._key, _DOMAIN + payload_text.encode("ascii"), hashlib.sha256).digest()

    def issue(
        self,
        *,
        purpose: str,
        workspace_id: str,
        subject_id: str,
        binding: str,
        expires_at: datetime,
        dry_run: bool = False,
    ) -> str:
        payload: dict[str, object] = {
            "v": 1,
            "p": purpose,
            "w": workspace_id,
            "s": subject_id,
            "b": binding,
            "e": int(expires_at.timestamp()),
            # Every confirmation is its own token (one token starts one run), even two in one second.
            "n": b64encode_unpadded(secrets.token_bytes(12)),
        }
        if dry_run:
            payload["d"] = 1
        text = b64encode_unpadded(json.dumps(payload, separators=(",", ":"), sort_keys=True).encode("utf-8"))
        return f"{text}.{b64encode_unpadded(self._tag(text))}"

    def verify(
        self, token: str, *, purpose: str, workspace_id: str, subject_id: str, binding: str, now: datetime
    ) -> None:
        """Accept ``token`` for this start or raise :class:`ConfirmationInvalid` naming why."""
        if not token or len(token) > _MAX_TOKEN_CHARS or not token.isascii():
            raise ConfirmationInvalid("malformed")
        payload_text, sep, tag_text = token.partition(".")
        try:
            tag = b64decode_canonical(tag_text)
        except ValueError:
            raise ConfirmationInvalid("malformed") from None
        # The tag is checked before the payload is parsed: unauthenticated input is never interpreted.
        if not sep or not hmac.compare_digest(tag, self._tag(payload_text)):
            raise ConfirmationInvalid("not issued by this Service")
        try:
            payload = json.loads(b64decode_canonical(payload_text))
        except ValueError:
            raise ConfirmationInvalid("malformed") from None
        if not isinstance(payload, dict) or payload.get("v") != 1 or not isinstance(payload.get("e"), int):
            raise ConfirmationInvalid("malformed")
        if (payload.get("p"), payload.get("w"), payload.get("s")) != (purpose, workspace_id, subject_id):
            raise ConfirmationInvalid("issued for another job or run")
        if now >= datetime.fromtimestamp(payload["e"], UTC):
            raise ConfirmationInvalid("expired")
        if not hmac.compare_digest(str(payload.get("b")), binding):
            if payload.get("d") == 1:
                raise ConfirmationInvalid(_DRY_RUN_CONFIRMED)
            raise ConfirmationInvalid(_CHANGED.get(purpose, "what it confirmed changed"))
