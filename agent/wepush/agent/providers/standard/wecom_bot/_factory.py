"""``WeComBotProviderFactory``: the entry point of ``wepush.wecom-bot``."""

from __future__ import annotations

from typing import ClassVar

from wepush.agent.engine import ExecutionClock
from wepush.agent.providers.spi import ConfigDocument
from wepush.agent.providers.standard._vendor import Credentials, ErrorTable, HttpVendorFactory, VendorHttp

from ._config import WeComBotAccount, WeComBotMessage, parse_account, parse_message
from ._errors import WECOM_BOT_TABLE
from ._session import OFFICIAL_HOST, WeComBotSession, webhook_key_of

__all__ = ["WeComBotProviderFactory"]


class WeComBotProviderFactory(HttpVendorFactory[WeComBotAccount, WeComBotMessage]):
    """WeCom (企业微信) group robots on qyapi.weixin.qq.com."""

    package: ClassVar[str] = __name__.rpartition(".")[0]
    table: ClassVar[ErrorTable] = WECOM_BOT_TABLE

    def parse_account(self, document: ConfigDocument) -> WeComBotAccount:
        return parse_account(document, self.descriptor().schemas.account)

    def parse_message(self, document: ConfigDocument) -> WeComBotMessage:
        return parse_message(document, self.descriptor().schemas.message)

    def check_credentials(self, account: WeComBotAccount, credentials: Credentials) -> None:
        webhook_key_of(credentials.get("webhookKey"))

    def create_session(
        self,
        account: WeComBotAccount,
        message: WeComBotMessage,
        credentials: Credentials,
        http: VendorHttp | None,
        clock: ExecutionClock,
    ) -> WeComBotSession:
        return WeComBotSession(
            base=self.base_url(OFFICIAL_HOST),
            key=webhook_key_of(credentials.get("webhookKey")),
            message=message,
            http=http,
            credentials=credentials,
            clock=clock,
        )
