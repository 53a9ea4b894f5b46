"""``wepush.wechat-miniprogram-subscribe``: WeChat Mini Program (小程序) subscribe messages."""

from __future__ import annotations

from ._errors import WECHAT_MINIPROGRAM_TABLE
from ._session import WechatMiniProgramSubscribeProviderFactory, WechatMiniProgramSubscribeSession

__all__ = [
    "WECHAT_MINIPROGRAM_TABLE",
    "WechatMiniProgramSubscribeProviderFactory",
    "WechatMiniProgramSubscribeSession",
]
