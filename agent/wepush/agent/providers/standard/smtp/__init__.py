"""``wepush.smtp``: e-mail through an SMTP server (STARTTLS, implicit TLS or explicitly allowed plain)."""

from __future__ import annotations

from ._compose import compose, message_id
from ._errors import SMTP_TABLE, reply_row
from ._factory import SmtpProviderFactory
from ._session import SmtpSession

__all__ = ["SMTP_TABLE", "SmtpProviderFactory", "SmtpSession", "compose", "message_id", "reply_row"]
