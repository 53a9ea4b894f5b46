"""The HTTP Provider session: one aiohttp ``ClientSession`` per Run.

Secrets are resolved once at open, turned into authentication headers and the
``SecretValue`` objects closed; the literal values are kept only to mask them
out of diagnostics and saved response bodies. Authentication headers are added
at send time and never appear in previews, results or reprs.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from datetime import datetime, timedelta

import aiohttp
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from wepush.agent.engine import ExecutionClock
from wepush.agent.providers.common import (
    RequestTimeouts,
    UnknownVariableError,
    await_cancellable,
    failed_preview,
    read_capped,
    while_connecting,
)
from wepush.agent.providers.spi import (
    CancellationToken,
    PreviewResult,
    ProviderPreviewRequest,
    ProviderResult,
    ProviderSendRequest,
    ProviderSession,
    RecipientRecord,
)

from ._address_policy import AddressPolicy, AddressRefusedError
from ._auth import AuthHeaders
from ._config import AccountConfig, MessageConfig
from ._errors import HTTP_ERROR_TABLE, map_status, parse_retry_after
from ._json_path import json_values_equal
from ._request import RecipientFields, RenderedRequest, RequestRenderer
from ._transport import TransportFailure, classify_exception, vet_url

__all__ = ["HttpProviderSession"]

_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
_SNIPPET_CHARS = 120


@dataclass(frozen=True, slots=True)
class _ResponseFacts:
    """What a result reports about the vendor's response besides success or failure."""

    external_request_id: str | None = None
    response_body: str | None = None
    response_truncated: bool = False


_NO_RESPONSE = _ResponseFacts()


def _ok(facts: _ResponseFacts) -> ProviderResult:
    return ProviderResult.ok(
        "OK",
        external_request_id=facts.external_request_id,
        response_body=facts.response_body,
        response_truncated=facts.response_truncated,
    )


def _fail(
    code: str,
    diagnostic: str,
    facts: _ResponseFacts = _NO_RESPONSE,
    retry_after: timedelta | None = None,
) -> ProviderResult:
    mapping = HTTP_ERROR_TABLE[code]
    return ProviderResult.failure(
        mapping.category,
        code,
        diagnostic,
        retry_after,
        mapping.retryable,
        external_request_id=facts.external_request_id,
        response_body=facts.response_body,
        response_truncated=facts.response_truncated,
    )


def _from_transport(failure: TransportFailure) -> ProviderResult:
    return ProviderResult.failure(
        failure.mapping.category, failure.mapping.code, failure.diagnostic, retryable=failure.retryable
    )


