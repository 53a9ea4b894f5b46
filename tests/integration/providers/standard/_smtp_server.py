"""A real SMTP server on loopback (aiosmtpd) with STARTTLS, implicit TLS and AUTH.

Certificates are generated per test session with ``cryptography``: a private CA
and a server certificate for 127.0.0.1 / localhost signed by it. Replies are
scripted per recipient address, so one server can produce every outcome.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import ipaddress
import socket
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

USERNAME = "mailer@example.test"
PASSWORD = "smtp-pass-Kx81-test"


@dataclass(frozen=True, slots=True)
class Pki:
    ca_pem: str
    cert_file: Path
    key_file: Path
    other_ca_pem: str

    def server_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.cert_file, self.key_file)
        return context


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _ca(common: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common))
        .issuer_name(_name(common))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def make_pki(directory: Path) -> Pki:
    ca_key, ca_cert = _ca("WePush test CA")
    _, other_ca = _ca("Somebody else's CA")
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("localhost"))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    cert_file, key_file = directory / "server.pem", directory / "server.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    pem = ca_cert.public_bytes(serialization.Encoding.PEM).decode("ascii")
    other = other_ca.public_bytes(serialization.Encoding.PEM).decode("ascii")
    return Pki(pem, cert_file, key_file, other)


@dataclass(frozen=True, slots=True)
class Reply:
    """A scripted answer at ``stage`` (``RCPT`` or ``DATA``), optionally after ``delay`` seconds.

    ``close_after`` accepts the message and then drops the connection, as an idle timeout would.
    """

    stage: str
    text: str
    delay: float = 0.0
    close_after: bool = False


@dataclass(slots=True)
class Received:
    mail_from: str
    rcpt_tos: list[str]
    content: bytes
    session_id: int
    tls: bool
    authenticated: bool


@dataclass
class ScriptedHandler:
    """Accepts everything unless a reply is scripted for the recipient address."""

    script: dict[str, Reply] = field(default_factory=dict)
    mail_replies: list[str] = field(default_factory=list)
    received: list[Received] = field(default_factory=list)
    sessions: set[int] = field(default_factory=set)
    closed: threading.Event = field(default_factory=threading.Event)

    async def handle_MAIL(
        self, server: Any, session: Any, envelope: Any, address: str, options: list[str]
    ) -> str:
        self.sessions.add(id(session))
        if self.mail_replies:
            return self.mail_replies.pop(0)
        envelope.mail_from = address
        envelope.mail_options.extend(options)
        return "250 OK"

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, options: list[str]
    ) -> str:
        reply = self.script.get(address)
        if reply is not None and reply.stage == "RCPT":
            return reply.text
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        reply = next((self.script[a] for a in envelope.rcpt_tos if a in self.script), None)
        if reply is not None and reply.stage == "DATA" and not reply.close_after:
            if reply.delay:
                await asyncio.sleep(reply.delay)
            return reply.text
        self.received.append(
            Received(
                envelope.mail_from,
                list(envelope.rcpt_tos),
                bytes(envelope.original_content or b""),
                id(session),
                session.ssl is not None,
                bool(session.authenticated),
            )
        )
        if reply is not None and reply.close_after:
            asyncio.get_running_loop().call_later(0.05, self._close, server)
        return "250 2.0.0 Message accepted"

    def _close(self, server: Any) -> None:
        server.transport.close()
        self.closed.set()


def _authenticator(server: Any, session: Any, envelope: Any, mechanism: str, auth_data: Any) -> AuthResult:
    ok = (
        isinstance(auth_data, LoginPassword)
        and auth_data.login.decode() == USERNAME
        and auth_data.password.decode() == PASSWORD
    )
    return AuthResult(success=ok, handled=False)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True, slots=True)
class SmtpServer:
    handler: ScriptedHandler
    port: int
    mode: str


@contextmanager
def smtp_server(pki: Pki, mode: str = "STARTTLS") -> Iterator[SmtpServer]:
    """``mode``: STARTTLS (required, AUTH after TLS), TLS (implicit, AUTH), PLAIN (no TLS, no AUTH)."""
    handler = ScriptedHandler()
    port = free_port()
    kwargs: dict[str, Any] = {"hostname": "127.0.0.1", "port": port, "server_hostname": "mx.wepush.test"}
    if mode == "STARTTLS":
        kwargs |= {
            "tls_context": pki.server_context(),
            "require_starttls": True,
            "authenticator": _authenticator,
            "auth_required": True,
        }
    elif mode == "TLS":
        kwargs |= {
            "ssl_context": pki.server_context(),
            "authenticator": _authenticator,
            "auth_require_tls": False,
        }
    elif mode == "NO_STARTTLS":
        kwargs |= {"authenticator": _authenticator, "auth_require_tls": False}
    controller = Controller(handler, **kwargs)
    controller.start()
    try:
        yield SmtpServer(handler, port, mode)
    finally:
        controller.stop()
