"""``AliyunSmsProviderFactory``: the entry point of ``wepush.aliyun-sms``."""

from __future__ import annotations

from typing import ClassVar

from wepush.agent.engine import ExecutionClock, SystemClock
from wepush.agent.providers.spi import ConfigDocument, ProviderResult
from wepush.agent.providers.standard._vendor import (
    Credentials,
    ErrorTable,
    HttpVendorFactory,
    VendorHttp,
    VendorReply,
    judge,
)

from ._config import AliyunSmsAccount, AliyunSmsMessage, parse_account, parse_message
from ._errors import ALIYUN_SMS_TABLE
from ._session import OFFICIAL_HOST, AliyunSmsSession, signed_request

__all__ = ["AliyunSmsProviderFactory"]


class AliyunSmsProviderFactory(HttpVendorFactory[AliyunSmsAccount, AliyunSmsMessage]):
    """Alibaba Cloud SMS on dysmsapi.aliyuncs.com."""

    package: ClassVar[str] = __name__.rpartition(".")[0]
    table: ClassVar[ErrorTable] = ALIYUN_SMS_TABLE

    def parse_account(self, document: ConfigDocument) -> AliyunSmsAccount:
        return parse_account(document, self.descriptor().schemas.account)

    def parse_message(self, document: ConfigDocument) -> AliyunSmsMessage:
        return parse_message(document, self.descriptor().schemas.message)

    async def probe(
        self, account: AliyunSmsAccount, credentials: Credentials, http: VendorHttp
    ) -> ProviderResult:
        """``QuerySmsSignList`` reads one sign name: it proves the AccessKey, signature and RAM grant."""
        request = signed_request(
            self.base_url(OFFICIAL_HOST),
            "QuerySmsSignList",
            (("PageIndex", "1"), ("PageSize", "1")),
            credentials,
            SystemClock(),
            reveal=True,
        )
        answer = await http.exchange(request)
        if isinstance(answer, ProviderResult):
            return answer
        document = answer.json_object()
        code = None if document is None else document.get("Code")
        reply = (
            VendorReply(code, code == "OK", str((document or {}).get("Message", "")))
            if isinstance(code, str)
            else None
        )
        return judge(answer, reply, ALIYUN_SMS_TABLE, vendor="Aliyun SMS", mask=credentials.mask)

    def create_session(
        self,
        account: AliyunSmsAccount,
        message: AliyunSmsMessage,
        credentials: Credentials,
        http: VendorHttp | None,
        clock: ExecutionClock,
    ) -> AliyunSmsSession:
        return AliyunSmsSession(
            base=self.base_url(OFFICIAL_HOST),
            sign_name=account.sign_name,
            message=message,
            http=http,
            credentials=credentials,
            clock=clock,
        )
