"""Typed WeCom application configuration."""

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
    load_object,
    required_secret,
)

__all__ = ["WeComAppAccount", "WeComAppMessage", "parse_account", "parse_message"]


@dataclass(frozen=True, slots=True)
class WeComAppAccount:
    corp_id: str
    corp_secret: SecretRef
    agent_id: int
    connect_timeout: timedelta
    request_timeout: timedelta

    def secret_refs(self) -> Mapping[str, SecretRef | None]:
        return {"corpSecret": self.corp_secret}


@dataclass(frozen=True, slots=True)
class WeComAppMessage:
    msg_type: str
    content: Template | None
    textcard: JsonTemplate | None
    safe: bool
    duplicate_check: bool
    duplicate_check_interval: int
    user_field: str
    party_field: str
    tag_field: str


def parse_account(document: ConfigDocument, schema: Mapping[str, Any]) -> WeComAppAccount:
    raw = load_object(document, schema)
    issues: list[ValidationIssue] = []
    connect, request = http_timeouts(raw, issues)
    secret = required_secret(raw, "corpSecret", issues)
    if issues or secret is None:
        raise ConfigError(issues)
    return WeComAppAccount(str(raw["corpId"]), secret, int(raw["agentId"]), connect, request)


def parse_message(document: ConfigDocument, schema: Mapping[str, Any]) -> WeComAppMessage:
    raw = load_object(document, schema)
    issues: list[ValidationIssue] = []
    message = WeComAppMessage(
        msg_type=str(raw["msgType"]),
        content=Template.checked(raw["content"], "/content", issues) if "content" in raw else None,
        textcard=JsonTemplate.checked(raw["textcard"], "/textcard", issues) if "textcard" in raw else None,
        safe=bool(raw.get("safe", False)),
        duplicate_check=bool(raw.get("enableDuplicateCheck", False)),
        duplicate_check_interval=int(raw.get("duplicateCheckInterval", 1800)),
        user_field=str(raw.get("toUserField", "touser")),
        party_field=str(raw.get("toPartyField", "toparty")),
        tag_field=str(raw.get("toTagField", "totag")),
    )
    if issues:
        raise ConfigError(issues)
    return message
