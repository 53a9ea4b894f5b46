"""Typed Feishu / Lark bot configuration."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from wepush.agent.providers.common import parse_url
from wepush.agent.providers.spi import ConfigDocument, SecretRef, ValidationIssue
from wepush.agent.providers.standard._vendor import (
    ConfigError,
    JsonTemplate,
    Template,
    http_timeouts,
    issue,
    load_object,
    required_secret,
    secret_ref,
)

__all__ = ["REGION_HOSTS", "FeishuAccount", "FeishuMessage", "hook_id_of", "parse_account", "parse_message"]

#: The official open-platform hosts; nothing else is ever contacted in production.
REGION_HOSTS: Mapping[str, str] = {"feishu": "open.feishu.cn", "lark": "open.larksuite.com"}
HOOK_PATH = "/open-apis/bot/v2/hook/"
_HOOK_ID = re.compile(r"[A-Za-z0-9-]{8,128}")


@dataclass(frozen=True, slots=True)
class FeishuAccount:
    region: str
    webhook: SecretRef
    signing_secret: SecretRef | None
    connect_timeout: timedelta
    request_timeout: timedelta

    @property
    def host(self) -> str:
        return REGION_HOSTS[self.region]

    def secret_refs(self) -> Mapping[str, SecretRef | None]:
        return {"webhook": self.webhook, "signingSecret": self.signing_secret}


@dataclass(frozen=True, slots=True)
class FeishuMessage:
    msg_type: str
    text: Template | None
    structured: JsonTemplate | None


def parse_account(document: ConfigDocument, schema: Mapping[str, Any]) -> FeishuAccount:
    raw = load_object(document, schema)
    issues: list[ValidationIssue] = []
    connect, request = http_timeouts(raw, issues)
    webhook = required_secret(raw, "webhook", issues)
    if issues or webhook is None:
        raise ConfigError(issues)
    return FeishuAccount(
        region=str(raw.get("region", "feishu")),
        webhook=webhook,
        signing_secret=secret_ref(raw.get("signingSecret")),
        connect_timeout=connect,
        request_timeout=request,
    )


def parse_message(document: ConfigDocument, schema: Mapping[str, Any]) -> FeishuMessage:
    raw = load_object(document, schema)
    issues: list[ValidationIssue] = []
    msg_type = str(raw["msgType"])
    text = Template.checked(raw["text"], "/text", issues) if msg_type == "text" else None
    structured = None
    if msg_type == "post":
        structured = JsonTemplate.checked(raw["post"], "/post", issues)
    elif msg_type == "interactive":
        structured = JsonTemplate.checked(raw["card"], "/card", issues)
    if issues:
        raise ConfigError(issues)
    return FeishuMessage(msg_type, text, structured)


def hook_id_of(webhook: str, host: str) -> str:
    """The hook id from a full webhook URL on ``host`` or a bare id; the value is never echoed."""
    if "://" not in webhook:
        if _HOOK_ID.fullmatch(webhook):
            return webhook
        raise ConfigError([issue("/webhook", "WEBHOOK_INVALID", "is neither a webhook URL nor a hook id")])
    try:
        url = parse_url(webhook)
    except ValueError:
        raise ConfigError([issue("/webhook", "WEBHOOK_INVALID", "is not a valid URL")]) from None
    if url.scheme != "https" or url.host != host or url.port != 443:
        raise ConfigError(
            [
                issue(
                    "/webhook",
                    "WEBHOOK_HOST_NOT_OFFICIAL",
                    f"must be an https URL on the official host {host}",
                )
            ]
        )
    hook = url.path.removeprefix(HOOK_PATH)
    if not url.path.startswith(HOOK_PATH) or not _HOOK_ID.fullmatch(hook) or url.query_string:
        raise ConfigError([issue("/webhook", "WEBHOOK_INVALID", f"must have the path {HOOK_PATH}<hook id>")])
    return hook
