"""Typed Aliyun SMS configuration and phone number checks."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from wepush.agent.providers.spi import ConfigDocument, SecretRef, ValidationIssue
from wepush.agent.providers.standard._vendor import (
    ConfigError,
    RenderProblem,
    Template,
    http_timeouts,
    load_object,
    required_secret,
)

__all__ = ["AliyunSmsAccount", "AliyunSmsMessage", "normalise_phone", "parse_account", "parse_message"]

_MAINLAND = re.compile(r"1[3-9][0-9]{9}")
_INTERNATIONAL = re.compile(r"[1-9][0-9]{6,19}")


@dataclass(frozen=True, slots=True)
class AliyunSmsAccount:
    access_key_id: SecretRef
    access_key_secret: SecretRef
    sign_name: str
    connect_timeout: timedelta
    request_timeout: timedelta

    def secret_refs(self) -> Mapping[str, SecretRef | None]:
        return {"accessKeyId": self.access_key_id, "accessKeySecret": self.access_key_secret}


@dataclass(frozen=True, slots=True)
class AliyunSmsMessage:
    template_code: str
    params: tuple[tuple[str, Template], ...]
    sign_name: str | None
    phone_field: str


def parse_account(document: ConfigDocument, schema: Mapping[str, Any]) -> AliyunSmsAccount:
    raw = load_object(document, schema)
    issues: list[ValidationIssue] = []
    connect, request = http_timeouts(raw, issues)
    key_id = required_secret(raw, "accessKeyId", issues)
    key_secret = required_secret(raw, "accessKeySecret", issues)
    if issues or key_id is None or key_secret is None:
        raise ConfigError(issues)
    return AliyunSmsAccount(key_id, key_secret, str(raw["signName"]), connect, request)


def parse_message(document: ConfigDocument, schema: Mapping[str, Any]) -> AliyunSmsMessage:
    raw = load_object(document, schema)
    issues: list[ValidationIssue] = []
    params = tuple(
        (str(k), Template.checked(str(v), f"/templateParams/{k}", issues))
        for k, v in raw.get("templateParams", {}).items()
    )
    message = AliyunSmsMessage(
        template_code=str(raw["templateCode"]),
        params=params,
        sign_name=None if raw.get("signName") is None else str(raw["signName"]),
        phone_field=str(raw.get("phoneField", "phone")),
    )
    if issues:
        raise ConfigError(issues)
    return message


def normalise_phone(fields: Mapping[str, object], field: str) -> str:
    """Mainland numbers as 11 digits, others as country code + number, as the vendor expects."""
    if field not in fields:
        raise RenderProblem("RECIPIENT_FIELD_MISSING", f"recipient has no field {field!r}")
    value = fields[field]
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise RenderProblem("RECIPIENT_VALUE_INVALID", f"field {field!r} is not a phone number")
    text = re.sub(r"[\s()-]", "", str(value))
    if text.startswith("+"):
        text = text[1:]
    elif text.startswith("00"):
        text = text[2:]
    # Country code 86 is mainland China (85x are others), and no mainland number starts with 8: whatever
    # follows 86 must be a mainland number. Only a 13-digit one was stripped before, so a 10- or 12-digit
    # "+86…" went out as an international number the vendor would bill and fail.
    mainland = text.startswith("86")
    if mainland:
        text = text[2:]
    # Eleven digits starting with 1 are a mainland number; country code 1 (NANP) also needs eleven.
    valid = _MAINLAND.fullmatch(text) if mainland or text.startswith("1") else _INTERNATIONAL.fullmatch(text)
    if not valid:
        raise RenderProblem("RECIPIENT_VALUE_INVALID", f"field {field!r} is not a valid mobile number")
    return text
