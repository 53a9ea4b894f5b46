"""WeChat Mini Program subscribe messages: ``/cgi-bin/message/subscribe/send`` per openid."""

from __future__ import annotations

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

from ._errors import WECHAT_MINIPROGRAM_TABLE

__all__ = [
    "SEND_PATH",
    "WechatMiniProgramMessage",
    "WechatMiniProgramSubscribeProviderFactory",
    "WechatMiniProgramSubscribeSession",
]

SEND_PATH = "/cgi-bin/message/subscribe/send"


@dataclass(frozen=True, slots=True)
class WechatMiniProgramMessage:
    template_id: str
    page: Template | None
    state: str
    lang: str
    data: TemplateData
    openid_field: str


def parse_message(document: ConfigDocument, schema: Mapping[str, Any]) -> WechatMiniProgramMessage:
    raw = load_object(document, schema)
    issues: list[ValidationIssue] = []
    message = WechatMiniProgramMessage(
        template_id=str(raw["templateId"]),
        page=Template.checked(raw["page"], "/page", issues) if "page" in raw else None,
        state=str(raw.get("miniprogramState", "formal")),
        lang=str(raw.get("lang", "zh_CN")),
        data=TemplateData.checked(raw["data"], issues),
        openid_field=str(raw.get("openidField", "openid")),
    )
    if any(color for _, _, color in message.data.entries):
        issues.append(issue_color())
    if issues:
        raise ConfigError(issues)
    return message


def issue_color() -> ValidationIssue:
    return ValidationIssue(
        "/data", "COLOR_NOT_SUPPORTED", "subscribe messages have no colour; give plain values"
    )


class WechatMiniProgramSubscribeSession(WechatSession[WechatMiniProgramMessage]):
    def render(self, request: ProviderSendRequest) -> Rendered:
        fields = recipient_fields(request.recipient)
        m = self._message
        payload: dict[str, Any] = {"touser": openid_of(fields, m.openid_field), "template_id": m.template_id}
        if m.page is not None:
            payload["page"] = m.page.render(fields)
        payload["miniprogram_state"] = m.state
        payload["lang"] = m.lang
        payload["data"] = m.data.render(fields)
        return Rendered(payload, "subscribe message")


class WechatMiniProgramSubscribeProviderFactory(WechatFactory[WechatMiniProgramMessage]):
    """WeChat Mini Program (小程序) subscribe messages on api.weixin.qq.com."""

    package: ClassVar[str] = __name__.rpartition(".")[0]
    table: ClassVar[ErrorTable] = WECHAT_MINIPROGRAM_TABLE
    send_path: ClassVar[str] = SEND_PATH
    session_type: ClassVar[type[WechatSession[Any]]] = WechatMiniProgramSubscribeSession

    def parse_message(self, document: ConfigDocument) -> WechatMiniProgramMessage:
        return parse_message(document, self.descriptor().schemas.message)
