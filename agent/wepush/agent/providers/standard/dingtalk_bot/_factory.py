"""``DingTalkBotProviderFactory``: the entry point of ``wepush.dingtalk-bot``."""

from __future__ import annotations

from typing import ClassVar

from wepush.agent.engine import ExecutionClock
from wepush.agent.providers.spi import ConfigDocument
from wepush.agent.providers.standard._vendor import Credentials, ErrorTable, HttpVendorFactory, VendorHttp

from ._config import DingTalkAccount, DingTalkMessage, parse_account, parse_message
from ._errors import DINGTALK_TABLE
from ._session import OFFICIAL_HOST, DingTalkBotSession, access_token_of

__all__ = ["DingTalkBotProviderFactory"]


class DingTalkBotProviderFactory(HttpVendorFactory[DingTalkAccount, DingTalkMessage]):
    """DingTalk group custom robots on oapi.dingtalk.com."""

    package: ClassVar[str] = __name__.rpartition(".")[0]
    table: ClassVar[ErrorTable] = DINGTALK_TABLE

    def parse_account(self, document: ConfigDocument) -> DingTalkAccount:
        return parse_account(document, self.descriptor().schemas.account)

    def parse_message(self, document: ConfigDocument) -> DingTalkMessage:
        return parse_message(document, self.descriptor().schemas.message)

    def check_credentials(self, account: DingTalkAccount, credentials: Credentials) -> None:
        access_token_of(credentials.get("accessToken"))

    def create_session(
        self,
        account: DingTalkAccount,
        message: DingTalkMessage,
        credentials: Credentials,
        http: VendorHttp | None,
        clock: ExecutionClock,
    ) -> DingTalkBotSession:
        return DingTalkBotSession(
            base=self.base_url(OFFICIAL_HOST),
            access_token=access_token_of(credentials.get("accessToken")),
            message=message,
            http=http,
            credentials=credentials,
            clock=clock,
        )
