"""The SMTP provider against a real aiosmtpd server on loopback: STARTTLS, implicit TLS, AUTH, reuse."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from email import message_from_bytes, message_from_string, policy
from email.message import EmailMessage

import pytest

from tests.fixtures.blackhole import blackhole
from wepush.agent.engine import MappingSecretResolver, RecipientRecord
from wepush.agent.providers.spi import ConfigDocument, ErrorCategory, ProviderPreviewRequest, SecretRef
from wepush.agent.providers.standard.smtp import SmtpSession, message_id

from ._http_cases import recipient_values
from ._smtp_server import PASSWORD, Pki, Reply, SmtpServer, smtp_server
from ._stages import SmtpStage, open_session, send

C = ErrorCategory


def _parsed(raw: bytes) -> EmailMessage:
    parsed = message_from_bytes(raw, policy=policy.default)
    assert isinstance(parsed, EmailMessage)
    return parsed


def _parsed_utf8(raw: bytes) -> EmailMessage:
    """A message whose headers are UTF-8 (RFC 6532), as an SMTPUTF8 server reads it."""
    parsed = message_from_string(raw.decode("utf-8"), policy=policy.default)
    assert isinstance(parsed, EmailMessage)
    return parsed


async def test_starttls_and_auth_deliver_the_rendered_message(smtp: SmtpServer, pki: Pki) -> None:
    stage = SmtpStage(smtp, pki)

    result = await stage.send_one(record=stage.recipient(7))

    assert result.success
    [received] = smtp.handler.received
    assert (received.tls, received.authenticated) == (True, True)
    assert (received.mail_from, received.rcpt_tos) == ("noreply@wepush.test", ["user7@example.test"])
    mail = _parsed(received.content)
    values = recipient_values(7)
    assert mail["From"] == "WePush 通知 <noreply@wepush.test>"
    assert mail["To"].addresses[0].addr_spec == "user7@example.test"
    assert mail["To"].addresses[0].display_name == values["name"]
    assert mail["Reply-To"] == "support@wepush.test"
    assert mail["Subject"] == f"Order {values['code']} for {values['name']}"
    assert (
        mail["Message-ID"]
        == message_id("run-std:item-7", "noreply@wepush.test")
        == result.external_request_id
    )
    text = mail.get_body(("plain",))
    html = mail.get_body(("html",))
    assert text is not None
    assert html is not None
    assert text.get_content().strip() == f"Hello {values['name']}, your code is {values['code']}."
    assert "<b>User 7 &quot;quoted&quot; &lt;b&gt;</b>" in html.get_content()


async def test_one_connection_is_reused_for_every_item_of_a_session(smtp: SmtpServer, pki: Pki) -> None:
    stage = SmtpStage(smtp, pki)
    message = stage.message()
    session = await open_session(stage.factory, stage.account(), message, stage.resolver())
    assert isinstance(session, SmtpSession)
    try:
        results = [await send(session, stage.recipient(n), message) for n in range(1, 6)]
        opened = session.connections_opened
    finally:
        await session.close()

    assert all(r.success for r in results)
    assert opened == 1
    assert len(smtp.handler.sessions) == 1
    assert len(smtp.handler.received) == 5


async def test_worker_sessions_each_hold_their_own_connection(smtp: SmtpServer, pki: Pki) -> None:
    stage = SmtpStage(smtp, pki)
    message = stage.message()
    session = await open_session(stage.factory, stage.account(), message, stage.resolver())
    workers = [await session.open_worker() for _ in range(3)]
    try:
        results = await asyncio.gather(
            *(
                send(worker, stage.recipient(10 * i + n), message)
                for i, worker in enumerate(workers)
                for n in (1, 2)
            )
        )
    finally:
        for worker in workers:
            await worker.close()
        await session.close()

    assert all(r.success for r in results)
    assert len(smtp.handler.sessions) == 3


async def test_a_connection_the_server_closed_while_idle_is_reopened_once(smtp: SmtpServer, pki: Pki) -> None:
    stage = SmtpStage(smtp, pki)
    smtp.handler.script["user1@example.test"] = Reply("DATA", "", close_after=True)
    message = stage.message()
    session = await open_session(stage.factory, stage.account(), message, stage.resolver())
    assert isinstance(session, SmtpSession)
    try:
        first = await send(session, stage.recipient(1), message)
        assert await asyncio.to_thread(smtp.handler.closed.wait, 5)
        second = await send(session, stage.recipient(2), message)
        opened = session.connections_opened
    finally:
        await session.close()

    assert first.success
    assert second.success
    assert opened == 2
    assert [r.rcpt_tos for r in smtp.handler.received] == [["user1@example.test"], ["user2@example.test"]]


async def test_implicit_tls_delivers(pki: Pki) -> None:
    with smtp_server(pki, "TLS") as server:
        stage = SmtpStage(server, pki)
        result = await stage.send_one(account=stage.account(security="TLS"))
        assert result.success
        assert server.handler.received[0].authenticated


async def test_plain_needs_explicit_allowance_and_never_authenticates(pki: Pki) -> None:
    with smtp_server(pki, "PLAIN") as server:
        stage = SmtpStage(server, pki)
        refused = stage.factory.validate_account(
            stage.account(security="PLAIN", username=None, password=None)
        )
        with_auth = stage.factory.validate_account(stage.account(security="PLAIN", allowPlaintext=True))
        plain = stage.account(security="PLAIN", allowPlaintext=True, username=None, password=None)
        result = await stage.send_one(account=plain)

        assert [i.path for i in refused.issues] == ["/allowPlaintext"]
        assert [i.path for i in with_auth.issues] == ["/username"]
        assert result.success
        assert (server.handler.received[0].tls, server.handler.received[0].authenticated) == (False, False)


async def test_starttls_demanded_but_not_offered_fails_before_credentials_are_sent(pki: Pki) -> None:
    with smtp_server(pki, "NO_STARTTLS") as server:
        stage = SmtpStage(server, pki)
        result = await stage.send_one()

        assert (result.category, result.provider_code) == (C.INVALID_REQUEST, "SMTP_STARTTLS_UNAVAILABLE")
        assert server.handler.received == []


async def test_a_certificate_from_an_untrusted_ca_fails_the_tls_handshake(smtp: SmtpServer, pki: Pki) -> None:
    stage = SmtpStage(smtp, pki)

    result = await stage.send_one(account=stage.account(tlsCaCertificate=pki.other_ca_pem))

    assert (result.category, result.provider_code, result.retryable) == (C.NETWORK, "SMTP_TLS_FAILED", False)
    assert smtp.handler.received == []


@pytest.mark.parametrize(
    ("reply", "category", "code", "retryable"),
    [
        (Reply("RCPT", "550 5.1.1 No such user"), C.RECIPIENT_INVALID, "SMTP_RECIPIENT_REJECTED", False),
        (
            Reply("RCPT", "553 5.1.3 Bad mailbox syntax"),
            C.RECIPIENT_INVALID,
            "SMTP_RECIPIENT_REJECTED",
            False,
        ),
        (Reply("RCPT", "550 5.7.1 Relaying denied"), C.AUTHORIZATION, "SMTP_RELAY_DENIED", False),
        (Reply("RCPT", "421 4.7.0 Too many connections"), C.RATE_LIMITED, "SMTP_THROTTLED", True),
        (Reply("RCPT", "454 4.7.0 Temporary throttling"), C.RATE_LIMITED, "SMTP_THROTTLED", True),
        (Reply("RCPT", "450 4.2.1 Mailbox busy"), C.TEMPORARY_REMOTE, "SMTP_TEMPORARY_FAILURE", True),
        (Reply("DATA", "451 4.3.0 Local error"), C.TEMPORARY_REMOTE, "SMTP_TEMPORARY_FAILURE", True),
        (Reply("DATA", "552 5.3.4 Message too big"), C.PERMANENT_REMOTE, "SMTP_PERMANENT_FAILURE", False),
        (Reply("DATA", "421 4.4.2 Closing"), C.RATE_LIMITED, "SMTP_THROTTLED", True),
        (Reply("DATA", "399 Huh"), C.UNKNOWN, "SMTP_OUTCOME_UNKNOWN", False),
    ],
    ids=lambda v: v.text if isinstance(v, Reply) else None,
)
async def test_server_replies_are_classified_by_code_and_stage(
    smtp: SmtpServer, pki: Pki, reply: Reply, category: ErrorCategory, code: str, retryable: bool
) -> None:
    stage = SmtpStage(smtp, pki)
    smtp.handler.script["target@example.test"] = reply
    record = RecipientRecord.of("item-1", 1, {**recipient_values(1), "email": "target@example.test"})

    result = await stage.send_one(record=record)

    assert (result.category, result.provider_code, result.retryable) == (category, code, retryable)
    assert reply.text.split()[0] in (result.diagnostic or "")


async def test_a_refused_sender_and_refused_credentials_are_classified(smtp: SmtpServer, pki: Pki) -> None:
    stage = SmtpStage(smtp, pki)
    smtp.handler.mail_replies.append("553 5.1.8 Sender address rejected")

    sender = await stage.send_one()
    credentials = await stage.send_one(account=stage.account(password={"$secret": "wrong-password"}))

    assert (sender.category, sender.provider_code) == (C.INVALID_REQUEST, "SMTP_SENDER_REJECTED")
    assert (credentials.category, credentials.provider_code) == (C.AUTHENTICATION, "SMTP_AUTH_FAILED")
    assert PASSWORD not in (credentials.diagnostic or "")


async def test_a_reply_timeout_after_data_is_not_retried(smtp: SmtpServer, pki: Pki) -> None:
    stage = SmtpStage(smtp, pki)
    smtp.handler.script["slow@example.test"] = Reply("DATA", "250 late", delay=1.5)
    record = RecipientRecord.of("item-1", 1, {**recipient_values(1), "email": "slow@example.test"})

    result = await stage.send_one(account=stage.account(requestTimeout="PT0.3S"), record=record)

    assert (result.category, result.provider_code, result.retryable) == (C.TIMEOUT, "SMTP_TIMEOUT", False)


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"email": "not-an-address"}, "SMTP_RECIPIENT_VALUE_INVALID"),
        ({"email": "a@b.test\r\nBcc: victim@example.test"}, "SMTP_RECIPIENT_VALUE_INVALID"),
        (
            {"email": "a@example.test", "name": "x", "code": "1\r\nBcc: victim@example.test"},
            "SMTP_RECIPIENT_VALUE_INVALID",
        ),
        # Other control characters are no header injection, but RFC 5322 has no place for them in a header.
        ({"email": "a@example.test", "name": "x\x00y", "code": "1"}, "SMTP_RECIPIENT_VALUE_INVALID"),
        ({"email": "a@example.test", "name": "x", "code": "1\x1b[31m"}, "SMTP_RECIPIENT_VALUE_INVALID"),
        # Encoded words the email package would decode into a line break (CVE-2024-6923) or a mailbox.
        (
            {
                "email": "a@example.test",
                "name": "x",
                "code": "=?utf-8?q?42=0D=0AReply-To=3A_attacker=40evil=2Eexample=0D=0A=0D=0A<h1>x</h1>?=",
            },
            "SMTP_RECIPIENT_VALUE_INVALID",
        ),
        (
            {"email": "a@example.test", "name": "=?utf-8?q?x=0D=0ABcc=3A_evil=40example.test?=", "code": "1"},
            "SMTP_RECIPIENT_VALUE_INVALID",
        ),
        (
            {"email": "a@example.test", "name": "=?utf-8?b?QWRtaW4gPGFkbWluQGJhbmsuY29tPg==?=", "code": "1"},
            "SMTP_RECIPIENT_VALUE_INVALID",
        ),
        ({"name": "no address"}, "SMTP_RECIPIENT_FIELD_MISSING"),
        ({"email": "a@example.test", "name": "no code"}, "SMTP_RECIPIENT_FIELD_MISSING"),
    ],
)
async def test_recipient_problems_are_refused_before_contacting_the_server(
    smtp: SmtpServer, pki: Pki, fields: dict[str, str], code: str
) -> None:
    stage = SmtpStage(smtp, pki)

    result = await stage.send_one(record=RecipientRecord.of("item-1", 1, fields))

    assert (result.category, result.provider_code) == (C.RECIPIENT_INVALID, code)
    assert smtp.handler.sessions == set()


@pytest.mark.parametrize(
    ("fields", "diagnostic"),
    [
        ({"code": "3\r\nBcc: evil@example.test"}, "the subject would hold a line break"),
        (
            {"code": "=?utf-8?q?3=0D=0ABcc=3A_evil=40example.test?="},
            "the subject would hold an RFC 2047 encoded word",
        ),
        ({"name": "x\nBcc: evil@example.test"}, "field 'name' holds a line break"),
    ],
)
async def test_a_refused_header_value_is_named_in_the_diagnostic(
    smtp: SmtpServer, pki: Pki, fields: dict[str, str], diagnostic: str
) -> None:
    stage = SmtpStage(smtp, pki)
    values = {"email": "a@example.test", "name": "x", "code": "1", **fields}

    result = await stage.send_one(record=RecipientRecord.of("item-1", 1, values))

    assert result.provider_code == "SMTP_RECIPIENT_VALUE_INVALID"
    assert result.diagnostic is not None
    assert diagnostic in result.diagnostic


async def test_dry_run_and_preview_show_the_message_and_never_connect(smtp: SmtpServer, pki: Pki) -> None:
    stage = SmtpStage(smtp, pki)
    message = stage.message()
    session = await open_session(stage.factory, stage.account(), message, stage.resolver(), dry_run=True)
    try:
        result = await send(session, stage.recipient(2), message)
        preview = await session.preview(ProviderPreviewRequest(message, stage.recipient(2)))
    finally:
        await session.close()

    assert (result.success, result.provider_code) == (True, "DRY_RUN")
    assert smtp.handler.sessions == set()
    assert preview.content_type == "message/rfc822"
    mail = _parsed(preview.rendered.encode())
    assert mail["Subject"] == f"Order {recipient_values(2)['code']} for {recipient_values(2)['name']}"
    assert preview.details["envelopeTo"] == "user2@example.test"
    assert PASSWORD not in preview.rendered + str(preview.details)


async def test_connection_test_authenticates_and_sends_nothing(smtp: SmtpServer, pki: Pki) -> None:
    stage = SmtpStage(smtp, pki)
    wrong: ConfigDocument = stage.account(password={"$secret": "wrong-password"})

    accepted = await stage.factory.test_connection(stage.account(), stage.resolver(), timedelta(seconds=5))
    refused = await stage.factory.test_connection(wrong, stage.resolver(), timedelta(seconds=5))

    assert accepted.ok
    assert (refused.ok, refused.category) == (False, C.AUTHENTICATION)
    assert smtp.handler.received == []
    assert PASSWORD not in refused.message


async def test_a_non_ascii_password_is_reported_by_the_test_and_each_send_not_raised(
    smtp: SmtpServer, pki: Pki
) -> None:
    stage = SmtpStage(smtp, pki)
    password = "pässwörd-密码"
    secrets = MappingSecretResolver({SecretRef("default", "smtp-password"): password})
    message = stage.message()

    tested = await stage.factory.test_connection(stage.account(), secrets, timedelta(seconds=5))
    session = await open_session(stage.factory, stage.account(), message, secrets)
    try:
        sent = await send(session, stage.recipient(1), message)
    finally:
        await session.close()

    assert (tested.ok, tested.category) == (False, C.INVALID_REQUEST)
    assert "non-ASCII" in tested.message
    assert (sent.category, sent.provider_code) == (C.INVALID_REQUEST, "SMTP_AUTH_UNAVAILABLE")
    assert password not in tested.message + (sent.diagnostic or "")
    assert smtp.handler.received == []


@pytest.mark.parametrize("address", ["user@例子.test", "用户@example.test"])
async def test_a_non_ascii_address_goes_out_under_smtputf8_with_a_readable_to_header(
    smtp: SmtpServer, pki: Pki, address: str
) -> None:
    stage = SmtpStage(smtp, pki)

    result = await stage.send_one(
        record=RecipientRecord.of("i", 1, {**recipient_values(1), "email": address})
    )

    assert result.success, result
    [received] = smtp.handler.received
    assert received.rcpt_tos == [address]
    [to_line] = [line for line in received.content.split(b"\r\n") if line.startswith(b"To:")]
    # The ASCII policy wrote "<user@=?utf-8?b?5L6L5a2Q?=.test>": no encoded-word is allowed in an address.
    assert to_line.endswith(f"<{address}>".encode())
    mail = _parsed_utf8(received.content)
    assert mail["To"].addresses[0].addr_spec == address
    assert mail["To"].addresses[0].display_name == recipient_values(1)["name"]


async def test_a_non_ascii_sender_address_is_not_blamed_on_the_recipient(smtp: SmtpServer, pki: Pki) -> None:
    stage = SmtpStage(smtp, pki)

    result = await stage.send_one(account=stage.account(fromAddress="通知@wepush.test"))

    assert result.success, result
    [received] = smtp.handler.received
    assert _parsed_utf8(received.content)["From"].addresses[0].addr_spec == "通知@wepush.test"


async def test_a_send_gives_up_at_its_deadline_not_after_the_configured_timeouts(pki: Pki) -> None:
    """The engine gives up on a call at the item's deadline, but the worker thread went on for the
    account's timeouts (QA: 10 s past a 3 s deadline), holding the connection the next item waits for."""
    with smtp_server(pki) as server, blackhole() as port:
        stage = SmtpStage(server, pki)
        account = stage.account(port=port, connectTimeout="PT60S", requestTimeout="PT60S")
        session = await open_session(stage.factory, account, stage.message(), stage.resolver())
        try:
            deadline = datetime.now(UTC) + timedelta(seconds=1)
            # The deadline is 1 s away; without it the connect would wait the account's 60 s.
            async with asyncio.timeout(8):
                result = await send(session, stage.recipient(1), stage.message(), deadline=deadline)
        finally:
            await session.close()

    assert (result.category, result.provider_code) == (C.NETWORK, "SMTP_CONNECT_TIMEOUT")
