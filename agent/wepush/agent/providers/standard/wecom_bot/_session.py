"""The WeCom group robot session: one ``/cgi-bin/webhook/send?key=…`` call per Recipient."""

from __future__ import annotations

import re
from typing import Any, ClassVar
from urllib.parse import quote

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
    WebhookSecret,
    errcode_reply,
    recipient_fields,
    render_list,
)

from ._config import WeComBotMessage
from ._errors import WECOM_BOT_TABLE

__all__ = ["OFFICIAL_HOST", "WeComBotSession", "webhook_key_of"]

OFFICIAL_HOST = "qyapi.weixin.qq.com"
SEND_PATH = "/cgi-bin/webhook/send"
_KEY = re.compile(r"[A-Za-z0-9-]{8,128}")

_WEBHOOK = WebhookSecret(
    field="webhookKey",
    pattern=_KEY,
    host=OFFICIAL_HOST,
    path=SEND_PATH,
    query="key",
    invalid_code="KEY_INVALID",
    noun="a webhook key",
)


def webhook_key_of(value: str) -> str:
    """The key from a bare key or a full webhook URL on the official host; never echoed."""
    return _WEBHOOK.of(value)


class WeComBotSession(VendorSession):
    vendor: ClassVar[str] = "WeCom"

    def __init__(
        self,
        *,
        base: URL,
        key: str,
        message: WeComBotMessage,
        http: VendorHttp | None,
        credentials: Credentials,
        clock: ExecutionClock,
    ) -> None:
        super().__init__(table=WECOM_BOT_TABLE, http=http, credentials=credentials, clock=clock)
        self._base = base
        self._key = key
        self._message = message
        credentials.remember(key)

    def render(self, request: ProviderSendRequest) -> Rendered:
        fields = recipient_fields(request.recipient)
        m = self._message
        payload: dict[str, Any] = {"msgtype": m.msg_type}
        if m.msg_type == "text" and m.content is not None:
            text: dict[str, Any] = {"content": m.content.render(fields)}
            mentioned = render_list(m.mentioned, fields)
            mobiles = render_list(m.mentioned_mobiles, fields)
            if mentioned:
                text["mentioned_list"] = mentioned
            if mobiles:
                text["mentioned_mobile_list"] = mobiles
            payload["text"] = text
        elif m.msg_type == "markdown" and m.content is not None:
            payload["markdown"] = {"content": m.content.render(fields)}
        elif m.articles is not None:
            payload["news"] = {"articles": m.articles.render(fields)}
        return Rendered(payload, f"{m.msg_type} message")

    def outbound(
        self,
        rendered: Rendered,
        request: ProviderSendRequest,
        *,
        reveal: bool,
        access_token: str | None = None,
    ) -> OutboundRequest:
        key = quote(self._key if reveal else MASK, safe="")
        url = URL(f"{self._base.with_path(SEND_PATH)}?key={key}", encoded=True)
        return OutboundRequest.post_json(url, rendered.payload)

    def read_reply(self, document: dict[str, Any]) -> VendorReply | None:
        return errcode_reply(document)
