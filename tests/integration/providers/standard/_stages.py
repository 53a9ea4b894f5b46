"""The shared harness: a running local vendor and the provider configured against it.

A *stage* is one provider plus its local vendor (a scripted HTTP server or a real
SMTP server). The contract suite, the engine runs and the leak checks are
written once against the :class:`Stage` protocol and run for every provider.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import datetime
from typing import Any, Literal, Protocol

from wepush.agent.engine import (
    ConcurrencyPolicy,
    ExecutionClock,
    ExecutionPolicies,
    MappingSecretResolver,
    RecipientRecord,
    SystemClock,
)
from wepush.agent.providers.spi import (
    CancellationToken,
    ConfigDocument,
    ErrorCategory,
    ProviderFactory,
    ProviderOpenContext,
    ProviderResult,
    ProviderSendRequest,
    ProviderSession,
    SecretRef,
)
from wepush.agent.providers.standard import SmtpProviderFactory
from wepush.agent.providers.standard._vendor import ErrorTable
from wepush.agent.providers.standard.smtp import SMTP_TABLE
from wepush.agent.providers.testing import (
    ContractSubject,
    InvalidConfig,
    RecordedRequest,
    Scenario,
    ScriptedResponse,
    VendorServer,
)

from ._http_cases import HttpCase, recipient_values
from ._smtp_server import PASSWORD, USERNAME, Pki, Reply, SmtpServer

C = ErrorCategory


def unused_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def open_session(
    factory: ProviderFactory,
    account: ConfigDocument,
    message: ConfigDocument,
    secrets: MappingSecretResolver,
    *,
    dry_run: bool = False,
    concurrency: int = 8,
    clock: ExecutionClock | None = None,
) -> ProviderSession:
    return await factory.open(
        ProviderOpenContext(
            run_id="run-std",
            account_config=account,
            message_config=message,
            secrets=secrets,
            policies=ExecutionPolicies(
                concurrency=ConcurrencyPolicy(min=1, max=concurrency, target=concurrency)
            ),
            dry_run=dry_run,
            clock=clock if clock is not None else SystemClock(),
        )
    )


async def send(
    session: ProviderSession,
    record: RecipientRecord,
    message: ConfigDocument,
    token: CancellationToken | None = None,
    *,
    deadline: datetime | None = None,
) -> ProviderResult:
    request = ProviderSendRequest(
        "run-std", record.item_id, 1, record, message, f"run-std:{record.item_id}", deadline
    )
    return await session.send(request, token if token is not None else CancellationToken())


class Stage(Protocol):
    @property
    def provider_id(self) -> str: ...

    @property
    def table(self) -> ErrorTable: ...

    @property
    def factory(self) -> ProviderFactory: ...

    def account(self, **overrides: Any) -> ConfigDocument: ...

    def message(self, **overrides: Any) -> ConfigDocument: ...

    def resolver(self) -> MappingSecretResolver: ...

    def recipient(self, n: int) -> RecipientRecord: ...

    def deliveries(self) -> int: ...

    def secret_literals(self) -> tuple[str, ...]: ...

    def invalid_configs(self) -> tuple[list[InvalidConfig], list[InvalidConfig]]: ...

    async def scenario(self, category: ErrorCategory) -> ProviderResult: ...


def contract_subject(stage: Stage) -> ContractSubject:
    """The provider contract suite's view of a stage.

    INTERNAL is the fallback for a defect inside the provider and cannot be
    provoked from outside; unit tests drive that path directly.
    """
    claimed = stage.table.categories - {C.INTERNAL}
    invalid_accounts, invalid_messages = stage.invalid_configs()

    def scenario(category: ErrorCategory) -> Scenario:
        async def run() -> ProviderResult:
            return await stage.scenario(category)

        return run

    return ContractSubject(
        factory=stage.factory,
        account=stage.account(),
        message=stage.message(),
        secrets=stage.resolver(),
        recipient=stage.recipient,
        invalid_accounts=invalid_accounts,
        invalid_messages=invalid_messages,
        claimed_categories=claimed,
        scenarios={category: scenario(category) for category in claimed},
    )


class TokenIssuer:
    """The vendor's access-token state: which tokens it issued and still accepts."""

    def __init__(self) -> None:
        self.issued: list[str] = []
        self.valid: set[str] = set()
        self.reject_all = False
        self.grant_answers: deque[ScriptedResponse] = deque()

    def grant(self) -> ScriptedResponse:
        if self.grant_answers:
            return self.grant_answers.popleft()
        token = f"TOKEN-{len(self.issued) + 1}-7f3a9c"
        self.issued.append(token)
        self.valid.add(token)
        return ScriptedResponse(
            200, json={"errcode": 0, "errmsg": "ok", "access_token": token, "expires_in": 7200}
        )

    def accepts(self, token: str | None) -> bool:
        return not self.reject_all and token in self.valid

    def expire_all(self) -> None:
        self.valid.clear()


