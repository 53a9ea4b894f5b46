"""``wepush.wechat-mp-template``: WeChat Official Account (公众号) template messages."""

from __future__ import annotations

from ._errors import WECHAT_MP_TABLE
from ._session import WechatMpTemplateProviderFactory, WechatMpTemplateSession, client_msg_id

__all__ = ["WECHAT_MP_TABLE", "WechatMpTemplateProviderFactory", "WechatMpTemplateSession", "client_msg_id"]
