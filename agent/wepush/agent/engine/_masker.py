"""``SecretMasker``: the shared redaction rules plus exact secret values registered while they are in use.

The server's ``Redactor`` is one of these (with header and exception helpers on top); the run log and the
connection test reach the same instance through a port, so what one place masks, every place masks.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from collections.abc import Mapping
from urllib.parse import quote

from ._redact import (
    REDACTION_MASK,
    SECRET_OPERATIONS,
    TRUNCATION_MARK,
    is_sensitive_name,
    normalize_name,
    redact_text,
)

__all__ = ["SecretMasker"]

_MASK = REDACTION_MASK
_MIN_REGISTERED_LENGTH = 4
# Inside a sensitive field these keep their value: they say *whether* a secret is set, not what it is.
_SECRET_METADATA_KEYS = frozenset({"operation", "configured", "updatedat"})


class SecretMasker:
    """Masks secrets in free text and JSON-like values. Safe to share across threads.

    Registration is reference-counted: two runs that resolved the same account secret each register it,
    and the value stays masked until the last of them has discarded it.
    """

    __slots__ = ("_counts", "_lock", "_pattern", "_values")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}
        self._pattern: re.Pattern[str] | None = None
        self._values: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(registered_values={len(self._counts)})"

    # ----------------------------------------------------------------- registered exact values

    def add_secret_value(self, value: str | bytes | bytearray) -> None:
        """Scrub this exact value, however its characters are escaped, until it is discarded as often as
        added (see ``_value_pattern``).

        Values shorter than 4 characters are ignored: masking every ``"abc"`` would garble logs without
        protecting anything that guessing would not already reveal.
        """
        text = _registrable(value)
        if text is None:
            return
        with self._lock:
            self._counts[text] = self._counts.get(text, 0) + 1
            if self._counts[text] == 1:
                self._rebuild()

    def discard_secret_value(self, value: str | bytes | bytearray) -> None:
        """Release one registration of a value (e.g. when the Run that needed it has finished)."""
        text = _registrable(value)
        if text is None:
            return
        with self._lock:
            count = self._counts.get(text)
            if count is None:
                return
            if count > 1:
                self._counts[text] = count - 1
            else:
                del self._counts[text]
                self._rebuild()

    def _rebuild(self) -> None:
        # Longest first, so a value that contains another is masked whole.
        ordered = sorted(self._counts, key=len, reverse=True)
        self._pattern = re.compile("|".join(map(_value_pattern, ordered))) if ordered else None
        self._values = tuple(
            sorted({v for value in ordered for v in _plain_variants(value)}, key=len, reverse=True)
        )

    # ----------------------------------------------------------------- masking

    def text(self, text: str) -> str:
        """Mask every secret this masker can recognise inside arbitrary text."""
        pattern, values = self._pattern, self._values
        if pattern is not None:
            text = pattern.sub(_MASK, text)
            if text.endswith(TRUNCATION_MARK):
                text = _mask_cut_value(text, values)
        return redact_text(text)

    def json(self, value: object) -> object:
        """A copy of a JSON-like value with sensitive fields masked, recursively."""
        if isinstance(value, Mapping):
            if _is_secret_operation(value):
                return {str(k): (_MASK if k == "value" else self.json(v)) for k, v in value.items()}
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


def _registrable(value: str | bytes | bytearray) -> str | None:
    if isinstance(value, (bytes, bytearray)):
        try:
            value = bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return None
    return value if len(value) >= _MIN_REGISTERED_LENGTH else None


def _value_pattern(value: str) -> str:
    """A pattern for ``value`` with each character as itself, in either case, or in any escape a vendor
    may echo it in: percent-encoded (``+`` for a space), JSON ``\\u`` and short escapes, HTML character
    references. Character by character, so a mixture is caught too: a vendor that percent-encoded only
    the dashes of a token echoed it readable, and a list of whole-value encodings missed it. Any case,
    because a vendor that upper-cases a key it quotes reveals it as surely as one that quotes it as is.
    Then the value's base64 (``_base64_cores``), which is matched exactly."""
    escaped = "".join(_char_pattern(char) for char in value)
    encoded = "|".join(_base64_cores(value))
    return f"(?:{escaped}|{encoded})" if encoded else escaped