class BreakingRelay:
    """A loopback TCP relay in front of a vendor server that breaks the answers to one path.

    Every connection is relayed byte for byte, except that for the next ``times`` requests
    whose target is ``path`` (each the first request on its connection, as a fresh fetch is)
    the vendor's answer is broken: ``"cut"`` passes on its head and a few bytes of its body and
    then aborts the connection (dropped mid-response); ``"garble"`` answers a line that is not
    HTTP instead. Use as ``async with``.
    """

    def __init__(self, upstream_port: int, path: str, how: Literal["cut", "garble"], times: int) -> None:
        self._upstream_port = upstream_port
        self._path = path.encode("ascii")
        self._how = how
        self.remaining = times
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._handlers: set[asyncio.Task[Any]] = set()

    @property
    def base_url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def __aenter__(self) -> BreakingRelay:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *_exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for writer in tuple(self._writers):
            writer.close()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        await self._server.wait_closed()

    async def _serve(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        self._writers.add(client_writer)
        upstream_writer: asyncio.StreamWriter | None = None
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self._upstream_port)
            self._writers.add(upstream_writer)
            head = await client_reader.readuntil(b"\r\n\r\n")
            upstream_writer.write(head)
            if head.split(b" ", 2)[1].split(b"?", 1)[0] == self._path and self.remaining > 0:
                self.remaining -= 1
                answer = await upstream_reader.readuntil(b"\r\n\r\n")
                if self._how == "cut":
                    client_writer.write(answer + await upstream_reader.read(8))
                else:
                    client_writer.write(b"SSH-2.0-NotHttp\r\n\r\n")
                await client_writer.drain()
                client_writer.transport.abort()
                return
            await asyncio.gather(
                self._pump(client_reader, upstream_writer), self._pump(upstream_reader, client_writer)
            )
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            for writer in (client_writer, upstream_writer):
                if writer is not None:
                    writer.close()
                    self._writers.discard(writer)
            self._handlers.discard(task)

    @staticmethod
    async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while chunk := await reader.read(65536):
                writer.write(chunk)
                await writer.drain()
        finally:
            writer.close()


