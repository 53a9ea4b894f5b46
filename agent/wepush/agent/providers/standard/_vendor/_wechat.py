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
from typing import Any, ClassVar, Generic, TypeVar

from yarl import URL

from wepush.agent.engine import ExecutionClock
from wepush.agent.providers.common import ConfigError, RenderProblem, Template
from wepush.agent.providers.spi import (
    ConfigDocument,
    ErrorCategory,
    SecretRef,
    ValidationIssue,
)

from ._config import http_timeouts, load_object, required_secret
from ._credentials import Credentials
from ._errors import ErrorRow, ErrorTable, row
from ._http import OutboundRequest, VendorHttp
from ._session import TokenVendorSession
from ._token import AccessTokenCache, TokenVendorFactory

__all__ = [
    "WECHAT_HOST",
    "WECHAT_TOKEN_CODES",
    "TemplateData",
    "WechatAccount",
    "WechatFactory",
    "WechatSession",
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
            f"{p}_ACCESS_TOKEN_TIMEOUT",
            C.TEMPORARY_REMOTE,
            "no access token in time (request timeout or item deadline); nothing was sent",
        ),
        row(
            f"{p}_ACCESS_TOKEN_CONNECTION_LOST",
            C.NETWORK,
            "the connection to the token endpoint dropped mid-request; nothing was sent",
        ),
        row(
            f"{p}_ACCESS_TOKEN_UNREADABLE",
            C.TEMPORARY_REMOTE,
            "the token endpoint answered without a readable access token; nothing was sent",
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
    secret = required_secret(raw, "appSecret", issues)
    if issues or secret is None:
        raise ConfigError(issues)
    return WechatAccount(str(raw["appId"]), secret, connect, request)


MessageT = TypeVar("MessageT")


class WechatSession(TokenVendorSession, Generic[MessageT]):
    """A WeChat API session over one typed message; a provider adds only ``render``."""

    vendor: ClassVar[str] = "WeChat"

    def __init__(
        self,
        *,
        send_url: URL,
        message: MessageT,
        tokens: AccessTokenCache,
        table: ErrorTable,
        http: VendorHttp | None,
        credentials: Credentials,
        clock: ExecutionClock,
    ) -> None:
        super().__init__(
            send_url=send_url,
            tokens=tokens,
            token_codes=WECHAT_TOKEN_CODES,
            table=table,
            http=http,
            credentials=credentials,
            clock=clock,
        )
        self._message = message


class WechatFactory(TokenVendorFactory[WechatAccount, MessageT]):
    """AppID/AppSecret accounts; a provider names its send path, session type and message parser."""

    vendor: ClassVar[str] = "WeChat"
    token_codes: ClassVar[tuple[str, ...]] = WECHAT_TOKEN_CODES
    send_path: ClassVar[str]
    # ``Any``: a ClassVar cannot name the factory's MessageT; ``create_session`` passes the matching message.
    session_type: ClassVar[type[WechatSession[Any]]]

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

    def create_session(
        self,
        account: WechatAccount,
        message: MessageT,
        credentials: Credentials,
        http: VendorHttp | None,
        clock: ExecutionClock,
    ) -> WechatSession[Any]:
        return self.session_type(
            send_url=self.base_url(WECHAT_HOST).with_path(self.send_path),
            message=message,
            tokens=self.token_cache(account, credentials, http, clock),
            table=self.table,
            http=http,
            credentials=credentials,
            clock=clock,
        )

    @abstractmethod
    def parse_message(self, document: ConfigDocument) -> MessageT:
        """The typed message, or ConfigError naming every issue."""
