"""Typed SMTP account and message configuration."""

from __future__ import annotations

import enum
import re
import ssl
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
    secret_ref,
)

__all__ = [
    "CONTROL_CHARACTERS",
    "ENCODED_WORD",
    "Security",
    "SmtpAccount",
    "SmtpMessage",
    "header_issue",
    "parse_account",
    "parse_message",
    "tls_context",
]


class Security(enum.StrEnum):
    STARTTLS = "STARTTLS"
    TLS = "TLS"
    PLAIN = "PLAIN"


_DEFAULT_PORTS = {Security.STARTTLS: 587, Security.TLS: 465, Security.PLAIN: 25}
#: Account values that go into a mail header (From) or an SMTP command (AUTH).
_SINGLE_LINE_ACCOUNT_FIELDS = ("fromName", "username")
#: What a header value may not hold besides a line break: the other C0 controls (a tab is white space and
#: allowed) and DEL.
CONTROL_CHARACTERS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
#: An RFC 2047 encoded word, ``=?charset?encoding?text?=``, loosely: the email package's parser is lenient
#: about the parts, and decodes one into a header value's text, line breaks included (``_compose.py``).
ENCODED_WORD = re.compile(r"=\?[^?]*\?[^?]*\?.*?\?=", re.DOTALL)


def header_issue(value: str, path: str, issues: list[ValidationIssue], *, mail_header: bool = True) -> None:
    """One issue for ``value`` if it cannot stand in a mail header (or, ``mail_header`` false, an SMTP
    command) as it is."""
    if "\r" in value or "\n" in value:
        issues.append(issue(path, "LINE_BREAK", "must be a single line"))
    elif CONTROL_CHARACTERS.search(value):
        issues.append(issue(path, "CONTROL_CHARACTER", "must not contain control characters"))
    elif mail_header and ENCODED_WORD.search(value):
        issues.append(issue(path, "ENCODED_WORD", "must not contain an RFC 2047 encoded word (=?…?=)"))


@dataclass(frozen=True, slots=True)
class SmtpAccount:
    host: str
    port: int
    security: Security
    username: str | None
    password: SecretRef | None
    from_address: str
    from_name: str | None
    reply_to: str | None
    helo_name: str | None
    ca_certificate: str | None
    connect_timeout: timedelta
    request_timeout: timedelta

    def secret_refs(self) -> Mapping[str, SecretRef | None]:
        return {"password": self.password}


@dataclass(frozen=True, slots=True)
class SmtpMessage:
    subject: Template
    text: Template | None
    html: Template | None
    to_field: str
    name_field: str | None


def tls_context(ca_certificate: str | None) -> ssl.SSLContext:
    """System trust plus an optional private CA; hostname checks and verification always on."""
    context = ssl.create_default_context()
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if ca_certificate:
        context.load_verify_locations(cadata=ca_certificate)
    return context


def parse_account(document: ConfigDocument, schema: Mapping[str, Any]) -> SmtpAccount:
    raw = load_object(document, schema)
    issues: list[ValidationIssue] = []
    connect, request = http_timeouts(raw, issues)
    security = Security(raw.get("security", Security.STARTTLS.value))
    if security is Security.PLAIN and raw.get("allowPlaintext") is not True:
        issues.append(issue("/allowPlaintext", "PLAINTEXT_NOT_ALLOWED", "must be true to use PLAIN"))
    if security is Security.PLAIN and "username" in raw:
        issues.append(
            issue("/username", "AUTH_NEEDS_TLS", "AUTH is never sent over an unencrypted connection")
        )
    for field in _SINGLE_LINE_ACCOUNT_FIELDS:
        # A line break in a header or command value would fail every send later, blamed on the recipient;
        # another control character is not allowed in a header either (RFC 5322) and some servers refuse it.
        header_issue(str(raw.get(field, "")), f"/{field}", issues, mail_header=field != "username")
    ca = raw.get("tlsCaCertificate")
    if ca:
        try:
            tls_context(str(ca))
        except (ssl.SSLError, ValueError):
            issues.append(issue("/tlsCaCertificate", "CERTIFICATE_INVALID", "is not a PEM CA certificate"))
    if issues:
        raise ConfigError(issues)
    return SmtpAccount(
        host=str(raw["host"]).strip("[]"),
        port=int(raw.get("port", _DEFAULT_PORTS[security])),
        security=security,
        username=None if raw.get("username") is None else str(raw["username"]),
        password=secret_ref(raw.get("password")),
        from_address=str(raw["fromAddress"]),
        from_name=None if raw.get("fromName") is None else str(raw["fromName"]),
        reply_to=None if raw.get("replyTo") is None else str(raw["replyTo"]),
        helo_name=None if raw.get("heloName") is None else str(raw["heloName"]),
        ca_certificate=None if not ca else str(ca),
        connect_timeout=connect,
        request_timeout=request,
    )


def parse_message(document: ConfigDocument, schema: Mapping[str, Any]) -> SmtpMessage:
    raw = load_object(document, schema)
    issues: list[ValidationIssue] = []
    message = SmtpMessage(
        subject=Template.checked(raw["subject"], "/subject", issues),
        text=Template.checked(raw["textBody"], "/textBody", issues) if "textBody" in raw else None,
        html=Template.checked(raw["htmlBody"], "/htmlBody", issues) if "htmlBody" in raw else None,
        to_field=str(raw.get("toField", "email")),
        name_field=None if raw.get("nameField") is None else str(raw["nameField"]),
    )
    header_issue("".join(message.subject.literals), "/subject", issues)
    if issues:
        raise ConfigError(issues)
    return message