class HttpStage:
    """An HTTP vendor provider against a :class:`VendorServer` that behaves like the vendor."""

    def __init__(self, case: HttpCase, vendor: VendorServer) -> None:
        self.case = case
        self.vendor = vendor
        self.provider_id = case.provider_id
        self.table = case.table
        self.tokens = TokenIssuer()
        self.factory = case.make_factory(vendor.base_url)
        vendor.respond_with(self._respond)

    def _respond(self, request: RecordedRequest) -> ScriptedResponse:
        case = self.case
        if case.token_path is not None and request.path == case.token_path:
            return self.tokens.grant()
        if request.path == case.send_path:
            if case.token_path is not None and not self.tokens.accepts(request.query.get("access_token")):
                return case.error_answer(case.expired_code, "access_token expired")
            return case.success(request)
        return ScriptedResponse(404, json={"errcode": 404, "errmsg": "no such API"})

    def hold_token_endpoint(self) -> asyncio.Event:
        """Hold every token request until the returned event is set: a token endpoint that hangs.

        Set the event before the vendor server stops, or its shutdown waits for the held answers.
        """
        release = asyncio.Event()

        async def respond(request: RecordedRequest) -> ScriptedResponse:
            if request.path == self.case.token_path:
                await release.wait()
            return self._respond(request)

        self.vendor.respond_with(respond)
        return release

    @contextlib.asynccontextmanager
    async def break_token_endpoint(
        self, how: Literal["cut", "garble"], times: int = 1
    ) -> AsyncIterator[ProviderFactory]:
        """The provider reaching the vendor through a :class:`BreakingRelay` that breaks the next
        ``times`` token answers (the vendor still receives those requests and issues tokens)."""
        assert self.case.token_path is not None
        async with BreakingRelay(self.vendor.port, self.case.token_path, how, times) as relay:
            yield self.case.make_factory(relay.base_url)

    def sends(self) -> list[RecordedRequest]:
        return [r for r in self.vendor.requests if r.path == self.case.send_path]

    def token_fetches(self) -> list[RecordedRequest]:
        return [r for r in self.vendor.requests if r.path == self.case.token_path]

    def deliveries(self) -> int:
        return len(self.sends())

    def account(self, **overrides: Any) -> ConfigDocument:
        return self.case.account(**overrides)

    def message(self, **overrides: Any) -> ConfigDocument:
        return self.case.message(**overrides)

    def resolver(self) -> MappingSecretResolver:
        return self.case.resolver()

    def recipient(self, n: int) -> RecipientRecord:
        return self.case.recipient(n)

    def secret_literals(self) -> tuple[str, ...]:
        return (*self.case.secrets.values(), *self.tokens.issued)

    def invalid_configs(self) -> tuple[list[InvalidConfig], list[InvalidConfig]]:
        doc = ConfigDocument.from_json
        return (
            [InvalidConfig(doc("a", "1", dict(raw)), path) for raw, path in self.case.invalid_accounts],
            [InvalidConfig(doc("m", "1", dict(raw)), path) for raw, path in self.case.invalid_messages],
        )

    async def send_one(
        self,
        *,
        factory: ProviderFactory | None = None,
        account: ConfigDocument | None = None,
        record: RecipientRecord | None = None,
        token: CancellationToken | None = None,
    ) -> ProviderResult:
        message = self.message()
        session = await open_session(
            factory or self.factory, account or self.account(), message, self.resolver()
        )
        try:
            return await send(session, record or self.recipient(1), message, token)
        finally:
            await session.close()

    def vendor_answer(self, category: ErrorCategory) -> ScriptedResponse | None:
        """A vendor answer that must produce ``category``: a listed vendor code first, else an HTTP status."""
        for vendor_code, _code, listed in self.case.vendor_codes():
            if listed is category and vendor_code not in self._token_codes():
                return self.case.error_answer(vendor_code, "scripted failure")
        statuses = {
            C.AUTHENTICATION: 401,
            C.AUTHORIZATION: 403,
            C.RATE_LIMITED: 429,
            C.TEMPORARY_REMOTE: 503,
            C.PERMANENT_REMOTE: 404,
        }
        status = statuses.get(category)
        return None if status is None else ScriptedResponse(status, body=b"gateway says no")

    def _token_codes(self) -> frozenset[str]:
        if self.case.token_path is None:
            return frozenset()
        return frozenset(self.table[f"{self.table.prefix}_ACCESS_TOKEN_REJECTED"].vendor_codes)

    async def scenario(self, category: ErrorCategory) -> ProviderResult:
        path = self.case.send_path
        if category is C.CANCELLED:
            cancelled = CancellationToken()
            cancelled.cancel("contract")
            return await self.send_one(token=cancelled)
        if category is C.NETWORK:
            return await self.send_one(factory=self.case.make_factory(f"http://127.0.0.1:{unused_port()}"))
        if category is C.TIMEOUT:
            self.vendor.enqueue(path, ScriptedResponse(200, json={}, delay_seconds=5))
            return await self.send_one(account=self.account(requestTimeout="PT0.3S"))
        if category is C.UNKNOWN:
            self.vendor.enqueue(path, ScriptedResponse(200, body=b"<html>proxy page</html>"))
            return await self.send_one()
        answer = self.vendor_answer(category)
        if answer is None and category is C.RECIPIENT_INVALID:
            record = RecipientRecord.of("bad", 1, dict(self.case.bad_recipient))
            return await self.send_one(record=record)
        assert answer is not None, f"no way to provoke {category.value} for {self.provider_id}"
        self.vendor.enqueue(path, answer)
        return await self.send_one()


