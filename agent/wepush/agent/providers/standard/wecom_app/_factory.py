"""``WeComAppProviderFactory``: the entry point of ``wepush.wecom-app``."""

from __future__ import annotations

from typing import ClassVar

from wepush.agent.engine import ExecutionClock
from wepush.agent.providers.spi import ConfigDocument, ProviderResult
from wepush.agent.providers.standard._vendor import (
    AccessTokenCache,
    Credentials,
    ErrorTable,
    HttpVendorFactory,
    OutboundRequest,
    TokenGrant,
    VendorHttp,
    fetch_errcode_token,
)

from ._config import WeComAppAccount, WeComAppMessage, parse_account, parse_message
from ._errors import WECOM_APP_TABLE, WECOM_TOKEN_CODES
from ._session import SEND_PATH, TOKEN_PATH, WeComAppSession

__all__ = ["OFFICIAL_HOST", "WeComAppProviderFactory"]

OFFICIAL_HOST = "qyapi.weixin.qq.com"


class WeComAppProviderFactory(HttpVendorFactory[WeComAppAccount, WeComAppMessage]):
    """WeCom (企业微信) application messages on qyapi.weixin.qq.com."""

    package: ClassVar[str] = __name__.rpartition(".")[0]
    table: ClassVar[ErrorTable] = WECOM_APP_TABLE

    def parse_account(self, document: ConfigDocument) -> WeComAppAccount:
        return parse_account(document, self.descriptor().schemas.account)

    def parse_message(self, document: ConfigDocument) -> WeComAppMessage:
        return parse_message(document, self.descriptor().schemas.message)

    def token_request(self, account: WeComAppAccount, credentials: Credentials) -> OutboundRequest:
        url = self.base_url(OFFICIAL_HOST).with_path(TOKEN_PATH)
        return OutboundRequest(
            "GET", url.with_query({"corpid": account.corp_id, "corpsecret": credentials.get("corpSecret")})
        )

    async def fetch_token(
        self, account: WeComAppAccount, credentials: Credentials, http: VendorHttp | None
    ) -> TokenGrant | ProviderResult:
        table = WECOM_APP_TABLE
        if http is None:
            return table.fail(table.local("INTERNAL_ERROR"), "no transport for the access token request")
        return await fetch_errcode_token(
            http,
            self.token_request(account, credentials),
            table,
            vendor="WeCom",
            mask=credentials.mask,
            credentials_row=table["WECOM_APP_CREDENTIALS_REJECTED"],
            token_codes=WECOM_TOKEN_CODES,
        )

    async def probe(
        self, account: WeComAppAccount, credentials: Credentials, http: VendorHttp
    ) -> ProviderResult:
        grant = await self.fetch_token(account, credentials, http)
        return grant if isinstance(grant, ProviderResult) else ProviderResult.ok("OK")

    def create_session(
        self,
        account: WeComAppAccount,
        message: WeComAppMessage,
        credentials: Credentials,
        http: VendorHttp | None,
        clock: ExecutionClock,
    ) -> WeComAppSession:
        async def fetch() -> TokenGrant | ProviderResult:
            return await self.fetch_token(account, credentials, http)

        return WeComAppSession(
            send_url=self.base_url(OFFICIAL_HOST).with_path(SEND_PATH),
            agent_id=account.agent_id,
            message=message,
            tokens=AccessTokenCache(fetch, clock, credentials.remember),
            http=http,
            credentials=credentials,
            clock=clock,
        )
