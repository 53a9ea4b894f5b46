"""The one Redactor every log line, diagnostic and error detail passes through.

The rules themselves (sensitive names, secret shapes in free text, JSON fields, the ``value`` of an
account secret update ``{"operation": "REPLACE", "value": ...}``) are the engine's :class:`SecretMasker`,
shared with the agent's diagnostics so both mask the same things. Exact secret values (a resolved account
password, a webhook URL) can be registered so they are scrubbed wherever they appear, including their
URL- and JSON-escaped forms; registration is reference-counted. This class adds what only the Service
needs: HTTP headers, URLs and exceptions.
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Iterable, Mapping
from typing import Final, overload

from wepush.agent.engine import REDACTION_MASK, SecretMasker, is_sensitive_name

__all__ = ["MASK", "Redactor", "is_sensitive_name"]

MASK: Final = REDACTION_MASK
_HEADER_WORD_SEPARATORS: Final = re.compile(r"[^a-z0-9]+")


def _is_sensitive_header(name: str) -> bool:
    # Headers are stricter than fields: any header mentioning "key" (X-Api-Key, X-Key-Id) or a word
    # starting with "auth" (X-Auth, X-Upstream-Auth, X-AuthToken) exists to carry a credential. "Author"
    # is the one common word that starts the same way and is not one.
    words = _HEADER_WORD_SEPARATORS.split(name.lower())
    return (
        is_sensitive_name(name)
        or any("key" in word for word in words)
        or any(word.startswith("auth") and not word.startswith("author") for word in words)
    )


class Redactor(SecretMasker):
    """Masks secrets in headers, URLs, JSON values, free text and exceptions. Safe to share across threads."""

    __slots__ = ()

    def is_sensitive_name(self, name: str) -> bool:
        return is_sensitive_name(name)

    @overload
    def headers(self, headers: Mapping[str, str]) -> dict[str, str]: ...

    @overload
    def headers(self, headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]: ...

    def headers(
        self, headers: Mapping[str, str] | Iterable[tuple[str, str]]
    ) -> dict[str, str] | list[tuple[str, str]]:
        """Mask sensitive header values; other values still get free-text redaction (Referer URLs...)."""
        if isinstance(headers, Mapping):
            return {name: self._header_value(name, value) for name, value in headers.items()}
        return [(name, self._header_value(name, value)) for name, value in headers]

    def _header_value(self, name: str, value: str) -> str:
        return MASK if _is_sensitive_header(name) else self.text(value)

    def url(self, url: str) -> str:
        """Mask userinfo, sensitive query/fragment parameters and any known secret shape in a URL."""
        return self.text(url)

    def redact(self, value: object) -> object:
        """Redact anything a log call may carry: text, mappings, sequences, exceptions."""
        if isinstance(value, BaseException):
            return self.text(str(value))
        return self.json(value)

    def exception(self, exc: BaseException) -> str:
        """The formatted traceback of ``exc`` (with its chain), redacted."""
        return self.text("".join(traceback.format_exception(exc)))
