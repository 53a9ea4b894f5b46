"""The helper layer every standard channel provider builds on.

Configuration parsing, resolved credentials, pinned vendor endpoints, error
tables, ``{{field}}`` templates, the aiohttp transport, vendor reply
classification, session-scoped access tokens and the session/factory shapes.
It depends only on the Provider SPI and the engine's core types.
"""

from __future__ import annotations

from ._config import (
    DEFAULT_SECRET_NAMESPACE,
    ConfigError,
    duration_field,
    http_timeouts,
    issue,
    load_object,
    secret_ref,
)
from ._credentials import MASK, Credentials
from ._endpoint import host_header, loopback_override, vendor_base
from ._errors import ErrorRow, ErrorTable, row, transport_rows
from ._factory import HttpVendorFactory, StandardFactory, VendorAccount
from ._http import MAX_RESPONSE_BYTES, HttpSettings, OutboundRequest, VendorHttp, VendorResponse, origin_of
from ._replies import VendorReply, errcode_reply, judge, snippet, status_row
from ._session import Rendered, TokenVendorSession, VendorSession
from ._template import (
    JsonTemplate,
    RenderProblem,
    Template,
    TemplateSyntaxError,
    UnknownFieldError,
    html_escape,
    recipient_fields,
)
from ._token import AccessTokenCache, TokenGrant, fetch_errcode_token
from ._wechat import (
    WECHAT_HOST,
    WECHAT_TOKEN_CODES,
    TemplateData,
    WechatAccount,
    WechatFactory,
    openid_of,
    wechat_rows,
)

__all__ = [
    "DEFAULT_SECRET_NAMESPACE",
    "MASK",
    "MAX_RESPONSE_BYTES",
    "WECHAT_HOST",
    "WECHAT_TOKEN_CODES",
    "AccessTokenCache",
    "ConfigError",
    "Credentials",
    "ErrorRow",
    "ErrorTable",
    "HttpSettings",
    "HttpVendorFactory",
    "JsonTemplate",
    "OutboundRequest",
    "RenderProblem",
    "Rendered",
    "StandardFactory",
    "Template",
    "TemplateData",
    "TemplateSyntaxError",
    "TokenGrant",
    "TokenVendorSession",
    "UnknownFieldError",
    "VendorAccount",
    "VendorHttp",
    "VendorReply",
    "VendorResponse",
    "VendorSession",
    "WechatAccount",
    "WechatFactory",
    "duration_field",
    "errcode_reply",
    "fetch_errcode_token",
    "host_header",
    "html_escape",
    "http_timeouts",
    "issue",
    "judge",
    "load_object",
    "loopback_override",
    "openid_of",
    "origin_of",
    "recipient_fields",
    "row",
    "secret_ref",
    "snippet",
    "status_row",
    "transport_rows",
    "vendor_base",
    "wechat_rows",
]
