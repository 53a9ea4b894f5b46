"""``wepush.aliyun-sms``: Alibaba Cloud SMS template messages, signed with ACS3-HMAC-SHA256."""

from __future__ import annotations

from ._config import normalise_phone
from ._errors import ALIYUN_SMS_TABLE
from ._factory import AliyunSmsProviderFactory
from ._session import AliyunSmsSession
from ._signing import canonical_query, sign_call

__all__ = [
    "ALIYUN_SMS_TABLE",
    "AliyunSmsProviderFactory",
    "AliyunSmsSession",
    "canonical_query",
    "normalise_phone",
    "sign_call",
]
