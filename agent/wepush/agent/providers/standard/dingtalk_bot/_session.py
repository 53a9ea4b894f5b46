"""The DingTalk custom robot session: one ``/robot/send`` call per Recipient.

With a signing secret the URL carries ``timestamp`` (milliseconds) and
``sign = urlencode(base64(HMAC-SHA256(key = secret, message = f"{timestamp}\\n{secret}")))``,
the vendor's rule (the reverse of Feishu's key/message order).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from typing import Any, ClassVar
from urllib.parse import quote, urlencode

from yarl import URL

from wepush.agent.engine import ExecutionClock
from wepush.agent.providers.spi import ProviderSendRequest
from wepush.agent.providers.standard._vendor import (
    MASK,
    Credentials,
    OutboundRequest,
    Rendered,
    RenderProblem,
    Template,
    VendorHttp,
    VendorReply,
    VendorSession,
    WebhookSecret,
    errcode_reply,
    recipient_fields,
    render_list,
)

from ._config import DingTalkMessage
from ._errors import DINGTALK_TABLE

__all__ = ["OFFICIAL_HOST", "DingTalkBotSession", "access_token_of", "dingtalk_sign", "security_cause"]

OFFICIAL_HOST = "oapi.dingtalk.com"
SEND_PATH = "/robot/send"
_TOKEN = re.compile(r"[A-Za-z0-9]{16,128}")
_MOBILE = re.compile(r"\+?[0-9][0-9-]{4,19}")
# "ip" as a word (English messages) or the Chinese allow-list wording; "description" must not match.
_IP = re.compile(r"(?i)(?<![a-z])ip(?![a-z])|白名单|whitelist")
_SIGN = re.compile(r"(?i)sign|timestamp|签名|时间戳")
_KEYWORD = re.compile(r"(?i)keyword|关键词|关键字")


def dingtalk_sign(timestamp_ms: str, secret: str) -> str:
    """The base64 signature (URL-encoding happens when the query is built)."""
    message = f"{timestamp_ms}\n{secret}".encode()
    return base64.b64encode(hmac.new(secret.encode(), message, hashlib.sha256).digest()).decode("ascii")


def security_cause(message: str) -> str | None:
    """Which 310000 security check failed, from the vendor's message."""
    if _SIGN.search(message):
        return "sign"
    if _IP.search(message):
        return "ip"
    if _KEYWORD.search(message):
        return "keyword"
    return None


_WEBHOOK = WebhookSecret(
    field="accessToken",
    pattern=_TOKEN,
    host=OFFICIAL_HOST,
    path=SEND_PATH,
    query="access_token",
    invalid_code="TOKEN_INVALID",
    noun="an access token",
)


def access_token_of(value: str) -> str:
    """The token from a bare token or a full webhook URL on the official host; never echoed."""
    return _WEBHOOK.of(value)


def _at_mobiles(templates: tuple[Template, ...], fields: dict[str, object]) -> list[str]:
    values = render_list(templates, fields)
    bad = [v for v in values if not _MOBILE.fullmatch(v)]
    if bad:
        raise RenderProblem("RECIPIENT_VALUE_INVALID", f"{len(bad)} @mobile value(s) are not phone numbers")
    return values


class DingTalkBotSession(VendorSession):
    vendor: ClassVar[str] = "DingTalk"

    def __init__(
        self,
        *,
        base: URL,
        access_token: str,
        message: DingTalkMessage,
        http: VendorHttp | None,
        credentials: Credentials,
        clock: ExecutionClock,
    ) -> None:
        super().__init__(table=DINGTALK_TABLE, http=http, credentials=credentials, clock=clock)
        self._base = base
        self._token = access_token
        self._message = message
        credentials.remember(access_token)

    def render(self, request: ProviderSendRequest) -> Rendered:
        fields = recipient_fields(request.recipient)
        m = self._message
        payload: dict[str, Any] = {"msgtype": m.msg_type}
        if m.msg_type == "text" and m.content is not None:
            payload["text"] = {"content": m.content.render(fields)}
        elif m.msg_type == "markdown" and m.title is not None and m.text is not None:
            payload["markdown"] = {"title": m.title.render(fields), "text": m.text.render(fields)}
        elif m.title is not None and m.text is not None:
            card: dict[str, Any] = {
                "title": m.title.render(fields),
                "text": m.text.render(fields),
                "btnOrientation": m.btn_orientation,
            }
            if m.single_title is not None and m.single_url is not None:
                card["singleTitle"] = m.single_title.render(fields)
                card["singleURL"] = m.single_url.render(fields)
            else:
                card["btns"] = [
                    {"title": t.render(fields), "actionURL": u.render(fields)} for t, u in m.buttons
                ]
            payload["actionCard"] = card
        if m.msg_type != "actionCard":
            payload["at"] = {
                "atMobiles": _at_mobiles(m.at_mobiles, fields),
                "atUserIds": render_list(m.at_user_ids, fields),
                "isAtAll": m.at_all,
            }
        return Rendered(payload, f"{m.msg_type} message")

    def outbound(
        self,
        rendered: Rendered,
        request: ProviderSendRequest,
        *,
        reveal: bool,
        access_token: str | None = None,
    ) -> OutboundRequest:
        query: list[tuple[str, str]] = [("access_token", self._token if reveal else MASK)]
        secret = self._credentials.optional("signingSecret")
        if secret is not None:
            timestamp = str(int(self._clock.now().timestamp() * 1000))
            query += [
                ("timestamp", timestamp),
                ("sign", dingtalk_sign(timestamp, secret) if reveal else MASK),
            ]
        # Encoded once here, exactly as the vendor's rule says; yarl must not re-encode it.
        encoded = urlencode(query, quote_via=quote, safe="")
        url = URL(str(self._base.with_path(SEND_PATH)) + "?" + encoded, encoded=True)
        return OutboundRequest.post_json(url, rendered.payload)

    def read_reply(self, document: dict[str, Any]) -> VendorReply | None:
        reply = errcode_reply(document)
        if reply is None or reply.code != "310000":
            return reply
        cause = security_cause(reply.message)
        return VendorReply(reply.code, False, reply.message, None, f"310000:{cause}" if cause else None)
