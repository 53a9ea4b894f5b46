"""``wepush.dingtalk-bot``: DingTalk group custom robot (access token, optional 加签 signing)."""

from __future__ import annotations

from ._errors import DINGTALK_TABLE
from ._factory import DingTalkBotProviderFactory
from ._session import DingTalkBotSession, dingtalk_sign, security_cause

__all__ = [
    "DINGTALK_TABLE",
    "DingTalkBotProviderFactory",
    "DingTalkBotSession",
    "dingtalk_sign",
    "security_cause",
]
