"""The Feishu / Lark custom bot session: one webhook call per Recipient.

With a signing secret, the body carries ``timestamp`` (seconds) and
``sign = base64(HMAC-SHA256(key = f"{timestamp}\\n{secret}", message = b""))``,
the vendor's rule (note the key/message order differs from DingTalk's).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Any, ClassVar

from yarl import URL

from wepush.agent.engine import ExecutionClock
from wepush.agent.providers.spi import ProviderSendRequest
from wepush.agent.providers.standard._vendor import (
    MASK,
    Credentials,
    OutboundRequest,
    Rendered,
    VendorHttp,
    VendorReply,
    VendorSession,
    recipient_fields,
)

from ._config import HOOK_PATH, FeishuMessage
from ._errors import FEISHU_TABLE

__all__ = ["FeishuBotSession", "feishu_sign"]


def feishu_sign(timestamp: str, secret: str) -> str:
    key = f"{timestamp}\n{secret}".encode()
    return base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode("ascii")


class FeishuBotSession(VendorSession):
    vendor: ClassVar[str] = "Feishu"

    def __init__(
        self,
        *,
        base: URL,
        hook_id: str,
        message: FeishuMessage,
        http: VendorHttp | None,
        credentials: Credentials,
        clock: ExecutionClock,
    ) -> None:
        super().__init__(table=FEISHU_TABLE, http=http, credentials=credentials, clock=clock)
        self._base = base
        self._hook_id = hook_id
        self._message = message
        credentials.remember(hook_id)

    def render(self, request: ProviderSendRequest) -> Rendered:
        fields = recipient_fields(request.recipient)
        message = self._message
        payload: dict[str, Any]
        if message.text is not None:
            payload = {"msg_type": "text", "content": {"text": message.text.render(fields)}}
        elif message.msg_type == "post" and message.structured is not None:
            payload = {"msg_type": "post", "content": {"post": message.structured.render(fields)}}
        elif message.structured is not None:
            payload = {"msg_type": "interactive", "card": message.structured.render(fields)}
        else:
            raise ValueError(f"message type {message.msg_type} has no content")
        return Rendered(payload, f"{message.msg_type} message")

    def outbound(
        self,
        rendered: Rendered,
        request: ProviderSendRequest,
        *,
        reveal: bool,
        access_token: str | None = None,
    ) -> OutboundRequest:
        body: dict[str, Any] = {}
        secret = self._credentials.optional("signingSecret")
        if secret is not None:
            timestamp = str(int(self._clock.now().timestamp()))
            body["timestamp"] = timestamp
            body["sign"] = feishu_sign(timestamp, secret) if reveal else MASK
        body.update(rendered.payload)
        hook = self._hook_id if reveal else MASK
        return OutboundRequest.post_json(self._base.with_path(HOOK_PATH + hook), body)

    def read_reply(self, document: dict[str, Any]) -> VendorReply | None:
        code = document.get("code", document.get("StatusCode"))
        if isinstance(code, bool) or not isinstance(code, int):
            return None
        message = document.get("msg", document.get("StatusMessage", ""))
        return VendorReply(str(code), code == 0, str(message))
