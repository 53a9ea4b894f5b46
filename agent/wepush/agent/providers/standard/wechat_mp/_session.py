"""WeChat Official Account template messages: ``/cgi-bin/message/template/send`` per openid.

``client_msg_id`` is derived from the item's idempotency key, so every attempt
of one item carries the same id and the vendor delivers it at most once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from wepush.agent.providers.spi import ConfigDocument, ProviderSendRequest, ValidationIssue
from wepush.agent.providers.standard._vendor import (
    ConfigError,
    ErrorTable,
    Rendered,
    Template,
    TemplateData,
    WechatFactory,
    WechatSession,
    load_object,
    openid_of,
    recipient_fields,
)

from ._errors import WECHAT_MP_TABLE

__all__ = ["SEND_PATH", "WechatMpMessage", "WechatMpTemplateProviderFactory", "WechatMpTemplateSession"]

SEND_PATH = "/cgi-bin/message/template/send"


@dataclass(frozen=True, slots=True)
class WechatMpMessage:
    template_id: str
    url: Template | None
    miniprogram_app_id: str | None
    miniprogram_page: Template | None
    data: TemplateData
    openid_field: str


def parse_message(document: ConfigDocument, schema: Mapping[str, Any]) -> WechatMpMessage:
    raw = load_object(document, schema)
    issues: list[ValidationIssue] = []
    mini = raw.get("miniprogram") or {}
    message = WechatMpMessage(
        template_id=str(raw["templateId"]),
        url=Template.checked(raw["url"], "/url", issues) if "url" in raw else None,
        miniprogram_app_id=None if not mini else str(mini["appId"]),
        miniprogram_page=Template.checked(mini["pagePath"], "/miniprogram/pagePath", issues)
        if "pagePath" in mini
        else None,
        data=TemplateData.checked(raw["data"], issues),
        openid_field=str(raw.get("openidField", "openid")),
    )
    if issues:
        raise ConfigError(issues)
    return message


def client_msg_id(idempotency_key: str) -> str:
    return hashlib.sha256(idempotency_key.encode("utf-8")).hexdigest()[:32]


class WechatMpTemplateSession(WechatSession[WechatMpMessage]):
    def render(self, request: ProviderSendRequest) -> Rendered:
        fields = recipient_fields(request.recipient)
        m = self._message
        payload: dict[str, Any] = {"touser": openid_of(fields, m.openid_field), "template_id": m.template_id}
        if m.url is not None:
            payload["url"] = m.url.render(fields)
        if m.miniprogram_app_id is not None:
            mini = {"appid": m.miniprogram_app_id}
            if m.miniprogram_page is not None:
                mini["pagepath"] = m.miniprogram_page.render(fields)
            payload["miniprogram"] = mini
        payload["data"] = m.data.render(fields)
        payload["client_msg_id"] = client_msg_id(request.idempotency_key)
        return Rendered(payload, "template message")


class WechatMpTemplateProviderFactory(WechatFactory[WechatMpMessage]):
    """WeChat Official Account (公众号) template messages on api.weixin.qq.com."""

    package: ClassVar[str] = __name__.rpartition(".")[0]
    table: ClassVar[ErrorTable] = WECHAT_MP_TABLE
    send_path: ClassVar[str] = SEND_PATH
    session_type: ClassVar[type[WechatSession[Any]]] = WechatMpTemplateSession

    def parse_message(self, document: ConfigDocument) -> WechatMpMessage:
        return parse_message(document, self.descriptor().schemas.message)
