"""Building the MIME message for one Recipient.

Values go into the HTML part HTML-escaped; header values that would contain a
line break (header injection) or another control character are refused, and the ``Message-ID`` is derived
from the item's idempotency key so every attempt of an item carries the same id.

A recipient's value can also smuggle a line break in as an RFC 2047 encoded word (``=?utf-8?q?=0D=0A…?=``):
the ``email`` package decodes encoded words in header values it is given and, before CPython 3.11.10
(CVE-2024-6923), writes the decoded line break out as it is. So encoded-word syntax in a header value is
refused too, and the serialised header block is checked to hold exactly the headers composed here.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import datetime
from email.headerregistry import Address
from email.message import EmailMessage
from email.policy import SMTP, SMTPUTF8
from email.utils import format_datetime

from wepush.agent.providers.spi import ProviderSendRequest
from wepush.agent.providers.standard._vendor import RenderProblem, html_escape, recipient_fields

from ._config import CONTROL_CHARACTERS, ENCODED_WORD, SmtpAccount, SmtpMessage

__all__ = ["Envelope", "compose", "message_id"]

_HEADER_NAME = re.compile(rb"^([!-9;-~]+):", re.MULTILINE)

_ADDRESS = re.compile(r"[^\s@<>()\[\],;:\"\\]+@[^\s@<>()\[\],;:\"\\]+\.[^\s@<>()\[\],;:\"\\]+")


@dataclass(frozen=True, slots=True)
class Envelope:
    sender: str
    recipient: str
    content: bytes
    smtputf8: bool
    message_id: str

    def __repr__(self) -> str:
        return f"Envelope(bytes={len(self.content)})"


def message_id(idempotency_key: str, from_address: str) -> str:
    digest = hashlib.sha256(idempotency_key.encode("utf-8")).hexdigest()[:32]
    return f"<{digest}@{from_address.rpartition('@')[2]}>"


def _address(value: object, field: str) -> str:
    if not isinstance(value, str):
        raise RenderProblem("RECIPIENT_VALUE_INVALID", f"field {field!r} is not an e-mail address")
    text = value.strip()
    if len(text) > 254 or not _ADDRESS.fullmatch(text):
        raise RenderProblem("RECIPIENT_VALUE_INVALID", f"field {field!r} is not a valid e-mail address")
    return text


def _mailbox(display_name: str, address: str) -> Address:
    """``address`` as a mailbox; built from its parts, because ``Address(addr_spec=...)`` refuses a
    non-ASCII local part under every policy, SMTPUTF8 included."""
    if address.isascii():
        return Address(display_name, addr_spec=address)
    local, _, domain = address.rpartition("@")
    return Address(display_name, username=local, domain=domain)


def compose(
    account: SmtpAccount, message: SmtpMessage, request: ProviderSendRequest, now: datetime
) -> Envelope:
    fields = recipient_fields(request.recipient)
    if message.to_field not in fields:
        raise RenderProblem("RECIPIENT_FIELD_MISSING", f"recipient has no field {message.to_field!r}")
    to_address = _address(fields[message.to_field], message.to_field)
    name = fields.get(message.name_field) if message.name_field else None
    subject = message.subject.render(fields)
    # The account's own header text was checked when it was saved; a control character here came from
    # this recipient's data. The email package refuses only line breaks, and a NUL or an escape sent on
    # would be refused by some servers and shown as garbage by others.
    if name is not None:
        _check_header_text(str(name), f"field {message.name_field!r}", "holds")
    _check_header_text(subject, "the subject", "would hold")
    smtputf8 = not (to_address.isascii() and account.from_address.isascii())
    # A non-ASCII address goes out under SMTPUTF8, its headers in UTF-8 (RFC 6532). The ASCII
    # policy cannot carry one: it refuses a non-ASCII local part and writes a non-ASCII domain as
    # an RFC 2047 encoded-word, which is not allowed inside an address.
    mail = EmailMessage(policy=SMTPUTF8 if smtputf8 else SMTP)
    try:
        mail["From"] = _mailbox(account.from_name or "", account.from_address)
        mail["To"] = _mailbox(str(name) if name else "", to_address)
        if account.reply_to:
            mail["Reply-To"] = account.reply_to
        mail["Subject"] = subject
    except (ValueError, IndexError) as exc:
        # The email package refuses malformed addresses (line breaks were refused above).
        raise RenderProblem(
            "RECIPIENT_VALUE_INVALID", f"a header value cannot be used: {type(exc).__name__}"
        ) from None
    mail["Date"] = format_datetime(now)
    mail_id = message_id(request.idempotency_key, account.from_address)
    mail["Message-ID"] = mail_id
    text = message.text.render(fields) if message.text is not None else None
    html = message.html.render(fields, html_escape) if message.html is not None else None
    if text is not None:
        mail.set_content(text)
        if html is not None:
            mail.add_alternative(html, subtype="html")
    elif html is not None:
        mail.set_content(html, subtype="html")
    content = mail.as_bytes()
    _require_composed_headers(mail, content)
    return Envelope(account.from_address, to_address, content, smtputf8, mail_id)


def _check_header_text(value: str, what: str, verb: str) -> None:
    if "\r" in value or "\n" in value:
        raise RenderProblem("RECIPIENT_VALUE_INVALID", f"{what} {verb} a line break")
    if CONTROL_CHARACTERS.search(value):
        raise RenderProblem("RECIPIENT_VALUE_INVALID", f"{what} {verb} a control character")
    if ENCODED_WORD.search(value):
        raise RenderProblem(
            "RECIPIENT_VALUE_INVALID",
            f"{what} {verb} an RFC 2047 encoded word (=?…?=), which mail clients decode",
        )


def _require_composed_headers(mail: EmailMessage, content: bytes) -> None:
    """Whatever got past the checks above, a header line the composition did not write (an injected
    ``Bcc``, a second ``Content-Type``) never reaches a server."""
    head = content.split(b"\r\n\r\n", 1)[0]
    written = [name.decode("ascii").lower() for name in _HEADER_NAME.findall(head)]
    composed = [name.lower() for name in mail]
    bare = head.replace(b"\r\n", b"")
    if sorted(written) != sorted(composed) or b"\r" in bare or b"\n" in bare:
        raise RenderProblem(
            "RECIPIENT_VALUE_INVALID", "a header value would break the message's header block"
        )
