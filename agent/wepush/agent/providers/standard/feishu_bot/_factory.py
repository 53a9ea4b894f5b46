"""``FeishuBotProviderFactory``: the entry point of ``wepush.feishu-bot``."""

from __future__ import annotations

from typing import ClassVar

from wepush.agent.engine import ExecutionClock
from wepush.agent.providers.spi import ConfigDocument
from wepush.agent.providers.standard._vendor import Credentials, ErrorTable, HttpVendorFactory, VendorHttp

from ._config import FeishuAccount, FeishuMessage, hook_id_of, parse_account, parse_message
from ._errors import FEISHU_TABLE
from ._session import FeishuBotSession

__all__ = ["FeishuBotProviderFactory"]


class FeishuBotProviderFactory(HttpVendorFactory[FeishuAccount, FeishuMessage]):
    """Feishu (open.feishu.cn) and Lark (open.larksuite.com) group custom bots."""

    package: ClassVar[str] = __name__.rpartition(".")[0]
    table: ClassVar[ErrorTable] = FEISHU_TABLE

    def parse_account(self, document: ConfigDocument) -> FeishuAccount:
        return parse_account(document, self.descriptor().schemas.account)

    def parse_message(self, document: ConfigDocument) -> FeishuMessage:
        return parse_message(document, self.descriptor().schemas.message)

    def check_credentials(self, account: FeishuAccount, credentials: Credentials) -> None:
        hook_id_of(credentials.get("webhook"), account.host)

    def create_session(
        self,
        account: FeishuAccount,
        message: FeishuMessage,
        credentials: Credentials,
        http: VendorHttp | None,
        clock: ExecutionClock,
    ) -> FeishuBotSession:
        return FeishuBotSession(
            base=self.base_url(account.host),
            hook_id=hook_id_of(credentials.get("webhook"), account.host),
            message=message,
            http=http,
            credentials=credentials,
            clock=clock,
        )
