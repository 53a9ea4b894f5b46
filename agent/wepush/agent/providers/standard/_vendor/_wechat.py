"""What the WeChat Official Account and Mini Program providers share.

Both authenticate with AppID + AppSecret at ``api.weixin.qq.com/cgi-bin/token``,
send with ``?access_token=`` in the URL, answer ``{"errcode", "errmsg"}`` and
take template data as ``{"keyword": {"value": ...}}``.
"""

from __future__ import annotations

import re
from abc import abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, ClassVar, TypeVar

from yarl import URL

from wepush.agent.engine import ExecutionClock
from wepush.agent.providers.spi import (
    ConfigDocument,
    ErrorCategory,
    ProviderResult,
    SecretRef,
    ValidationIssue,
)

from ._config import ConfigError, http_timeouts, issue, load_object, secret_ref
from ._credentials import Credentials
from ._errors import ErrorRow, ErrorTable, row
from ._factory import HttpVendorFactory
from ._http import OutboundRequest, VendorHttp
from ._template import RenderProblem, Template
from ._token import AccessTokenCache, TokenGrant, fetch_errcode_token

__all__ = [
    "WECHAT_HOST",
    "WECHAT_TOKEN_CODES",
    "TemplateData",
    "WechatAccount",
    "WechatFactory",
    "openid_of",
    "wechat_rows",
]

WECHAT_HOST = "api.weixin.qq.com"
#: Codes meaning "this access token is invalid, expired or missing": refresh once, then report.
WECHAT_TOKEN_CODES = ("40001", "40014", "42001", "41001")
_OPENID = re.compile(r"[A-Za-z0-9_-]{6,128}")

C = ErrorCategory


def wechat_rows(prefix: str) -> tuple[ErrorRow, ...]:
    """Rows every WeChat API shares; providers add their message-specific ones."""
    p = prefix
    return (
        row(
            f"{p}_ACCESS_TOKEN_REJECTED",
            C.AUTHENTICATION,
            "the access token was invalid or expired even after one refresh",
            *WECHAT_TOKEN_CODES,
        ),
        row(
            f"{p}_CREDENTIALS_REJECTED",
            C.AUTHENTICATION,
            "AppID or AppSecret refused when fetching a token",
            "40013",
            "40125",
            "41002",
            "41004",
        ),
        row(
            f"{p}_IP_NOT_ALLOWED", C.AUTHORIZATION, "the caller's IP is not on the app's allow list", "40164"
        ),
        row(f"{p}_API_UNAUTHORIZED", C.AUTHORIZATION, "the app may not call this API", "48001", "48004"),
        row(f"{p}_QUOTA_EXCEEDED", C.RATE_LIMITED, "the app's daily API quota is used up", "45009"),
        row(f"{p}_OPENID_INVALID", C.RECIPIENT_INVALID, "the openid does not belong to this app", "40003"),
        row(f"{p}_SYSTEM_BUSY", C.TEMPORARY_REMOTE, "the vendor is busy", "-1"),
    )


def openid_of(fields: Mapping[str, object], field: str) -> str:
    value = fields.get(field)
    if field not in fields:
        raise RenderProblem("RECIPIENT_FIELD_MISSING", f"recipient has no field {field!r}")
    if not isinstance(value, str) or not _OPENID.fullmatch(value.strip()):
        raise RenderProblem("RECIPIENT_VALUE_INVALID", f"field {field!r} is not an openid")
    return value.strip()


@dataclass(frozen=True, slots=True)
class TemplateData:
    """``keyword → value template`` (with an optional colour), rendered to ``{"k": {"value": ...}}``."""

    entries: tuple[tuple[str, Template, str | None], ...]

    @classmethod
    def checked(cls, raw: Mapping[str, Any], issues: list[ValidationIssue]) -> TemplateData:
        entries: list[tuple[str, Template, str | None]] = []
        for key, value in raw.items():
            if isinstance(value, Mapping):
                source, color = str(value["value"]), value.get("color")
            else:
                source, color = str(value), None
            entries.append((str(key), Template.checked(source, f"/data/{key}", issues), color))
        return cls(tuple(entries))

    def render(self, fields: Mapping[str, object]) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {}
        for key, template, color in self.entries:
            out[key] = {"value": template.render(fields)} | ({"color": color} if color else {})
        return out


@dataclass(frozen=True, slots=True)
class WechatAccount:
    app_id: str
    app_secret: SecretRef
    connect_timeout: timedelta
    request_timeout: timedelta

    def secret_refs(self) -> Mapping[str, SecretRef | None]:
        return {"appSecret": self.app_secret}


def _parse_account(document: ConfigDocument, schema: Mapping[str, Any]) -> WechatAccount:
    raw = load_object(document, schema)
    issues: list[ValidationIssue] = []
    connect, request = http_timeouts(raw, issues)
    secret = secret_ref(raw.get("appSecret"))
    if secret is None:
        issues.append(issue("/appSecret", "REQUIRED", "a secret reference is required"))
    if issues or secret is None:
        raise ConfigError(issues)
    return WechatAccount(str(raw["appId"]), secret, connect, request)


MessageT = TypeVar("MessageT")


class WechatFactory(HttpVendorFactory[WechatAccount, MessageT]):
    """AppID/AppSecret accounts; ``test_connection`` fetches a token (no message is sent)."""

    prefix: ClassVar[str]

    def parse_account(self, document: ConfigDocument) -> WechatAccount:
        return _parse_account(document, self.descriptor().schemas.account)

    def token_request(self, account: WechatAccount, credentials: Credentials) -> OutboundRequest:
        url = self.base_url(WECHAT_HOST).with_path("/cgi-bin/token")
        query = {
            "grant_type": "client_credential",
            "appid": account.app_id,
            "secret": credentials.get("appSecret"),
        }
        return OutboundRequest("GET", url.with_query(query))

    async def fetch_token(
        self, account: WechatAccount, credentials: Credentials, http: VendorHttp | None
    ) -> TokenGrant | ProviderResult:
        table: ErrorTable = self.table
        if http is None:
            return table.fail(table.local("INTERNAL_ERROR"), "no transport for the access token request")
        return await fetch_errcode_token(
            http,
            self.token_request(account, credentials),
            table,
            vendor="WeChat",
            mask=credentials.mask,
            credentials_row=table[f"{self.prefix}_CREDENTIALS_REJECTED"],
            token_codes=WECHAT_TOKEN_CODES,
        )

    def token_cache(
        self, account: WechatAccount, credentials: Credentials, http: VendorHttp | None, clock: ExecutionClock
    ) -> AccessTokenCache:
        async def fetch() -> TokenGrant | ProviderResult:
            return await self.fetch_token(account, credentials, http)

        return AccessTokenCache(fetch, clock, credentials.remember)

    async def probe(
        self, account: WechatAccount, credentials: Credentials, http: VendorHttp
    ) -> ProviderResult:
        grant = await self.fetch_token(account, credentials, http)
        return grant if isinstance(grant, ProviderResult) else ProviderResult.ok("OK")

    def send_url(self, path: str) -> URL:
        return self.base_url(WECHAT_HOST).with_path(path)

    @abstractmethod
    def parse_message(self, document: ConfigDocument) -> MessageT:
        """The typed message, or ConfigError naming every issue."""
