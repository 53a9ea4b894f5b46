"""The WeCom group robot session: one ``/cgi-bin/webhook/send?key=…`` call per Recipient."""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar
from urllib.parse import quote

from yarl import URL

from wepush.agent.engine import ExecutionClock
from wepush.agent.providers.spi import ProviderSendRequest
from wepush.agent.providers.standard._vendor import (
    MASK,
    ConfigError,
    Credentials,
    OutboundRequest,
    Rendered,
    VendorHttp,
    VendorReply,
    VendorSession,
    errcode_reply,
    issue,
    recipient_fields,
)

from ._config import WeComBotMessage
from ._errors import WECOM_BOT_TABLE

__all__ = ["OFFICIAL_HOST", "WeComBotSession", "webhook_key_of"]

OFFICIAL_HOST = "qyapi.weixin.qq.com"
SEND_PATH = "/cgi-bin/webhook/send"
_KEY = re.compile(r"[A-Za-z0-9-]{8,128}")


def webhook_key_of(value: str) -> str:
    """The key from a bare key or a full webhook URL on the official host; never echoed."""
    if "://" not in value:
        if _KEY.fullmatch(value):
            return value
        raise ConfigError([issue("/webhookKey", "KEY_INVALID", "is neither a webhook key nor a webhook URL")])
    try:
        url = URL(value)
    except ValueError:
        raise ConfigError([issue("/webhookKey", "KEY_INVALID", "is not a valid URL")]) from None
    if url.scheme != "https" or url.host != OFFICIAL_HOST or url.port != 443 or url.path != SEND_PATH:
        raise ConfigError(
            [
                issue(
                    "/webhookKey",
                    "WEBHOOK_HOST_NOT_OFFICIAL",
                    f"must be https://{OFFICIAL_HOST}{SEND_PATH}?key=…",
                )
            ]
        )
    key = url.query.get("key", "")
    if not _KEY.fullmatch(key):
        raise ConfigError([issue("/webhookKey", "KEY_INVALID", "the URL has no valid key")])
    return key


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
            mentioned = [v for v in (t.render(fields).strip() for t in m.mentioned) if v]
            mobiles = [v for v in (t.render(fields).strip() for t in m.mentioned_mobiles) if v]
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
        return OutboundRequest(
            "POST",
            url,
            {"Content-Type": "application/json; charset=utf-8"},
            json.dumps(rendered.payload, ensure_ascii=False).encode("utf-8"),
        )

    def read_reply(self, document: dict[str, Any]) -> VendorReply | None:
        return errcode_reply(document)
