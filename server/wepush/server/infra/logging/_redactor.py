"""The one Redactor every log line, diagnostic and error detail passes through.

It masks, by *name*, sensitive HTTP headers, URL query parameters and JSON fields (recursively,
including the ``value`` of an account secret update ``{"operation": "REPLACE", "value": ...}``), and, by
*shape*, secrets inside free text: WePush tokens (``wpn_``/``wpa_``/``wpe_``), ``Authorization`` schemes
(``Bearer``, ``Basic``, ``Enrollment``), URL userinfo, ``name=value`` pairs with sensitive names and PEM
private keys. Exact secret values (a resolved account password, a webhook URL) can be registered so they
are scrubbed wherever they appear, including their URL- and JSON-escaped forms.
"""

from __future__ import annotations

import json
import re
import threading
import traceback
from collections.abc import Iterable, Mapping
from typing import Final, overload
from urllib.parse import quote, unquote, urlsplit

__all__ = ["MASK", "Redactor", "is_sensitive_name"]

MASK: Final = "***"

# A name is sensitive when its normalized form (lower case, letters and digits only) contains one of these.
_SENSITIVE_FRAGMENTS: Final = (
    "token",
    "secret",
    "password",
    "passwd",
    "passphrase",
    "credential",
    "signature",
    "apikey",
    "privatekey",
    "accesskey",
    "authorization",
    "cookie",
    "sessionid",
)
_SENSITIVE_EXACT: Final = frozenset({"key", "sign", "sig", "pwd", "pass", "auth", "otp", "pin", "dsn"})
# Identifiers and metadata *about* secrets: useful in diagnostics and not secret themselves.
_SAFE_NAMES: Final = frozenset(
    {
        "secretid",
        "secrettype",
        "secretref",
        "secretrefs",
        "secretversion",
        "tokenid",
        "tokentype",
        "tokenkind",
        "tokenprefix",
        "prefixhint",
        "keyversion",
        "credentialid",
        "credentialtype",
    }
)
# Inside a sensitive field these keep their value: they say *whether* a secret is set, not what it is.
_SECRET_METADATA_KEYS: Final = frozenset({"operation", "configured", "updatedat"})
_SECRET_OPERATIONS: Final = frozenset({"REPLACE", "KEEP", "SET", "CLEAR"})
_MIN_REGISTERED_LENGTH: Final = 4

