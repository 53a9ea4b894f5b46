"""Typed DingTalk robot configuration."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from wepush.agent.providers.spi import ConfigDocument, SecretRef, ValidationIssue
from wepush.agent.providers.standard._vendor import (
    ConfigError,
    Template,
    http_timeouts,
    issue,
    load_object,
    required_secret,
    secret_ref,
    template_list,
)

__all__ = ["DingTalkAccount", "DingTalkMessage", "parse_account", "parse_message"]


@dataclass(frozen=True, slots=True)
class DingTalkAccount:
    access_token: SecretRef
    signing_secret: SecretRef | None
    connect_timeout: timedelta
    request_timeout: timedelta

    def secret_refs(self) -> Mapping[str, SecretRef | None]:
        return {"accessToken": self.access_token, "signingSecret": self.signing_secret}


@dataclass(frozen=True, slots=True)
class DingTalkMessage:
    msg_type: str
    content: Template | None
    title: Template | None
    text: Template | None
    single_title: Template | None
    single_url: Template | None
    buttons: tuple[tuple[Template, Template], ...]
    btn_orientation: str
    at_mobiles: tuple[Template, ...]
    at_user_ids: tuple[Template, ...]
    at_all: bool


def parse_account(document: ConfigDocument, schema: Mapping[str, Any]) -> DingTalkAccount:
    raw = load_object(document, schema)
    issues: list[ValidationIssue] = []
    connect, request = http_timeouts(raw, issues)
    token = required_secret(raw, "accessToken", issues)
    if issues or token is None:
        raise ConfigError(issues)
    return DingTalkAccount(token, secret_ref(raw.get("signingSecret")), connect, request)


def _optional(raw: Mapping[str, Any], key: str, issues: list[ValidationIssue]) -> Template | None:
    return Template.checked(raw[key], f"/{key}", issues) if key in raw else None


def parse_message(document: ConfigDocument, schema: Mapping[str, Any]) -> DingTalkMessage:
    raw = load_object(document, schema)
    issues: list[ValidationIssue] = []
    msg_type = str(raw["msgType"])
    buttons = tuple(
        (
            Template.checked(b["title"], f"/buttons/{i}/title", issues),
            Template.checked(b["actionUrl"], f"/buttons/{i}/actionUrl", issues),
        )
        for i, b in enumerate(raw.get("buttons", []))
    )
    if msg_type == "actionCard":
        single = "singleTitle" in raw and "singleUrl" in raw
        if single == bool(buttons):
            issues.append(
                issue(
                    "/buttons",
                    "ACTION_CARD_BUTTONS",
                    "give either singleTitle + singleUrl or buttons, not both",
                )
            )
    message = DingTalkMessage(
        msg_type=msg_type,
        content=_optional(raw, "content", issues),
        title=_optional(raw, "title", issues),
        text=_optional(raw, "text", issues),
        single_title=_optional(raw, "singleTitle", issues),
        single_url=_optional(raw, "singleUrl", issues),
        buttons=buttons,
        btn_orientation=str(raw.get("btnOrientation", "0")),
        at_mobiles=template_list(raw, "atMobiles", issues),
        at_user_ids=template_list(raw, "atUserIds", issues),
        at_all=bool(raw.get("atAll", False)),
    )
    if issues:
        raise ConfigError(issues)
    return message
