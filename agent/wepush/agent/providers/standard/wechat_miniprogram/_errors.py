"""How WeChat Mini Program subscribe message answers map to provider codes and categories."""

from __future__ import annotations

from wepush.agent.providers.spi import ErrorCategory as C
from wepush.agent.providers.standard._vendor import ErrorTable, row, transport_rows, wechat_rows

__all__ = ["WECHAT_MINIPROGRAM_TABLE"]

WECHAT_MINIPROGRAM_TABLE = ErrorTable(
    "WECHAT_MINIPROGRAM",
    (
        *transport_rows("WECHAT_MINIPROGRAM"),
        *wechat_rows("WECHAT_MINIPROGRAM"),
        row(
            "WECHAT_MINIPROGRAM_NOT_SUBSCRIBED",
            C.RECIPIENT_INVALID,
            "the user refused, or has no remaining subscription for this template",
            "43101",
        ),
        row(
            "WECHAT_MINIPROGRAM_TEMPLATE_INVALID",
            C.INVALID_REQUEST,
            "template id, page, data format or an argument was refused",
            "40037",
            "41030",
            "47001",
            "47003",
        ),
    ),
)
