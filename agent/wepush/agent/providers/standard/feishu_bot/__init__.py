"""``wepush.feishu-bot``: Feishu / Lark group custom bot (webhook, optional signature)."""

from __future__ import annotations

from ._errors import FEISHU_TABLE
from ._factory import FeishuBotProviderFactory
from ._session import FeishuBotSession, feishu_sign

__all__ = ["FEISHU_TABLE", "FeishuBotProviderFactory", "FeishuBotSession", "feishu_sign"]
