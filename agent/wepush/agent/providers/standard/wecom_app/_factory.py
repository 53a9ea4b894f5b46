"""``WeComAppProviderFactory``: the entry point of ``wepush.wecom-app``."""

from __future__ import annotations

from typing import ClassVar

from wepush.agent.engine import ExecutionClock
from wepush.agent.providers.spi import ConfigDocument
from wepush.agent.providers.standard._vendor import (
    Credentials,
    ErrorTable,
    OutboundRequest,
    TokenVendorFactory,
    VendorHttp,
)

from ._config import WeComAppAccount, WeComAppMessage, parse_account, parse_message
from ._errors import WECOM_APP_TABLE, WECOM_TOKEN_CODES
from ._session import SEND_PATH, TOKEN_PATH, WeComAppSession

__all__ = ["OFFICIAL_HOST", "WeComAppProviderFactory"]

OFFICIAL_HOST = "qyapi.weixin.qq.com"


class WeComAppProviderFactory(TokenVendorFactory[WeComAppAccount, WeComAppMessage]):
    """WeCom (企业微信) application messages on qyapi.weixin.qq.com."""

    package: ClassVar[str] = __name__.rpartition(".")[0]
    table: ClassVar[ErrorTable] = WECOM_APP_TABLE
    vendor: ClassVar[str] = "WeCom"
    token_codes: ClassVar[tuple[str, ...]] = WECOM_TOKEN_CODES

    def parse_account(self, document: ConfigDocument) -> WeComAppAccount:
        return parse_account(document, self.descriptor().schemas.account)

    def parse_message(self, document: ConfigDocument) -> WeComAppMessage:
        return parse_message(document, self.descriptor().schemas.message)

    def token_request(self, account: WeComAppAccount, credentials: Credentials) -> OutboundRequest:
        url = self.base_url(OFFICIAL_HOST).with_path(TOKEN_PATH)
        return OutboundRequest(
            "GET", url.with_query({"corpid": account.corp_id, "corpsecret": credentials.get("corpSecret")})
        )

    def create_session(
        self,
        account: WeComAppAccount,
        message: WeComAppMessage,
        credentials: Credentials,
        http: VendorHttp | None,
        clock: ExecutionClock,
    ) -> WeComAppSession:
        return WeComAppSession(
            send_url=self.base_url(OFFICIAL_HOST).with_path(SEND_PATH),
            agent_id=account.agent_id,
            message=message,
            tokens=self.token_cache(account, credentials, http, clock),
            http=http,
            credentials=credentials,
            clock=clock,
        )
