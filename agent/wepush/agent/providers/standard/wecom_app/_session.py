"""WeCom application messages: ``/cgi-bin/message/send?access_token=…`` per Recipient item.

The token comes from ``/cgi-bin/gettoken`` with the corp id and application
secret, is cached for the session and refreshed once on 40014 / 42001 / 41001.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

from yarl import URL

from wepush.agent.engine import ExecutionClock
from wepush.agent.providers.spi import ProviderResult, ProviderSendRequest
from wepush.agent.providers.standard._vendor import (
    AccessTokenCache,
    Credentials,
    Rendered,
    RenderProblem,
    TokenVendorSession,
    VendorHttp,
    VendorResponse,
    recipient_fields,
)

from ._config import WeComAppMessage
from ._errors import WECOM_APP_TABLE, WECOM_TOKEN_CODES

__all__ = ["SEND_PATH", "TOKEN_PATH", "WeComAppSession", "targets_of"]

SEND_PATH = "/cgi-bin/message/send"
TOKEN_PATH = "/cgi-bin/gettoken"  # noqa: S105 - an API path, not a credential
_USER = re.compile(r"@all|[A-Za-z0-9_.@-]{1,64}")
_NUMERIC = re.compile(r"[0-9]{1,10}")
_TARGET_LIMIT = 1000


def _ids(fields: Mapping[str, object], field: str, pattern: re.Pattern[str], what: str) -> str:
    value = fields.get(field)
    if value is None or value == "":
        return ""
    parts = [p.strip() for p in str(value).split("|") if p.strip()]
    if len(parts) > _TARGET_LIMIT:
        raise RenderProblem(
            "RECIPIENT_VALUE_INVALID", f"field {field!r} names more than {_TARGET_LIMIT} {what}"
        )
    if any(not pattern.fullmatch(p) for p in parts):
        raise RenderProblem("RECIPIENT_VALUE_INVALID", f"field {field!r} holds an invalid {what} id")
    return "|".join(parts)


def targets_of(fields: Mapping[str, object], message: WeComAppMessage) -> dict[str, str]:
    """``touser`` / ``toparty`` / ``totag`` for one item; at least one is required."""
    targets = {
        "touser": _ids(fields, message.user_field, _USER, "user"),
        "toparty": _ids(fields, message.party_field, _NUMERIC, "party"),
        "totag": _ids(fields, message.tag_field, _NUMERIC, "tag"),
    }
    if not any(targets.values()):
        names = ", ".join(repr(f) for f in (message.user_field, message.party_field, message.tag_field))
        raise RenderProblem(
            "RECIPIENT_FIELD_MISSING", f"recipient names no user, party or tag (fields {names})"
        )
    return {k: v for k, v in targets.items() if v}


class WeComAppSession(TokenVendorSession):
    vendor: ClassVar[str] = "WeCom"

    def __init__(
        self,
        *,
        send_url: URL,
        agent_id: int,
        message: WeComAppMessage,
        tokens: AccessTokenCache,
        http: VendorHttp | None,
        credentials: Credentials,
        clock: ExecutionClock,
    ) -> None:
        super().__init__(
            send_url=send_url,
            tokens=tokens,
            token_codes=WECOM_TOKEN_CODES,
            table=WECOM_APP_TABLE,
            http=http,
            credentials=credentials,
            clock=clock,
        )
        self._agent_id = agent_id
        self._message = message

    def render(self, request: ProviderSendRequest) -> Rendered:
        fields = recipient_fields(request.recipient)
        m = self._message
        payload: dict[str, Any] = {**targets_of(fields, m), "msgtype": m.msg_type, "agentid": self._agent_id}
        if m.msg_type in {"text", "markdown"} and m.content is not None:
            payload[m.msg_type] = {"content": m.content.render(fields)}
        elif m.textcard is not None:
            payload["textcard"] = m.textcard.render(fields)
        payload["safe"] = 1 if m.safe else 0
        payload["enable_duplicate_check"] = 1 if m.duplicate_check else 0
        payload["duplicate_check_interval"] = m.duplicate_check_interval
        return Rendered(payload, f"{m.msg_type} message")

    def judge(self, response: VendorResponse) -> ProviderResult:
        result = super().judge(response)
        document = response.json_object()
        if not result.success or document is None:
            return result
        # Some targets may be refused while the rest receive the message.
        refused = {
            name: len([p for p in str(document.get(f"invalid{name}") or "").split("|") if p])
            for name in ("user", "party", "tag")
        }
        if not any(refused.values()):
            return result
        detail = ", ".join(f"{count} {name}(s)" for name, count in refused.items() if count)
        return ProviderResult.ok(
            "OK_PARTIAL",
            external_request_id=result.external_request_id,
            diagnostic=f"delivered, but WeCom refused {detail}",
        )
