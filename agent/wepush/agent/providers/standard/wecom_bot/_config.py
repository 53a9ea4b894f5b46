"""Typed WeCom group robot configuration."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from wepush.agent.providers.spi import ConfigDocument, SecretRef, ValidationIssue
from wepush.agent.providers.standard._vendor import (
    ConfigError,
    JsonTemplate,
    Template,
    http_timeouts,
    issue,
    load_object,
    required_secret,
    template_list,
)

__all__ = ["WeComBotAccount", "WeComBotMessage", "parse_account", "parse_message"]


@dataclass(frozen=True, slots=True)
class WeComBotAccount:
    webhook_key: SecretRef
    connect_timeout: timedelta
    request_timeout: timedelta

    def secret_refs(self) -> Mapping[str, SecretRef | None]:
        return {"webhookKey": self.webhook_key}


@dataclass(frozen=True, slots=True)
class WeComBotMessage:
    msg_type: str
    content: Template | None
    mentioned: tuple[Template, ...]
    mentioned_mobiles: tuple[Template, ...]
    articles: JsonTemplate | None


def parse_account(document: ConfigDocument, schema: Mapping[str, Any]) -> WeComBotAccount:
    raw = load_object(document, schema)
    issues: list[ValidationIssue] = []
    connect, request = http_timeouts(raw, issues)
    key = required_secret(raw, "webhookKey", issues)
    if issues or key is None:
        raise ConfigError(issues)
    return WeComBotAccount(key, connect, request)


def parse_message(document: ConfigDocument, schema: Mapping[str, Any]) -> WeComBotMessage:
    raw = load_object(document, schema)
    issues: list[ValidationIssue] = []
    msg_type = str(raw["msgType"])
    message = WeComBotMessage(
        msg_type=msg_type,
        content=Template.checked(raw["content"], "/content", issues) if "content" in raw else None,
        mentioned=template_list(raw, "mentionedList", issues),
        mentioned_mobiles=template_list(raw, "mentionedMobileList", issues),
        articles=JsonTemplate.checked(raw["articles"], "/articles", issues) if "articles" in raw else None,
    )
    if msg_type != "text" and (message.mentioned or message.mentioned_mobiles):
        issues.append(
            issue("/mentionedList", "MENTIONS_TEXT_ONLY", "mentions are supported for text messages only")
        )
    if issues:
        raise ConfigError(issues)
    return message
