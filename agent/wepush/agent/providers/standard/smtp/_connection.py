"""One blocking SMTP client connection, driven from worker threads (``asyncio.to_thread``).

The connection is opened on first use and reused for later items. A
``threading.Lock`` guards it, because an abandoned ``to_thread`` call (its task
cancelled) keeps running and must not overlap the next one. Failures before DATA
leave nothing sent; a connection the server closed while idle is noticed at MAIL
FROM and reopened once.
"""

from __future__ import annotations

import smtplib
import ssl
import threading
import time
from datetime import timedelta

from wepush.agent.providers.spi import ProviderResult
from wepush.agent.providers.standard._vendor import Credentials, ErrorRow, snippet

from ._compose import Envelope
from ._config import Security, SmtpAccount, tls_context
from ._errors import SMTP_TABLE, reply_row

__all__ = ["SmtpConnection"]


class _Failure(Exception):
    """A classified failure; ``drop`` closes the connection, ``stale`` allows one reconnect."""

    def __init__(self, result: ProviderResult, drop: bool = True, stale: bool = False) -> None:
        super().__init__(result.provider_code)
        self.result = result
        self.drop = drop
        self.stale = stale


def _timed_out(exc: BaseException) -> bool:
    """smtplib turns a read timeout into SMTPServerDisconnected; the timeout survives as the context."""
    seen: BaseException | None = exc
    for _ in range(4):
        if seen is None:
            return False
        if isinstance(seen, TimeoutError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _text(response: bytes | str) -> str:
    return response.decode("utf-8", errors="replace") if isinstance(response, bytes) else response


class SmtpConnection:
    def __init__(self, account: SmtpAccount, credentials: Credentials) -> None:
        self._account = account
        self._credentials = credentials
        self._context: ssl.SSLContext | None = (
            None if account.security is Security.PLAIN else tls_context(account.ca_certificate)
        )
        self._lock = threading.Lock()
        self._smtp: smtplib.SMTP | None = None
        self._until: float | None = None
        self.opened = 0

    def __repr__(self) -> str:
        return f"SmtpConnection(host={self._account.host!r}, open={self._smtp is not None})"

    def _fail(
        self, row: ErrorRow | str, diagnostic: str, *, drop: bool = True, stale: bool = False
    ) -> _Failure:
        result = SMTP_TABLE.fail(row, snippet(diagnostic, self._credentials.mask))
        return _Failure(result, drop, stale)

    def _refusal(self, stage: str, code: int, response: bytes | str, *, drop: bool = False) -> _Failure:
        row = reply_row(stage, code, _text(response))
        # 421 announces that the server is closing the channel.
        return self._fail(row, f"{stage} refused: {code} {_text(response)}", drop=drop or code == 421)

    # ------------------------------------------------------------------ public, called in worker threads

    def deliver(self, envelope: Envelope, budget: float | None = None) -> ProviderResult:
        """``budget``: seconds until the item's deadline. The engine gives up on the call then, but this
        thread would go on for up to the configured timeouts (holding the connection's lock, so the
        next item waited too): the socket's timeouts are cut to the budget instead."""
        with self._lock:
            self._until = None if budget is None else time.monotonic() + budget
            try:
                return self._deliver(envelope)
            finally:
                self._until = None

    def _limit(self, configured: timedelta) -> float:
        """A socket timeout: the configured one, cut to what is left of the budget."""
        seconds = configured.total_seconds()
        if self._until is None:
            return seconds
        return max(0.001, min(seconds, self._until - time.monotonic()))

    def _deliver(self, envelope: Envelope) -> ProviderResult:
        for attempt in (1, 2):
            reused = self._smtp is not None
            try:
                smtp = self._smtp if self._smtp is not None else self._open()
                self._smtp = smtp
                return self._transaction(smtp, envelope)
            except _Failure as failure:
                if failure.drop:
                    self._discard()
                if not (failure.stale and reused and attempt == 1):
                    return failure.result
        return SMTP_TABLE.fail("SMTP_DISCONNECTED", "the server closed the connection again")

    def verify(self) -> ProviderResult:
        """Connect, secure, authenticate and quit (a connection test; nothing is sent)."""
        with self._lock:
            try:
                smtp = self._open()
            except _Failure as failure:
                return failure.result
            self._smtp = smtp
            self._discard()
            return ProviderResult.ok("OK")

    def close(self) -> None:
        with self._lock:
            self._discard()

    # ------------------------------------------------------------------ internals

    def _discard(self) -> None:
        smtp, self._smtp = self._smtp, None
        if smtp is None:
            return
        try:
            smtp.quit()
        except (smtplib.SMTPException, OSError):
            smtp.close()

    def _connect(self) -> smtplib.SMTP:
        account = self._account
        timeout = self._limit(account.connect_timeout)
        where = f"{account.host}:{account.port}"
        try:
            if account.security is Security.TLS:
                smtp: smtplib.SMTP = smtplib.SMTP_SSL(
                    account.host,
                    account.port,
                    local_hostname=account.helo_name,
                    timeout=timeout,
                    context=self._context,
                )
            else:
                smtp = smtplib.SMTP(
                    account.host, account.port, local_hostname=account.helo_name, timeout=timeout
                )
        except smtplib.SMTPConnectError as exc:
            raise self._refusal("GREETING", exc.smtp_code, exc.smtp_error, drop=True) from None
        except ssl.SSLError:
            raise self._fail("SMTP_TLS_FAILED", f"TLS handshake with {where} failed") from None
        except TimeoutError:
            raise self._fail("SMTP_CONNECT_TIMEOUT", f"connecting to {where} timed out") from None
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            raise self._fail("SMTP_CONNECT_FAILED", f"cannot connect to {where}: {reason}") from None
        if smtp.sock is not None:
            smtp.sock.settimeout(self._limit(account.request_timeout))
        self.opened += 1
        return smtp

    def _open(self) -> smtplib.SMTP:
        smtp = self._connect()
        try:
            self._handshake(smtp)
        except BaseException:
            smtp.close()
            raise
        return smtp

    def _handshake(self, smtp: smtplib.SMTP) -> None:
        account = self._account
        stage = "EHLO"
        try:
            code, response = smtp.ehlo()
            if code != 250:
                raise self._refusal(stage, code, response, drop=True)
            if account.security is Security.STARTTLS:
                if not smtp.has_extn("starttls"):
                    raise self._fail("SMTP_STARTTLS_UNAVAILABLE", f"{account.host} does not offer STARTTLS")
                stage = "STARTTLS"
                smtp.starttls(context=self._context)
                smtp.ehlo()
            password = self._credentials.optional("password")
            if account.username is not None and password is not None:
                stage = "AUTH"
                if not smtp.has_extn("auth"):
                    raise self._fail("SMTP_AUTH_UNAVAILABLE", f"{account.host} offers no AUTH")
                smtp.login(account.username, password)
        except _Failure:
            raise
        except smtplib.SMTPAuthenticationError as exc:
            raise self._refusal("AUTH", exc.smtp_code, exc.smtp_error, drop=True) from None
        except smtplib.SMTPResponseException as exc:
            raise self._refusal(stage, exc.smtp_code, exc.smtp_error, drop=True) from None
        except smtplib.SMTPServerDisconnected as exc:
            if _timed_out(exc):
                raise self._fail(
                    "SMTP_COMMAND_TIMEOUT", f"{account.host} did not answer {stage} in time"
                ) from None
            raise self._fail(
                "SMTP_DISCONNECTED", f"{account.host} closed the connection during {stage}"
            ) from None
        except UnicodeEncodeError:
            # smtplib writes AUTH responses as ASCII: a username or password with any other
            # character never reaches the server. The text is not quoted: it holds the password.
            raise self._fail(
                "SMTP_AUTH_UNAVAILABLE",
                f"{account.host}: the username or password has non-ASCII characters, "
                "which this client cannot send in SMTP AUTH",
            ) from None
        except smtplib.SMTPException:
            # smtplib's "no suitable authentication method" and similar negotiation failures.
            raise self._fail("SMTP_AUTH_UNAVAILABLE", f"{account.host}: no usable AUTH mechanism") from None
        except ssl.SSLError:
            raise self._fail("SMTP_TLS_FAILED", f"TLS negotiation with {account.host} failed") from None
        except TimeoutError:
            raise self._fail(
                "SMTP_COMMAND_TIMEOUT", f"{account.host} did not answer {stage} in time"
            ) from None
        except OSError:
            raise self._fail(
                "SMTP_DISCONNECTED", f"connection to {account.host} failed during {stage}"
            ) from None

    def _reset(self, smtp: smtplib.SMTP) -> None:
        try:
            smtp.rset()
        except (smtplib.SMTPException, OSError):
            self._discard()

    def _transaction(self, smtp: smtplib.SMTP, envelope: Envelope) -> ProviderResult:
        host = self._account.host
        if smtp.sock is not None:  # a reused connection keeps the last item's cut timeout otherwise
            smtp.sock.settimeout(self._limit(self._account.request_timeout))
        if envelope.smtputf8 and not smtp.has_extn("smtputf8"):
            raise self._fail(
                "SMTP_RECIPIENT_VALUE_INVALID",
                f"{host} cannot take non-ASCII addresses (no SMTPUTF8)",
                drop=False,
            )
        stage = "MAIL"
        try:
            code, response = smtp.mail(envelope.sender, ["SMTPUTF8"] if envelope.smtputf8 else [])
            if code != 250:
                self._reset(smtp)
                raise self._refusal("MAIL", code, response)
            stage = "RCPT"
            code, response = smtp.rcpt(envelope.recipient)
            if code not in (250, 251):
                self._reset(smtp)
                raise self._refusal("RCPT", code, response)
            stage = "DATA"
            code, response = smtp.data(envelope.content)
        except _Failure:
            raise
        except smtplib.SMTPDataError as exc:
            # DATA itself was refused (no 354): the content was never transmitted.
            self._reset(smtp)
            raise self._refusal("DATA", exc.smtp_code, exc.smtp_error) from None
        except OSError as exc:
            if _timed_out(exc):
                if stage == "DATA":
                    raise self._fail("SMTP_TIMEOUT", f"{host} did not confirm the message in time") from None
                raise self._fail("SMTP_COMMAND_TIMEOUT", f"{host} did not answer {stage} in time") from None
            if stage == "DATA":
                raise self._fail(
                    "SMTP_CONNECTION_LOST", f"connection to {host} dropped during DATA"
                ) from None
            raise self._fail(
                "SMTP_DISCONNECTED", f"{host} closed the connection at {stage}", stale=stage == "MAIL"
            ) from None
        if code == 250:
            return ProviderResult.ok("OK", external_request_id=envelope.message_id)
        if 400 <= code < 600:
            raise self._refusal("DATA", code, response)
        raise self._fail("SMTP_OUTCOME_UNKNOWN", f"unexpected reply {code} to the end of DATA")
