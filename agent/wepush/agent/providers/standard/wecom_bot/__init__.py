"""``wepush.wecom-bot``: WeCom (企业微信) group robot (webhook key)."""

from __future__ import annotations

from ._errors import WECOM_BOT_TABLE
from ._factory import WeComBotProviderFactory
from ._session import WeComBotSession

__all__ = ["WECOM_BOT_TABLE", "WeComBotProviderFactory", "WeComBotSession"]
