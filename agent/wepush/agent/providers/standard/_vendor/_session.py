"""The session shape shared by the HTTP-speaking standard providers.

A provider supplies three pure steps: ``render`` (Recipient → payload, no
credentials), ``outbound`` (payload → the exact wire request, with credentials,
signatures and tokens, or with them masked for a preview) and ``read_reply``
(the vendor's JSON answer → code and message). Cancellation, dry runs, previews,
transport failures and unexpected errors are handled here, once.
"""

from __future__ import annotations

import asyncio
from abc import abstractmethod
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, ClassVar

from yarl import URL

from wepush.agent.engine import ExecutionClock
from wepush.agent.providers.common import RenderProblem, UnknownVariableError, failed_preview
from wepush.agent.providers.spi import (
    CancellationToken,
    PreviewResult,
    ProviderPreviewRequest,
    ProviderResult,
    ProviderSendRequest,
    ProviderSession,
    RecipientRecord,
)

from ._credentials import MASK, Credentials
from ._errors import ErrorTable
from ._http import OutboundRequest, VendorHttp, VendorResponse
from ._replies import VendorReply, errcode_reply, judge
from ._token import AccessTokenCache

__all__ = ["Rendered", "TokenVendorSession", "VendorSession", "preview_send_request"]


@dataclass(frozen=True, slots=True)
class Rendered:
    """One Recipient's message before credentials are applied."""

    payload: Any
    label: str
    params: tuple[tuple[str, str], ...] = ()


def preview_send_request(request: ProviderPreviewRequest) -> ProviderSendRequest:
    """The first attempt of a send for the previewed Recipient (an empty one when none is given)."""
    recipient = request.recipient if request.recipient is not None else RecipientRecord("preview", 0)
    run_id = request.run_id or "preview"
    return ProviderSendRequest(
        run_id=run_id,
        item_id=recipient.item_id,
        attempt=1,
        recipient=recipient,
        message_config=request.message_config,
        idempotency_key=f"{run_id}:{recipient.item_id}",
        deadline=None,
    )


class VendorSession(ProviderSession):
    """THREAD_SAFE: concurrent sends share the connection pool; nothing else is mutable."""

    vendor: ClassVar[str] = "vendor"

    def __init__(
        self,
        *,
        table: ErrorTable,
        http: VendorHttp | None,
        credentials: Credentials,
        clock: ExecutionClock,
    ) -> None:
        self._table = table
        self._http = http
        self._credentials = credentials
        self._clock = clock
        self._closed = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}(dry_run={self._http is None}, closed={self._closed})"

    @property
    def dry_run(self) -> bool:
        return self._http is None

    @abstractmethod
    def render(self, request: ProviderSendRequest) -> Rendered:
        """The payload for ``request.recipient``; raises UnknownVariableError or RenderProblem."""

    @abstractmethod
    def outbound(
        self,
        rendered: Rendered,
        request: ProviderSendRequest,
        *,
        reveal: bool,
        access_token: str | None = None,
    ) -> OutboundRequest:
        """The wire request; with ``reveal=False`` every credential, signature and token is masked."""

    @abstractmethod
    def read_reply(self, document: dict[str, Any]) -> VendorReply | None:
        """The vendor's verdict from its JSON answer, or ``None`` when it carries none."""

    async def send(self, request: ProviderSendRequest, token: CancellationToken) -> ProviderResult:
        table = self._table
        if token.cancelled:
            return table.fail(table.local("CANCELLED"), "cancelled before the call")
        try:
            rendered = self.render(request)
        except (UnknownVariableError, RenderProblem) as exc:
            return table.fail(table.recipient_row(exc), str(exc))
        if self._http is None:
            return ProviderResult.ok("DRY_RUN", diagnostic=f"{rendered.label} rendered, not sent (dry run)")
        try:
            return await self.deliver(self._http, rendered, request, token)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # A provider bug must not leak a URL (it may hold a key or token) through the exception text.
            return table.fail(
                table.local("INTERNAL_ERROR"), f"unexpected {type(exc).__name__} in {self.vendor}"
            )

    async def deliver(
        self, http: VendorHttp, rendered: Rendered, request: ProviderSendRequest, token: CancellationToken
    ) -> ProviderResult:
        outbound = self.outbound(rendered, request, reveal=True)
        answer = await http.exchange(outbound, deadline=request.deadline, token=token)
        if isinstance(answer, ProviderResult):
            return answer
        return self.judge(answer)

    def reply_of(self, response: VendorResponse) -> VendorReply | None:
        document = response.json_object()
        return None if document is None else self.read_reply(document)

    def judge(self, response: VendorResponse) -> ProviderResult:
        return judge(
            response,
            self.reply_of(response),
            self._table,
            vendor=self.vendor,
            mask=self._credentials.mask,
            now=self._clock.now(),
        )

    async def preview(self, request: ProviderPreviewRequest) -> PreviewResult:
        """Exactly the request a send would make for ``request.recipient``, credentials masked."""
        send_request = preview_send_request(request)
        try:
            rendered = self.render(send_request)
        except (UnknownVariableError, RenderProblem) as exc:
            return failed_preview(self._table.recipient_row(exc).code, str(exc))
        outbound = self.outbound(rendered, send_request, reveal=False)
        body = "" if outbound.body is None else outbound.body.decode("utf-8", errors="replace")
        content_type = next((v for k, v in outbound.headers.items() if k.lower() == "content-type"), None)
        return PreviewResult(
            # Without a body (Aliyun) everything sent is in the URL shown in ``details``.
            content_type=content_type or "text/plain",
            rendered=self._credentials.mask(body),
            details={
                "method": outbound.method,
                "url": self._credentials.mask(str(outbound.url)),
                "headers": {k: self._credentials.mask(v) for k, v in outbound.headers.items()},
            },
        )

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self._http is not None:
                await self._http.close()
        finally:
            self._credentials.forget()