class HttpProviderSession(ProviderSession):
    """THREAD_SAFE: any number of concurrent ``send`` calls share the connection pool.

    ``open_worker`` keeps the SPI default (unsupported): the session is never split per worker.
    """

    def __init__(
        self,
        *,
        account: AccountConfig,
        message: MessageConfig,
        auth: AuthHeaders,
        policy: AddressPolicy,
        http: aiohttp.ClientSession | None,
        clock: ExecutionClock,
    ) -> None:
        self._account = account
        self._message = message
        self._auth = auth
        self._policy = policy
        self._http = http
        self._clock = clock
        self._renderer = RequestRenderer(account, message, auth.headers, auth.query)
        self._closed = False
        self._timeouts = RequestTimeouts(account.connect_timeout, account.request_timeout)

    def __repr__(self) -> str:
        return f"HttpProviderSession(origin={self._renderer.origin!r}, dry_run={self._http is None})"

    @property
    def dry_run(self) -> bool:
        return self._http is None

    async def send(self, request: ProviderSendRequest, token: CancellationToken) -> ProviderResult:
        if token.cancelled:
            return _fail("HTTP_CANCELLED", "cancelled before the request was sent")
        rendered = self._render(request.recipient)
        if isinstance(rendered, ProviderResult):
            return rendered
        http = self._http
        if http is None:
            return ProviderResult.ok("DRY_RUN", diagnostic=f"{rendered.method} rendered, not sent (dry run)")
        return await await_cancellable(
            token,
            lambda: self._exchange(http, rendered, request.deadline, token),
            lambda: _fail("HTTP_CANCELLED", "cancelled while the request was in flight"),
        )

    async def preview(self, request: ProviderPreviewRequest) -> PreviewResult:
        """Exactly what would be sent for ``request.recipient``, with secrets masked."""
        recipient = request.recipient if request.recipient is not None else RecipientRecord("preview", 0)
        rendered = self._render(recipient, credentials=False)
        if isinstance(rendered, ProviderResult):
            return failed_preview(rendered.provider_code, rendered.diagnostic)
        headers = {**dict(rendered.headers.items()), **self._auth.masked()}
        url = rendered.url.extend_query(self._auth.masked_query())
        body = "" if rendered.body is None else rendered.body.decode("utf-8", errors="replace")
        return PreviewResult(
            content_type=self._renderer.content_type or "application/octet-stream",
            rendered=body,
            details={"method": rendered.method, "url": str(url), "headers": headers},
        )

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._http is not None:
            await self._http.close()
        self._auth.forget()

    def _render(
        self, recipient: RecipientRecord, *, credentials: bool = True
    ) -> RenderedRequest | ProviderResult:
        try:
            return self._renderer.render(RecipientFields(recipient.fields), credentials=credentials)
        except UnknownVariableError as exc:
            return _fail(
                "HTTP_RECIPIENT_FIELD_MISSING", f"recipient has no field {exc.name!r} used by the template"
            )
        except (ValueError, TypeError) as exc:
            return _fail("HTTP_RECIPIENT_VALUE_INVALID", str(exc)[:200])

    async def _exchange(
        self,
        http: aiohttp.ClientSession,
        rendered: RenderedRequest,
        deadline: datetime | None,
        token: CancellationToken,
    ) -> ProviderResult:
        method, url, body = rendered.method, rendered.url, rendered.body
        headers: CIMultiDictProxy[str] | CIMultiDict[str] = rendered.headers
        origin = self._renderer.origin
        # The credential was granted to the configured origin: once a hop leaves it, it never comes
        # back, not even to a redirect within the foreign origin.
        within_granted_origin = True
        hops = 0
        token.nothing_sent_yet()  # until the first hop has a connection (see the except below)
        try:
            while True:
                timeout = self._timeouts.until(deadline, self._clock)
                async with http.request(
                    method, url, headers=headers, data=body, allow_redirects=False, timeout=timeout
                ) as response:
                    status = response.status
                    if status in _REDIRECT_STATUSES and not self._message.success.status_ok(status):
                        location = response.headers.get("Location")
                        if not self._account.allow_redirects or location is None:
                            return _fail("HTTP_REDIRECT_NOT_FOLLOWED", f"HTTP {status} redirect not followed")
                        hops += 1
                        if hops > self._account.max_redirects:
                            return _fail(
                                "HTTP_TOO_MANY_REDIRECTS",
                                f"more than {self._account.max_redirects} redirects",
                            )
                        try:
                            next_url = url.join(URL(location))
                            vet_url(next_url, self._policy)
                        except AddressRefusedError as exc:
                            return _fail("HTTP_REDIRECT_REFUSED", f"redirect refused: {exc.reason}")
                        except ValueError:
                            # A port out of range, a bracket left open, a host label that does not
                            # decode: the vendor's Location leads nowhere (and is not quoted: it may
                            # carry what the request did).
                            return _fail(
                                "HTTP_REDIRECT_NOT_FOLLOWED",
                                f"HTTP {status} redirect not followed: Location is not a usable URL",
                            )
                        if url.scheme == "https" and next_url.scheme != "https":
                            # Credentials would be dropped (another origin), but a 307/308 body, the
                            # message's own headers and the recipient's data would cross in plain text.
                            return _fail("HTTP_REDIRECT_REFUSED", "redirect refused: from https to http")
                        # The first hop reached the vendor: from here on the call may have sent.
                        token.sending()
                        method, body, headers = self._redirected(status, method, body, headers, url, next_url)
                        within_granted_origin = (
                            within_granted_origin and str(next_url.origin()) == self._renderer.origin
                        )
                        if self._auth.query and within_granted_origin:
                            next_url = next_url.update_query(dict(self._auth.query))
                        url = next_url
                        origin = str(url.origin())
                        continue
                    data, truncated = await read_capped(response, self._message.response_body_max_bytes)
                    return self._evaluate(status, response.headers, data, truncated)
        except asyncio.CancelledError as exc:
            # The engine's deadline (or a stop) cut the call off: tell it whether anything was sent.
            if not while_connecting(exc):
                token.sending()
            raise
        except Exception as exc:
            return _from_transport(classify_exception(exc, method, origin))

    def _redirected(
        self,
        status: int,
        method: str,
        body: bytes | None,
        headers: CIMultiDictProxy[str] | CIMultiDict[str],
        current: URL,
        target: URL,
    ) -> tuple[str, bytes | None, CIMultiDictProxy[str] | CIMultiDict[str]]:
        if status == 303 or (status in {301, 302} and method == "POST"):
            # Browser and RFC 9110 semantics: these redirects turn the request into a GET.
            method, body = ("HEAD" if method == "HEAD" else "GET"), None
            headers = headers.copy()
            headers.popall("Content-Type", None)
        if current.origin() != target.origin():
            # Credentials were granted to the configured origin, not wherever it points.
            headers = headers.copy()
            for name in self._auth.headers:
                headers.popall(name, None)
        return method, body, headers

    def _evaluate(
        self,
        status: int,
        headers: CIMultiDictProxy[str],
        data: bytes,
        truncated: bool,
    ) -> ProviderResult:
        message = self._message
        saved = (
            self._auth.mask(data.decode("utf-8", errors="replace")) if message.save_response_body else None
        )
        facts = _ResponseFacts(
            external_request_id=headers.get(message.external_request_id_header),
            response_body=saved,
            response_truncated=truncated and saved is not None,
        )
        if message.success.status_ok(status):
            if message.success.json_path is None:
                return _ok(facts)
            return self._evaluate_json(status, data, truncated, facts)
        if 300 <= status < 400:
            return _fail("HTTP_REDIRECT_NOT_FOLLOWED", f"HTTP {status} is not a success status", facts)
        mapping = map_status(status)
        retry_after = None
        if status in {429, 503}:
            retry_after = parse_retry_after(headers.get("Retry-After"), self._clock.now())
        return ProviderResult.failure(
            mapping.category,
            mapping.code,
            f"HTTP {status}{self._snippet(data)}",
            retry_after,
            mapping.retryable,
            external_request_id=facts.external_request_id,
            response_body=facts.response_body,
            response_truncated=facts.response_truncated,
        )

    def _evaluate_json(
        self, status: int, data: bytes, truncated: bool, facts: _ResponseFacts
    ) -> ProviderResult:
        success = self._message.success
        if success.json_path is None:
            return _ok(facts)
        if truncated:
            return _fail(
                "HTTP_RESPONSE_UNREADABLE",
                f"HTTP {status}: response exceeds responseBodyMaxBytes, success condition not evaluable",
                facts,
            )
        try:
            document = json.loads(data)
        except (ValueError, RecursionError):
            # RecursionError: nested deeper than the parser goes, which is no readable answer either.
            return _fail("HTTP_RESPONSE_UNREADABLE", f"HTTP {status}: response is not JSON", facts)
        found, value = success.json_path.find(document)
        if success.has_expected:
            matched = found and json_values_equal(value, success.expected)
        else:
            matched = found and value is not None and value is not False
        if matched:
            return _ok(facts)
        return _fail(
            "HTTP_SUCCESS_CONDITION_NOT_MET",
            f"HTTP {status}: {success.json_path.expression} did not match{self._snippet(data)}",
            facts,
        )

    def _snippet(self, data: bytes) -> str:
        if not data:
            return ""
        text = " ".join(data[: _SNIPPET_CHARS * 4].decode("utf-8", errors="replace").split())
        text = self._auth.mask(text)
        if len(text) > _SNIPPET_CHARS:
            text = text[:_SNIPPET_CHARS] + "…"
        return f": {text}"