def _char_pattern(char: str) -> str:
    code = ord(char)
    forms = [re.escape(char), "".join(f"%{byte:02x}" for byte in char.encode("utf-8"))]
    if code <= 0xFFFF:
        forms.append(f"\\\\u{code:04x}")
    else:
        high, low = 0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)
        forms.append(f"\\\\u{high:04x}\\\\u{low:04x}")
    escaped = json.dumps(char)[1:-1]
    if escaped != char and not escaped.startswith("\\u"):
        forms.append(re.escape(escaped))  # \" \\ \n \t …
    forms.append(f"&#0*{code};|&#x0*{code:x};")
    if char == " ":
        forms.append(r"\+")
    return f"(?i:{'|'.join(forms)})"


#: The shortest base64 run that is masked: shorter ones occur by chance in any encoded text.
_MIN_BASE64_CORE = 8


def _base64_cores(value: str) -> list[str]:
    """Patterns for ``value``'s UTF-8 bytes in base64, standard or URL-safe, whether it was encoded alone
    or inside a longer value (a vendor echoing ``Authorization: Basic base64(user:password)``).

    Inside a longer value its bytes may start at any of three offsets in a 3-byte group; for each, only the
    characters that depend on the value's bytes alone are kept (the first and last may mix in a
    neighbour's bits). Encoded alone, the whole encoding is masked, padding included.
    """
    data = value.encode("utf-8")
    patterns: list[str] = []
    whole = base64.b64encode(data).decode("ascii")
    cores = {whole}
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + data).decode("ascii")
        skip = (4 * offset + 2) // 3  # the characters a neighbour's bytes before it reach
        complete = encoded[: 4 * ((offset + len(data)) // 3)]  # groups with no neighbour's bytes after
        for core in (complete[skip:], encoded[skip:]):
            # The second ends the encoded value: its last group, padded, holds the value's last bytes
            # alone (a "Basic base64(user:password)" whose password ends it), and must go too.
            if len(core) >= _MIN_BASE64_CORE:
                cores.add(core)
    for core in sorted(cores, key=len, reverse=True):
        patterns.append("".join(_BASE64_CHAR.get(char, re.escape(char)) for char in core))
    return patterns


# The standard and URL-safe alphabets differ in two characters; padding is optional in the URL-safe one.
_BASE64_CHAR = {"+": "[+-]", "/": "[/_]", "=": "=?"}


def _plain_variants(value: str) -> tuple[str, ...]:
    """The whole-value forms a capped text may end in the first part of (see ``_mask_cut_value``)."""
    return (value, quote(value, safe=""), quote(value, safe="/:"), json.dumps(value)[1:-1])


def _mask_cut_value(text: str, values: tuple[str, ...]) -> str:
    """A text capped after its rules ran (``redact_diagnostic``) may end in the first part of a value,
    cut by the cap: mask that part too."""
    kept = text[: -len(TRUNCATION_MARK)]
    cut = max(
        (
            length
            for value in values
            for length in range(len(value) - 1, _MIN_REGISTERED_LENGTH - 1, -1)
            if kept.endswith(value[:length])
        ),
        default=0,
    )
    return f"{kept[:-cut]}{_MASK}{TRUNCATION_MARK}" if cut else text


def _is_secret_operation(value: Mapping[object, object]) -> bool:
    operation = value.get("operation")
    return isinstance(operation, str) and operation.upper() in SECRET_OPERATIONS


def _mask_all(value: object) -> object:
    """Mask a value held under a sensitive name, keeping only whether-it-is-set metadata and structure."""
    if isinstance(value, Mapping):
        return {
            str(k): (v if normalize_name(str(k)) in _SECRET_METADATA_KEYS else _mask_all(v))
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [_mask_all(item) for item in value]
    if value is None or isinstance(value, bool):
        return value
    return _MASK
