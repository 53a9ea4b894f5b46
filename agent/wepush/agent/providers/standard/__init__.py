"""The standard channel providers: one sub-package per channel over the shared ``_vendor`` layer.

Each provider ships its descriptor and JSON Schemas as package data and is
registered as a ``wepush.providers`` entry point. Production endpoints are the
vendors' official hosts; only a factory constructor argument can point an HTTP
provider at a loopback test server.
"""

from __future__ import annotations

from .aliyun_sms import AliyunSmsProviderFactory
from .dingtalk_bot import DingTalkBotProviderFactory
from .feishu_bot import FeishuBotProviderFactory
from .smtp import SmtpProviderFactory
from .wechat_miniprogram import WechatMiniProgramSubscribeProviderFactory
from .wechat_mp import WechatMpTemplateProviderFactory
from .wecom_app import WeComAppProviderFactory
from .wecom_bot import WeComBotProviderFactory

__all__ = [
    "AliyunSmsProviderFactory",
    "DingTalkBotProviderFactory",
    "FeishuBotProviderFactory",
    "SmtpProviderFactory",
    "WeComAppProviderFactory",
    "WeComBotProviderFactory",
    "WechatMiniProgramSubscribeProviderFactory",
    "WechatMpTemplateProviderFactory",
]
