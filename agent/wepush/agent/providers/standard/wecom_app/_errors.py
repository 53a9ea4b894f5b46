"""How WeCom application message answers map to provider codes and categories."""

from __future__ import annotations

from wepush.agent.providers.spi import ErrorCategory as C
from wepush.agent.providers.standard._vendor import ErrorTable, row, transport_rows

__all__ = ["WECOM_APP_TABLE", "WECOM_TOKEN_CODES"]

#: "This access token is invalid, expired or missing": refresh once, then report.
WECOM_TOKEN_CODES = ("40014", "42001", "41001")

WECOM_APP_TABLE = ErrorTable(
    "WECOM_APP",
    (
        *transport_rows("WECOM_APP"),
        row(
            "WECOM_APP_ACCESS_TOKEN_REJECTED",
            C.AUTHENTICATION,
            "the access token was invalid or expired even after one refresh",
            *WECOM_TOKEN_CODES,
        ),
        row(
            "WECOM_APP_CREDENTIALS_REJECTED",
            C.AUTHENTICATION,
            "corp id or application secret refused when fetching a token",
            "40013",
            "40001",
            "40091",
            "41002",
            "41004",
        ),
        row(
            "WECOM_APP_ACCESS_TOKEN_TIMEOUT",
            C.TEMPORARY_REMOTE,
            "no access token in time (request timeout or item deadline); nothing was sent",
        ),
        row(
            "WECOM_APP_ACCESS_TOKEN_CONNECTION_LOST",
            C.NETWORK,
            "the connection to the token endpoint dropped mid-request; nothing was sent",
        ),
        row(
            "WECOM_APP_ACCESS_TOKEN_UNREADABLE",
            C.TEMPORARY_REMOTE,
            "the token endpoint answered without a readable access token; nothing was sent",
        ),
        row(
            "WECOM_APP_IP_NOT_ALLOWED",
            C.AUTHORIZATION,
            "the caller's IP is not trusted by the application",
            "60020",
        ),
        row(
            "WECOM_APP_NOT_PERMITTED",
            C.AUTHORIZATION,
            "the application may not call this API or act for this agent",
            "48002",
            "301002",
        ),
        row(
            "WECOM_APP_RECIPIENT_INVALID",
            C.RECIPIENT_INVALID,
            "every user, party and tag is invalid or outside the application's scope",
            "81013",
            "82001",
        ),
        row(
            "WECOM_APP_RATE_LIMITED",
            C.RATE_LIMITED,
            "API frequency or concurrency limit reached",
            "45009",
            "45033",
        ),
        row("WECOM_APP_AGENT_INVALID", C.INVALID_REQUEST, "the agent id is not valid", "40056"),
        row(
            "WECOM_APP_MESSAGE_INVALID",
            C.INVALID_REQUEST,
            "message type, empty content, size or a parameter was refused",
            "40008",
            "44004",
            "45002",
            "40058",
        ),
        row("WECOM_APP_SYSTEM_BUSY", C.TEMPORARY_REMOTE, "the vendor is busy", "-1"),
    ),
)