_NON_ALNUM = re.compile(r"[^a-z0-9]")
_PEM_PRIVATE_KEY = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.DOTALL
)
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>`]+")
_AUTH_SCHEME = re.compile(r"\b(Bearer|Basic|Enrollment|Digest)([ \t]+)[A-Za-z0-9._~+/=:-]{6,}", re.IGNORECASE)
_WEPUSH_TOKEN = re.compile(r"(?<![A-Za-z0-9])(wp[nae])_[A-Za-z0-9_-]{6,}")
_NAME_VALUE = re.compile(
    r"(?<![A-Za-z0-9_.-])([A-Za-z_][A-Za-z0-9_.-]{0,63})"
    r"(\\?[\"']?[ \t]*[=:][ \t]*\\?[\"']?)"
    r"([^\s\"'&,;<>{}\[\]\\]+)"
)


def _normalize_name(name: str) -> str:
    return _NON_ALNUM.sub("", name.lower())


def is_sensitive_name(name: str) -> bool:
    """Whether a field / parameter / header called ``name`` holds a secret (``apiKey``, ``x-auth-token``)."""
    normalized = _normalize_name(name)
    if not normalized or normalized in _SAFE_NAMES:
        return False
    if normalized in _SENSITIVE_EXACT or normalized.endswith("key"):
        return True
    return any(fragment in normalized for fragment in _SENSITIVE_FRAGMENTS)


def _is_sensitive_header(name: str) -> bool:
    # Headers are stricter than fields: any header mentioning "key" (X-Api-Key, X-Key-Id) is masked.
    return is_sensitive_name(name) or "key" in _normalize_name(name)


class Redactor:
    """Masks secrets in headers, URLs, JSON values, free text and exceptions. Safe to share across threads."""

    __slots__ = ("_lock", "_pattern", "_values")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: frozenset[str] = frozenset()
        self._pattern: re.Pattern[str] | None = None

    def __repr__(self) -> str:
        return f"Redactor(registered_values={len(self._values)})"

    # ----------------------------------------------------------------- registered exact values

    def add_secret_value(self, value: str | bytes | bytearray) -> None:
        """Scrub this exact value (and its URL/JSON-escaped forms) from everything redacted from now on.

        Values shorter than 4 characters are ignored: masking every ``"abc"`` would garble logs without
        protecting anything that guessing would not already reveal.
        """
        variants = self._variants(value)
        if variants:
            with self._lock:
                self._rebuild(self._values | variants)

    def discard_secret_value(self, value: str | bytes | bytearray) -> None:
        """Forget a value registered earlier (e.g. when the Run that needed it has finished)."""
        variants = self._variants(value)
        if variants:
            with self._lock:
                self._rebuild(self._values - variants)

    @staticmethod
    def _variants(value: str | bytes | bytearray) -> frozenset[str]:
        if isinstance(value, (bytes, bytearray)):
            try:
                value = bytes(value).decode("utf-8")
            except UnicodeDecodeError:
                return frozenset()
        if len(value) < _MIN_REGISTERED_LENGTH:
            return frozenset()
        return frozenset({value, quote(value, safe=""), quote(value, safe="/:"), json.dumps(value)[1:-1]})

    def _rebuild(self, values: frozenset[str]) -> None:
        self._values = values
        # Longest first, so a value that contains another is masked whole.
        ordered = sorted(values, key=len, reverse=True)
        self._pattern = re.compile("|".join(map(re.escape, ordered))) if ordered else None

    # ----------------------------------------------------------------- structured inputs

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

    def json(self, value: object) -> object:
        """A copy of a JSON-like value with sensitive fields masked, recursively."""
        if isinstance(value, Mapping):
            if _is_secret_operation(value):
                return {str(k): (MASK if k == "value" else self.json(v)) for k, v in value.items()}
            return {str(k): self.field(str(k), v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.json(item) for item in value]
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, (bytes, bytearray)):
            return self.text(bytes(value).decode("utf-8", "replace"))
        return value

    def field(self, name: str, value: object) -> object:
        """Redact one named value: fully masked when the name is sensitive, otherwise by content."""
        return _mask_all(value) if is_sensitive_name(name) else self.json(value)

    def redact(self, value: object) -> object:
        """Redact anything a log call may carry: text, mappings, sequences, exceptions."""
        if isinstance(value, BaseException):
            return self.text(str(value))
        return self.json(value)

    # ----------------------------------------------------------------- free text

    def text(self, text: str) -> str:
        """Mask every secret this Redactor can recognise inside arbitrary text."""
        pattern = self._pattern
        if pattern is not None:
            text = pattern.sub(MASK, text)
        text = _PEM_PRIVATE_KEY.sub(f"-----PRIVATE KEY {MASK}-----", text)
        text = _URL.sub(lambda m: _redact_url(m.group(0)), text)
        text = _AUTH_SCHEME.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
        text = _WEPUSH_TOKEN.sub(lambda m: f"{m.group(1)}_{MASK}", text)
        return _NAME_VALUE.sub(_mask_name_value, text)

    def exception(self, exc: BaseException) -> str:
        """The formatted traceback of ``exc`` (with its chain), redacted."""
        return self.text("".join(traceback.format_exception(exc)))


def _is_secret_operation(value: Mapping[object, object]) -> bool:
    operation = value.get("operation")
    return isinstance(operation, str) and operation.upper() in _SECRET_OPERATIONS


def _mask_all(value: object) -> object:
    """Mask a value held under a sensitive name, keeping only whether-it-is-set metadata and structure."""
    if isinstance(value, Mapping):
        return {
            str(k): (v if _normalize_name(str(k)) in _SECRET_METADATA_KEYS else _mask_all(v))
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [_mask_all(item) for item in value]
    if value is None or isinstance(value, bool):
        return value
    return MASK


def _mask_name_value(match: re.Match[str]) -> str:
    name, separator, value = match.group(1), match.group(2), match.group(3)
    if value == MASK or not is_sensitive_name(name):
        return match.group(0)
    return f"{name}{separator}{MASK}"


def _mask_parameters(component: str) -> str:
    parts = []
    for part in component.split("&"):
        name, sep, _value = part.partition("=")
        parts.append(f"{name}={MASK}" if sep and is_sensitive_name(unquote(name)) else part)
    return "&".join(parts)


def _redact_url(url: str) -> str:
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    netloc = parts.netloc
    if "@" in netloc:
        # The whole userinfo goes: a "username" is often the token itself (https://<token>@host/...).
        netloc = f"{MASK}@{netloc.rpartition('@')[2]}"
    rebuilt = f"{parts.scheme}://{netloc}{parts.path}"
    if parts.query or "?" in url.partition("#")[0]:
        rebuilt += f"?{_mask_parameters(parts.query)}"
    if parts.fragment or url.endswith("#"):
        fragment = _mask_parameters(parts.fragment) if "=" in parts.fragment else parts.fragment
        rebuilt += f"#{fragment}"
    return rebuilt
