"""Group-robot webhook secrets, accepted bare or as the whole official webhook URL.

Users paste whichever the vendor console shows them. A URL is accepted only on
the official host and path, so a configured secret can never point a send
elsewhere, and the value is never echoed back: it is a credential.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from wepush.agent.providers.common import ConfigError, parse_url

from ._config import issue

__all__ = ["WebhookSecret"]


@dataclass(frozen=True, slots=True)
class WebhookSecret:
    """Where a robot's secret sits: account ``field``, and the ``query`` key of ``https://host/path``."""

    field: str
    pattern: re.Pattern[str]
    host: str
    path: str
    query: str
    #: Issue code for a malformed secret, and what a bare one is called in its message.
    invalid_code: str
    noun: str

    def of(self, value: str) -> str:
        """The secret in ``value``, or :class:`ConfigError` at ``/field``."""
        if "://" not in value:
            if self.pattern.fullmatch(value):
                return value
            raise self._refused(self.invalid_code, f"is neither {self.noun} nor a webhook URL")
        try:
            url = parse_url(value)
        except ValueError:
            raise self._refused(self.invalid_code, "is not a valid URL") from None
        if url.scheme != "https" or url.host != self.host or url.port != 443 or url.path != self.path:
            raise self._refused(
                "WEBHOOK_HOST_NOT_OFFICIAL", f"must be https://{self.host}{self.path}?{self.query}=…"
            )
        secret = url.query.get(self.query, "")
        if not self.pattern.fullmatch(secret):
            raise self._refused(self.invalid_code, f"the URL has no valid {self.query}")
        return secret

    def _refused(self, code: str, message: str) -> ConfigError:
        return ConfigError([issue(f"/{self.field}", code, message)])
