"""Aliyun SMS: one signed ``SendSms`` call (dysmsapi 2017-05-25) per Recipient.

Parameters travel in the query string, the body is empty, and every call gets a
fresh ``x-acs-signature-nonce`` and ``x-acs-date`` so a retry is signed anew.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any, ClassVar

from yarl import URL

from wepush.agent.engine import ExecutionClock
from wepush.agent.providers.spi import ProviderSendRequest
from wepush.agent.providers.standard._vendor import (
    MASK,
    Credentials,
    OutboundRequest,
    Rendered,
    VendorHttp,
    VendorReply,
    VendorSession,
    host_header,
    recipient_fields,
)

from ._config import AliyunSmsMessage, normalise_phone
from ._errors import ALIYUN_SMS_TABLE
from ._signing import sign_call

__all__ = ["API_VERSION", "OFFICIAL_HOST", "AliyunSmsSession", "signed_request"]

OFFICIAL_HOST = "dysmsapi.aliyuncs.com"
API_VERSION = "2017-05-25"


def signed_request(
    base: URL,
    action: str,
    params: Sequence[tuple[str, str]],
    credentials: Credentials,
    clock: ExecutionClock,
    *,
    reveal: bool,
) -> OutboundRequest:
    """A POST to ``/`` whose query and headers are signed (or, for previews, masked)."""
    host = host_header(base)
    signed = sign_call(
        method="POST",
        host=host,
        action=action,
        version=API_VERSION,
        params=params,
        access_key_id=credentials.get("accessKeyId"),
        access_key_secret=credentials.get("accessKeySecret"),
        now=clock.now(),
        nonce=uuid.uuid4().hex,
    )
    headers = dict(signed.headers)
    if not reveal:
        headers["Authorization"] = f"ACS3-HMAC-SHA256 Credential={MASK},SignedHeaders=…,Signature={MASK}"
    headers["Host"] = headers.pop("host")
    url = URL(f"{base.with_path('/')}?{signed.query}", encoded=True)
    # No body: aiohttp then adds no Content-Type, and the signed payload hash is that of b"".
    return OutboundRequest("POST", url, headers, None)


class AliyunSmsSession(VendorSession):
    vendor: ClassVar[str] = "Aliyun SMS"

    def __init__(
        self,
        *,
        base: URL,
        sign_name: str,
        message: AliyunSmsMessage,
        http: VendorHttp | None,
        credentials: Credentials,
        clock: ExecutionClock,
    ) -> None:
        super().__init__(table=ALIYUN_SMS_TABLE, http=http, credentials=credentials, clock=clock)
        self._base = base
        self._sign_name = message.sign_name or sign_name
        self._message = message

    def render(self, request: ProviderSendRequest) -> Rendered:
        fields = recipient_fields(request.recipient)
        m = self._message
        params = {name: template.render(fields) for name, template in m.params}
        query = [
            ("PhoneNumbers", normalise_phone(fields, m.phone_field)),
            ("SignName", self._sign_name),
            ("TemplateCode", m.template_code),
            ("OutId", request.item_id[:64]),
        ]
        if params:
            query.append(("TemplateParam", json.dumps(params, ensure_ascii=False, separators=(",", ":"))))
        return Rendered(None, "SendSms request", tuple(query))

    def outbound(
        self,
        rendered: Rendered,
        request: ProviderSendRequest,
        *,
        reveal: bool,
        access_token: str | None = None,
    ) -> OutboundRequest:
        return signed_request(
            self._base, "SendSms", rendered.params, self._credentials, self._clock, reveal=reveal
        )

    def read_reply(self, document: dict[str, Any]) -> VendorReply | None:
        code = document.get("Code")
        if not isinstance(code, str) or not code:
            return None
        request_id = document.get("BizId") or document.get("RequestId")
        return VendorReply(
            code, code == "OK", str(document.get("Message", "")), None if not request_id else str(request_id)
        )
