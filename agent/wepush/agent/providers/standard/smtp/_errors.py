"""How SMTP outcomes map to provider codes and categories.

Reply codes are classified by the stage that produced them: 421 and 454 mean the
server is throttling or closing (RATE_LIMITED), AUTH 530/534/535 reject the
credentials, 550/551/553 (or an enhanced ``5.1.x``) at RCPT reject the
recipient, ``5.7.x`` at RCPT is a relay/policy refusal, a 5xx at MAIL FROM blames
the sender configuration; any other 4xx is temporary and any other 5xx permanent.
A failure before DATA is safe to retry; after DATA started the message may have
been accepted, so such failures are never retried and end the item UNKNOWN: a
connection dropped during DATA is category UNKNOWN, where one dropped before it
(nothing was handed over) is NETWORK.
"""

from __future__ import annotations

import re

from wepush.agent.providers.spi import ErrorCategory as C
from wepush.agent.providers.standard._vendor import ErrorRow, ErrorTable, row

__all__ = ["SMTP_TABLE", "reply_row"]

SMTP_TABLE = ErrorTable(
    "SMTP",
    (
        row(
            "SMTP_CONNECT_FAILED", C.NETWORK, "the server could not be reached or closed before the greeting"
        ),
        row("SMTP_CONNECT_TIMEOUT", C.NETWORK, "connecting timed out; nothing was sent", retryable=True),
        row(
            "SMTP_TLS_FAILED", C.NETWORK, "TLS handshake or certificate verification failed", retryable=False
        ),
        row("SMTP_DISCONNECTED", C.NETWORK, "the connection dropped before DATA; nothing was sent"),
        row(
            "SMTP_CONNECTION_LOST",
            C.UNKNOWN,
            "the connection dropped during DATA; the message may have been accepted",
            retryable=False,
        ),
        row(
            "SMTP_TIMEOUT",
            C.TIMEOUT,
            "the server did not answer in time during DATA; the message may have been accepted",
            retryable=False,
        ),
        row(
            "SMTP_COMMAND_TIMEOUT", C.NETWORK, "the server did not answer in time before DATA", retryable=True
        ),
        row(
            "SMTP_THROTTLED", C.RATE_LIMITED, "the server is throttling or closing the session", "421", "454"
        ),
        row(
            "SMTP_AUTH_FAILED",
            C.AUTHENTICATION,
            "the server rejected the credentials",
            "AUTH 530",
            "AUTH 534",
            "AUTH 535",
        ),
        row(
            "SMTP_AUTH_UNAVAILABLE",
            C.INVALID_REQUEST,
            "credentials are configured but the server offers no usable AUTH",
        ),
        row(
            "SMTP_STARTTLS_UNAVAILABLE",
            C.INVALID_REQUEST,
            "STARTTLS is required but the server does not offer it",
        ),
        row(
            "SMTP_RECIPIENT_REJECTED",
            C.RECIPIENT_INVALID,
            "the server refused the recipient mailbox",
            "RCPT 550",
            "RCPT 551",
            "RCPT 553",
            "RCPT 5.1.x",
        ),
        row(
            "SMTP_RELAY_DENIED",
            C.AUTHORIZATION,
            "relaying or this client was refused by policy",
            "RCPT 5.7.x",
        ),
        row("SMTP_SENDER_REJECTED", C.INVALID_REQUEST, "the server refused the From address", "MAIL 5xx"),
        row("SMTP_TEMPORARY_FAILURE", C.TEMPORARY_REMOTE, "any other transient refusal", "4xx"),
        row("SMTP_PERMANENT_FAILURE", C.PERMANENT_REMOTE, "any other permanent refusal", "5xx"),
        row(
            "SMTP_OUTCOME_UNKNOWN",
            C.UNKNOWN,
            "an unexpected reply to the end of DATA; acceptance is unconfirmed",
            retryable=False,
        ),
        row(
            "SMTP_CANCELLED",
            C.CANCELLED,
            "the run cancelled the item before it was handed over",
            retryable=False,
        ),
        row("SMTP_INTERNAL_ERROR", C.INTERNAL, "an unexpected failure inside the provider"),
        row(
            "SMTP_RECIPIENT_FIELD_MISSING",
            C.RECIPIENT_INVALID,
            "the recipient lacks a field the message uses",
        ),
        row(
            "SMTP_RECIPIENT_VALUE_INVALID",
            C.RECIPIENT_INVALID,
            "an address is malformed, or a value would break a header line",
        ),
    ),
)

_ENHANCED = re.compile(r"^\s*([245])\.(\d{1,3})\.(\d{1,3})")


def reply_row(stage: str, code: int, text: str) -> ErrorRow:
    """The row for a refusal ``code`` at ``stage`` (``GREETING``, ``EHLO``, ``AUTH``, ``MAIL``, ``RCPT``, ``DATA``)."""
    table = SMTP_TABLE
    enhanced = _ENHANCED.match(text)
    if code in (421, 454):
        return table["SMTP_THROTTLED"]
    if stage == "AUTH" and code in (530, 534, 535):
        return table["SMTP_AUTH_FAILED"]
    if stage == "RCPT" and 500 <= code < 600:
        if enhanced is not None and enhanced.group(2) == "7":
            return table["SMTP_RELAY_DENIED"]
        if code in (550, 551, 553) or (enhanced is not None and enhanced.group(2) == "1"):
            return table["SMTP_RECIPIENT_REJECTED"]
    if stage == "MAIL" and 500 <= code < 600:
        return table["SMTP_SENDER_REJECTED"]
    if 400 <= code < 500:
        return table["SMTP_TEMPORARY_FAILURE"]
    if 500 <= code < 600:
        return table["SMTP_PERMANENT_FAILURE"]
    return table["SMTP_OUTCOME_UNKNOWN"]
