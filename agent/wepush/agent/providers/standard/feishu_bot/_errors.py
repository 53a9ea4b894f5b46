"""How Feishu / Lark custom bot answers map to provider codes and categories.

The webhook answers HTTP 200 with ``{"code": 0, "msg": "success"}`` on success
(older bots: ``{"StatusCode": 0}``) and a non-zero ``code`` otherwise.
"""

from __future__ import annotations

from wepush.agent.providers.spi import ErrorCategory as C
from wepush.agent.providers.standard._vendor import ErrorTable, row, transport_rows

__all__ = ["FEISHU_TABLE"]

FEISHU_TABLE = ErrorTable(
    "FEISHU",
    (
        *transport_rows("FEISHU"),
        row(
            "FEISHU_RATE_LIMITED",
            C.RATE_LIMITED,
            "the bot's sending frequency limit was hit",
            "11232",
            "9499",
        ),
        row(
            "FEISHU_SIGNATURE_REJECTED",
            C.AUTHENTICATION,
            "signature mismatch, or the timestamp is more than an hour off",
            "19021",
        ),
        row("FEISHU_WEBHOOK_INVALID", C.AUTHENTICATION, "the webhook's hook token is not valid", "19001"),
        row(
            "FEISHU_IP_NOT_ALLOWED",
            C.AUTHORIZATION,
            "the caller's IP is not on the bot's allow list",
            "19022",
        ),
        row(
            "FEISHU_KEYWORD_MISSING",
            C.INVALID_REQUEST,
            "the message lacks the bot's required keyword",
            "19024",
        ),
    ),
)
