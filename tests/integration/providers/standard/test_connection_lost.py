"""Every standard provider when the vendor takes the whole message and hangs up without an answer.

The message may have been delivered, so the result is the provider's ``*_CONNECTION_LOST`` row with
category UNKNOWN (its item ends UNKNOWN, not FAILED); a connection that drops before the message was
handed over stays NETWORK.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tests.fixtures.blackhole import blackhole
from tests.integration.providers._dropping_server import DroppingServer
from wepush.agent.engine import MappingSecretResolver, RecipientRecord
from wepush.agent.providers.spi import (
    CancellationToken,
    ConfigDocument,
    ErrorCategory,
    ProviderResult,
    ProviderSession,
)
from wepush.agent.providers.standard import SmtpProviderFactory
from wepush.agent.providers.testing import RecordedRequest, ScriptedResponse, VendorServer

from ._http_cases import HTTP_CASES, HttpCase, recipient_values
from ._stages import TokenIssuer, open_session, send

C = ErrorCategory


@pytest.mark.parametrize("case", HTTP_CASES, ids=str)
async def test_a_send_whose_connection_drops_after_the_request_is_an_unknown_outcome(case: HttpCase) -> None:
    tokens = TokenIssuer()

    def answer(request: RecordedRequest) -> ScriptedResponse | None:
        if request.path == case.token_path:
            return tokens.grant()
        return None

    async with DroppingServer(answer) as vendor:
        message = case.message()
        session = await open_session(
            case.make_factory(vendor.base_url), case.account(), message, case.resolver()
        )
        try:
            result = await send(session, case.recipient(1), message)
        finally:
            await session.close()

    assert (result.success, result.category, result.provider_code, result.retryable) == (
        False,
        C.UNKNOWN,
        f"{case.table.prefix}_CONNECTION_LOST",
        False,
    )
    assert [r.path for r in vendor.dropped] == [case.send_path], "the vendor has the message"


@pytest.mark.parametrize("case", [c for c in HTTP_CASES if c.token_path is None], ids=str)
async def test_a_request_timeout_that_runs_out_while_connecting_sent_nothing(case: HttpCase) -> None:
    """A host that drops the SYNs and a request timeout shorter than the connect timeout: the request's
    timer runs out first, while connecting. Nothing was sent: ``*_CONNECT_TIMEOUT`` (NETWORK), not
    ``*_TIMEOUT`` ("the message may have been delivered")."""
    with blackhole() as port:
        message = case.message()
        session = await open_session(
            case.make_factory(f"http://127.0.0.1:{port}"),
            case.account(connectTimeout="PT5S", requestTimeout="PT1S"),
            message,
            case.resolver(),
        )
        try:
            result = await send(session, case.recipient(1), message)
        finally:
            await session.close()

    assert (result.category, result.provider_code, result.retryable) == (
        C.NETWORK,
        f"{case.table.prefix}_CONNECT_TIMEOUT",
        True,
    )


async def _cut_off(
    session: ProviderSession, case: HttpCase, message: ConfigDocument, ready: Callable[[], Awaitable[object]]
) -> bool:
    """Send, and once ``ready()`` says so cut the call off as the engine's deadline does (the token, then
    the task); answer what the call told its token: whether it had sent nothing."""
    token = CancellationToken()
    call = asyncio.create_task(send(session, case.recipient(1), message, token))
    try:
        await ready()
        token.cancel("the item deadline passed")
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
    finally:
        await session.close()
    return token.nothing_sent


@pytest.mark.parametrize("case", [c for c in HTTP_CASES if c.token_path is None], ids=str)
async def test_a_call_cut_off_tells_its_token_whether_it_had_sent_anything(case: HttpCase) -> None:
    """What the engine reads when its deadline cuts a call off: nothing sent while still connecting (the
    item is FAILED), maybe sent once the request went out (UNKNOWN)."""
    message = case.message()
    with blackhole() as port:
        factory = case.make_factory(f"http://127.0.0.1:{port}")
        session = await open_session(factory, case.account(), message, case.resolver())
        assert await _cut_off(session, case, message, lambda: asyncio.sleep(0.3))

    async with VendorServer(default=ScriptedResponse(200, delay_seconds=30)) as vendor:
        session = await open_session(
            case.make_factory(vendor.base_url), case.account(), message, case.resolver()
        )
        assert not await _cut_off(session, case, message, lambda: vendor.wait_for_requests(1))


class DroppingSmtpServer:
    """A plain-text SMTP server that accepts everything and hangs up at ``drop_at``: at ``RCPT``
    (nothing handed over yet) or after reading the message at ``DATA`` (without confirming it)."""

    def __init__(self, drop_at: str) -> None:
        self.drop_at = drop_at
        self.messages: list[bytes] = []
        self.port = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            writer.write(b"220 mx.wepush.test ESMTP\r\n")
            while line := await reader.readline():
                verb = line[:4].upper()
                if verb == self.drop_at.encode():
                    if verb == b"DATA":
                        writer.write(b"354 go ahead\r\n")
                        self.messages.append(await reader.readuntil(b"\r\n.\r\n"))
                    return
                if verb in (b"EHLO", b"HELO"):
                    writer.write(b"250-mx.wepush.test\r\n250 8BITMIME\r\n")
                elif verb == b"QUIT":
                    writer.write(b"221 bye\r\n")
                    return
                else:
                    writer.write(b"250 OK\r\n")
                await writer.drain()
        finally:
            writer.close()


def _plain_account(port: int) -> ConfigDocument:
    body: dict[str, Any] = {
        "host": "127.0.0.1",
        "port": port,
        "security": "PLAIN",
        "allowPlaintext": True,
        "fromAddress": "noreply@wepush.test",
        "connectTimeout": "PT3S",
        "requestTimeout": "PT5S",
    }
    return ConfigDocument.from_json("wepush.smtp/account", "1", body)


async def _smtp_send(drop_at: str) -> tuple[ProviderResult, DroppingSmtpServer]:
    smtp = DroppingSmtpServer(drop_at)
    server = await asyncio.start_server(smtp.serve, "127.0.0.1", 0)
    port = int(server.sockets[0].getsockname()[1])
    message = ConfigDocument.from_json("wepush.smtp/message", "1", {"subject": "Hi", "textBody": "Hello"})
    try:
        session = await open_session(
            SmtpProviderFactory(), _plain_account(port), message, MappingSecretResolver({})
        )
        try:
            record = RecipientRecord.of("item-1", 1, recipient_values(1))
            return await send(session, record, message), smtp
        finally:
            await session.close()
    finally:
        server.close()
        await server.wait_closed()


async def test_an_smtp_connection_dropped_after_the_message_was_sent_is_an_unknown_outcome() -> None:
    result, smtp = await _smtp_send("DATA")

    assert (result.category, result.provider_code, result.retryable) == (
        C.UNKNOWN,
        "SMTP_CONNECTION_LOST",
        False,
    )
    [content] = smtp.messages
    assert b"Hello" in content, "the server has the message"


async def test_an_smtp_connection_dropped_before_data_is_a_network_failure() -> None:
    result, smtp = await _smtp_send("RCPT")

    assert (result.category, result.provider_code, result.retryable) == (
        C.NETWORK,
        "SMTP_DISCONNECTED",
        True,
    )
    assert smtp.messages == []
