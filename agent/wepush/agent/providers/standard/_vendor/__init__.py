"""The helper layer every standard channel provider builds on.

Configuration parsing, resolved credentials, pinned vendor endpoints, error
tables, ``{{field}}`` JSON templates, the aiohttp transport, vendor reply
classification, session-scoped access tokens and the session/factory shapes.
It depends only on the Provider SPI and the engine's core types.
"""

from __future__ import annotations

from wepush.agent.providers.common import (
    ConfigError,
    RenderProblem,
    Template,
    TemplateSyntaxError,
    UnknownVariableError,
    secret_ref,
)

from ._config import http_timeouts, issue, load_object, required_secret
from ._credentials import MASK, Credentials
from ._endpoint import host_header, loopback_override, vendor_base
from ._errors import ErrorRow, ErrorTable, row, transport_rows
from ._factory import HttpVendorFactory, StandardFactory, VendorAccount
from ._http import MAX_RESPONSE_BYTES, HttpSettings, OutboundRequest, VendorHttp, VendorResponse, origin_of
from ._replies import VendorReply, errcode_reply, judge, snippet, status_row
from ._session import Rendered, TokenVendorSession, VendorSession, preview_send_request
from ._template import JsonTemplate, html_escape, recipient_fields, render_list, template_list
from ._token import AccessTokenCache, TokenGrant, TokenVendorFactory, fetch_errcode_token
from ._webhook import WebhookSecret
from ._wechat import (
    WECHAT_HOST,
    WECHAT_TOKEN_CODES,
    TemplateData,
    WechatAccount,
    WechatFactory,
    WechatSession,
    openid_of,
    wechat_rows,
)

__all__ = [
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
    "TokenVendorFactory",
    "TokenVendorSession",
    "UnknownVariableError",
    "VendorAccount",
    "VendorHttp",
    "VendorReply",
    "VendorResponse",
    "VendorSession",
    "WebhookSecret",
    "WechatAccount",
    "WechatFactory",
    "WechatSession",
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
    "preview_send_request",
    "recipient_fields",
    "render_list",
    "required_secret",
    "row",
    "secret_ref",
    "snippet",
    "status_row",
    "template_list",
    "transport_rows",
    "vendor_base",
    "wechat_rows",
]
