"""``wepush.wecom-app``: WeCom (企业微信) application messages (corp id + secret → access token)."""

from __future__ import annotations

from ._errors import WECOM_APP_TABLE, WECOM_TOKEN_CODES
from ._factory import WeComAppProviderFactory
from ._session import WeComAppSession, targets_of

__all__ = ["WECOM_APP_TABLE", "WECOM_TOKEN_CODES", "WeComAppProviderFactory", "WeComAppSession", "targets_of"]