class TokenVendorSession(VendorSession):
    """Vendors whose send URL carries an access token obtained with the app credentials.

    The WeChat and WeCom application APIs: the payload is POSTed as JSON to
    ``send_url?access_token=…`` and the answer is ``{"errcode", "errmsg"}``.
    When the vendor says the token is invalid or expired (``token_codes``), the
    token is refreshed once and the call repeated once; a second rejection is
    reported, never retried again, so a broken token cannot loop.
    """

    def __init__(
        self,
        *,
        send_url: URL,
        tokens: AccessTokenCache,
        token_codes: Collection[str],
        table: ErrorTable,
        http: VendorHttp | None,
        credentials: Credentials,
        clock: ExecutionClock,
    ) -> None:
        super().__init__(table=table, http=http, credentials=credentials, clock=clock)
        self._send_url = send_url
        self._tokens = tokens
        self._token_codes = frozenset(token_codes)

    def outbound(
        self,
        rendered: Rendered,
        request: ProviderSendRequest,
        *,
        reveal: bool,
        access_token: str | None = None,
    ) -> OutboundRequest:
        token = access_token if reveal and access_token is not None else MASK
        return OutboundRequest.post_json(self._send_url.with_query({"access_token": token}), rendered.payload)

    def read_reply(self, document: dict[str, Any]) -> VendorReply | None:
        return errcode_reply(document)

    async def deliver(
        self, http: VendorHttp, rendered: Rendered, request: ProviderSendRequest, token: CancellationToken
    ) -> ProviderResult:
        # The token wait is bounded like the call itself: by the item's deadline and its cancellation.
        access = await self._tokens.current(deadline=request.deadline, token=token)
        if isinstance(access, ProviderResult):
            return access
        answer = await self._call(http, rendered, request, token, access)
        if not isinstance(answer, VendorResponse):
            return answer
        first = self.reply_of(answer)
        if first is None or first.code not in self._token_codes:
            return self.judge(answer)
        access = await self._tokens.refresh(access, deadline=request.deadline, token=token)
        if isinstance(access, ProviderResult):
            return access
        answer = await self._call(http, rendered, request, token, access)
        if not isinstance(answer, VendorResponse):
            return answer
        second = self.reply_of(answer)
        if second is not None and second.code in self._token_codes:
            row = self._table.for_vendor(second.code) or self._table.local("VENDOR_ERROR")
            return self._table.fail(
                row, f"{self.vendor} rejected the access token again after one refresh (code {second.code})"
            )
        return self.judge(answer)

    async def _call(
        self,
        http: VendorHttp,
        rendered: Rendered,
        request: ProviderSendRequest,
        token: CancellationToken,
        access: str,
    ) -> VendorResponse | ProviderResult:
        outbound = self.outbound(rendered, request, reveal=True, access_token=access)
        return await http.exchange(outbound, deadline=request.deadline, token=token)

    async def close(self) -> None:
        try:
            await self._tokens.close()
        finally:
            await super().close()
