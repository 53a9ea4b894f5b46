"""How WeCom group robot answers map to provider codes and categories.

The webhook answers ``{"errcode": 0, "errmsg": "ok"}``.
"""

from __future__ import annotations

from wepush.agent.providers.spi import ErrorCategory as C
from wepush.agent.providers.standard._vendor import ErrorTable, row, transport_rows

__all__ = ["WECOM_BOT_TABLE"]

WECOM_BOT_TABLE = ErrorTable(
    "WECOM_BOT",
    (
        *transport_rows("WECOM_BOT"),
        row(
            "WECOM_BOT_RATE_LIMITED", C.RATE_LIMITED, "more than 20 messages a minute for this robot", "45009"
        ),
        row(
            "WECOM_BOT_WEBHOOK_INVALID",
            C.AUTHENTICATION,
            "the webhook key is invalid or the robot was removed",
            "93000",
        ),
        row("WECOM_BOT_IP_NOT_ALLOWED", C.AUTHORIZATION, "the caller's IP is not allowed", "60020"),
        row(
            "WECOM_BOT_MESSAGE_INVALID",
            C.INVALID_REQUEST,
            "message type, empty content, size or a parameter was refused",
            "40008",
            "44004",
            "45002",
            "40058",
        ),
        row("WECOM_BOT_SYSTEM_BUSY", C.TEMPORARY_REMOTE, "the vendor is busy", "-1"),
    ),
)
