"""How WeChat Official Account template message answers map to provider codes and categories."""

from __future__ import annotations

from wepush.agent.providers.spi import ErrorCategory as C
from wepush.agent.providers.standard._vendor import ErrorTable, row, transport_rows, wechat_rows

__all__ = ["WECHAT_MP_TABLE"]

WECHAT_MP_TABLE = ErrorTable(
    "WECHAT_MP",
    (
        # client_msg_id makes a repeated call a no-op for 10 minutes, so a timeout may be retried.
        *transport_rows("WECHAT_MP", timeout_retryable=True),
        *wechat_rows("WECHAT_MP"),
        row(
            "WECHAT_MP_RECIPIENT_REFUSED",
            C.RECIPIENT_INVALID,
            "the user refused messages from this account",
            "43101",
        ),
        row("WECHAT_MP_NOT_FOLLOWING", C.RECIPIENT_INVALID, "the user does not follow the account", "43004"),
        row(
            "WECHAT_MP_TEMPLATE_INVALID",
            C.INVALID_REQUEST,
            "template id, data format or an argument was refused",
            "40037",
            "47001",
            "47003",
        ),
    ),
)