class SmtpStage:
    """The SMTP provider against a real aiosmtpd server (STARTTLS required, AUTH required)."""

    provider_id = "wepush.smtp"
    table = SMTP_TABLE

    def __init__(self, server: SmtpServer, pki: Pki) -> None:
        self.server = server
        self.pki = pki
        self.factory = SmtpProviderFactory()

    def account(self, **overrides: Any) -> ConfigDocument:
        body: dict[str, Any] = {
            "host": "127.0.0.1",
            "port": self.server.port,
            "security": "STARTTLS",
            "username": USERNAME,
            "password": {"$secret": "smtp-password"},
            "fromAddress": "noreply@wepush.test",
            "fromName": "WePush 通知",
            "replyTo": "support@wepush.test",
            "heloName": "agent.wepush.test",
            "tlsCaCertificate": self.pki.ca_pem,
            "connectTimeout": "PT3S",
            "requestTimeout": "PT5S",
        }
        body.update(overrides)
        return ConfigDocument.from_json(
            "wepush.smtp/account", "1", {k: v for k, v in body.items() if v is not None}
        )

    def message(self, **overrides: Any) -> ConfigDocument:
        body = {
            "subject": "Order {{code}} for {{name}}",
            "textBody": "Hello {{name}}, your code is {{code}}.",
            "htmlBody": "<p>Hello <b>{{name}}</b>, your code is {{code}}.</p>",
            "nameField": "name",
        }
        body.update(overrides)
        return ConfigDocument.from_json("wepush.smtp/message", "1", body)

    def resolver(self) -> MappingSecretResolver:
        return MappingSecretResolver(
            {
                SecretRef("default", "smtp-password"): PASSWORD,
                SecretRef("default", "wrong-password"): "not-it",
            }
        )

    def recipient(self, n: int) -> RecipientRecord:
        return RecipientRecord.of(f"item-{n}", n, recipient_values(n))

    def deliveries(self) -> int:
        return len(self.server.handler.received)

    def secret_literals(self) -> tuple[str, ...]:
        return (PASSWORD,)

    def invalid_configs(self) -> tuple[list[InvalidConfig], list[InvalidConfig]]:
        doc = ConfigDocument.from_json
        return (
            [
                InvalidConfig(
                    doc("a", "1", {"host": "h", "fromAddress": "a@b.c", "security": "PLAIN"}),
                    "/allowPlaintext",
                ),
                InvalidConfig(
                    doc("a", "1", {"host": "h", "fromAddress": "a@b.c", "username": "u"}), "/password"
                ),
            ],
            [
                InvalidConfig(doc("m", "1", {"subject": "s"}), ""),
                InvalidConfig(doc("m", "1", {"subject": "{{", "textBody": "x"}), "/subject"),
            ],
        )

    async def send_one(
        self,
        *,
        account: ConfigDocument | None = None,
        record: RecipientRecord | None = None,
        token: CancellationToken | None = None,
    ) -> ProviderResult:
        message = self.message()
        session = await open_session(self.factory, account or self.account(), message, self.resolver())
        try:
            return await send(session, record or self.recipient(1), message, token)
        finally:
            await session.close()

    def _scripted(self, category: ErrorCategory, reply: Reply) -> RecipientRecord:
        address = f"{category.value.lower().replace('_', '-')}@example.test"
        self.server.handler.script[address] = reply
        return RecipientRecord.of(f"item-{category.value}", 1, {**recipient_values(1), "email": address})

    async def scenario(self, category: ErrorCategory) -> ProviderResult:
        handlers: Mapping[ErrorCategory, Callable[[], Any]] = {
            C.AUTHENTICATION: lambda: self.send_one(
                account=self.account(password={"$secret": "wrong-password"})
            ),
            C.AUTHORIZATION: lambda: self.send_one(
                record=self._scripted(category, Reply("RCPT", "550 5.7.1 Relaying denied"))
            ),
            C.RECIPIENT_INVALID: lambda: self.send_one(
                record=self._scripted(category, Reply("RCPT", "550 5.1.1 No such user"))
            ),
            C.RATE_LIMITED: lambda: self.send_one(
                record=self._scripted(category, Reply("RCPT", "421 4.7.0 Slow down"))
            ),
            C.TEMPORARY_REMOTE: lambda: self.send_one(
                record=self._scripted(category, Reply("RCPT", "451 4.3.0 Try later"))
            ),
            C.PERMANENT_REMOTE: lambda: self.send_one(
                record=self._scripted(category, Reply("DATA", "554 5.6.0 Rejected"))
            ),
            C.UNKNOWN: lambda: self.send_one(
                record=self._scripted(category, Reply("DATA", "399 What is this"))
            ),
            C.NETWORK: lambda: self.send_one(account=self.account(port=unused_port())),
            C.TIMEOUT: lambda: self.send_one(
                account=self.account(requestTimeout="PT0.3S"),
                record=self._scripted(category, Reply("DATA", "250 late", delay=1.5)),
            ),
        }
        if category is C.INVALID_REQUEST:
            self.server.handler.mail_replies.append("553 5.1.8 Sender address rejected")
            return await self.send_one()
        if category is C.CANCELLED:
            cancelled = CancellationToken()
            cancelled.cancel("contract")
            return await self.send_one(token=cancelled)
        result: ProviderResult = await handlers[category]()
        return result
