"""The one rule set that masks secrets by *name* and by *shape* in free text.

Everything that writes text a person or a program may read later goes through these rules: the server's
log formatters and run log (through its ``Redactor``, which adds registered exact values), and the
diagnostics providers, the engine and the agent produce (through :func:`redact_diagnostic`). They live in
the engine because it is the one package every other one may import.

By shape: WePush tokens (``wpn_``/``wpa_``/``wpe_``), ``Authorization`` schemes, URL userinfo, sensitive
query and fragment parameters, the path segments after webhook paths (``/hook/<id>``), ``name=value``
pairs with sensitive names (a quoted value up to its closing quote; not a sentence about the name, as in
``/accessToken: is neither…``), the ``value`` of a secret update
(``{'operation': 'REPLACE', 'value': ...}``) and PEM private keys.
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import unquote, urlsplit

__all__ = ["DIAGNOSTIC_MAX_CHARS", "REDACTION_MASK", "is_sensitive_name", "redact_diagnostic", "redact_text"]

DIAGNOSTIC_MAX_CHARS = 1024
REDACTION_MASK: Final = "***"
TRUNCATION_MARK: Final = "…"
"""What ends a diagnostic :func:`redact_diagnostic` had to cap."""
_MASK: Final = REDACTION_MASK

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
    "jwt",
    "bearer",
)
_SENSITIVE_EXACT: Final = frozenset(
    {"key", "sign", "sig", "pwd", "pass", "auth", "otp", "pin", "dsn", "session", "sess", "ticket"}
)
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
_NOT_A_VALUE_SUFFIXES: Final = ("error", "exception", "warning")
SECRET_OPERATIONS: Final = frozenset({"REPLACE", "KEEP", "SET", "CLEAR"})
# Path segments after which a webhook URL carries its credential (Feishu ``/hook/<uuid>``, Slack
# ``/services/T../B../X..``, Discord ``/webhooks/<id>/<token>``).
_HOOK_SEGMENTS: Final = frozenset({"hook", "hooks", "webhook", "webhooks", "services"})
# ... except a plain lower-case endpoint word such as WeCom's ``/webhook/send``: tokens have digits or capitals.
_ENDPOINT_WORD: Final = re.compile(r"[a-z_-]{1,16}")

_NON_ALNUM = re.compile(r"[^a-z0-9]")
_PEM_PRIVATE_KEY = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.DOTALL
)
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>`]+")
# A request target without scheme and host: its query is split on "&" like a URL's, so that a value is
# masked whole, whatever characters it holds. In a request line ("GET /p?token=a,b\"c HTTP/1.1", as the
# access log has it) the query runs to the space before the protocol, quotes included.
_REQUEST_LINE_TARGET = re.compile(r"(?<![^\s\"'])(/[^\s?#]*)\?([^\s#]+)(?=(?:#\S*)? HTTP/\d)")
_REQUEST_TARGET = re.compile(r"(?<![^\s\"'(\[=])(/[^\s?#\"'<>`]*)\?([^\s\"'<>`#]+)")
_AUTH_SCHEME = re.compile(r"\b(Bearer|Basic|Enrollment|Digest)([ \t]+)[A-Za-z0-9._~+/=:-]{6,}", re.IGNORECASE)
# GitHub-style ``token <credential>``: only a credential-looking word (a digit in it), so that prose such
# as "the token expired" stays readable.
_TOKEN_SCHEME = re.compile(
    r"\b(token)([ \t]+)(?=[A-Za-z0-9._~+/=:-]*[0-9])[A-Za-z0-9._~+/=:-]{8,}", re.IGNORECASE
)
_WEPUSH_TOKEN = re.compile(r"(?<![A-Za-z0-9])(wp[nae])_[A-Za-z0-9_-]{6,}")
# ``Authorization: <scheme> <credential>`` with any scheme (``token``, ``ACS3-HMAC-SHA256``...): both words go.
_AUTHORIZATION = re.compile(
    r"(?<![A-Za-z0-9_.-])((?:proxy-)?authorization\\?[\"']?[ \t]*[=:][ \t]*)"
    r"([A-Za-z][A-Za-z0-9_-]*)[ \t]+[^\s\"'&,;<>{}\[\]\\]+",
    re.IGNORECASE,
)
# name, separator, then the value: quoted ("...", '...', or \"...\" inside an encoded JSON string) up to
# its closing quote, or else one bare word. An unclosed quote runs to the end of the line (masked whole).
_NAME_VALUE = re.compile(
    # A name may be percent-encoded (``access%5Ftoken=`` in a logged query string) and is judged decoded.
    r"(?<![A-Za-z0-9_.%-])(?P<name>(?:[A-Za-z_]|%[0-9A-Fa-f]{2})(?:[A-Za-z0-9_.-]|%[0-9A-Fa-f]{2}){0,63})"
    r"(?P<sep>\\?[\"']?[ \t]*[=:][ \t]*)"
    r"(?:"
    r"(?P<dq>b?\")(?P<dqv>(?:\\.|[^\"\\\n])*)(?P<dqc>\"?)"
    r"|(?P<sq>b?')(?P<sqv>(?:\\.|[^'\\\n])*)(?P<sqc>'?)"
    r"|(?P<eq>\\[\"'])(?P<eqv>(?:\\\\.|(?!\\[\"'])[^\n])*)(?P<eqc>(?:\\[\"'])?)"
    r"|(?P<bare>[^\s\"'&,;<>{}\[\]\\]+)"
    r")"
)
_NEXT_WORD = re.compile(r"[ \t]+[^\s\"'&,;<>{}\[\]\\]+")
# ``<name>: <word> <word>…`` where the first word is one of these is a sentence about the field (a
# validation issue "/accessToken: is neither…", a vendor's "SignatureDoesNotMatch: Specified signature is
# not matched"), not its value. A closed list of words sentences start with, none of which a generated
# credential is; anything else after a sensitive name stays masked.
_PROSE_WORDS: Final = frozenset(
    {
        # articles, determiners, pronouns, negations
        *("a", "an", "the", "this", "that", "these", "those", "it", "its", "there", "no", "not"),
        *("none", "neither", "either", "nor", "any", "some", "each", "every", "all", "both", "only"),
        # auxiliaries and the verbs validation messages start with
        *("is", "are", "was", "were", "be", "been", "has", "have", "had", "does", "do", "did"),
        *("must", "should", "can", "cannot", "could", "will", "would", "may", "might", "shall"),
        *("needs", "requires", "expects", "contains", "looks", "seems", "exceeds", "matches"),
        # the participles and adjectives vendors open their messages with
        *("specified", "given", "provided", "supplied", "required", "expected", "missing", "expired"),
        *("invalid", "incorrect", "malformed", "empty", "unknown", "unsupported", "too", "already"),
        # prepositions and conjunctions
        *("of", "for", "to", "in", "on", "at", "by", "with", "from", "and", "or", "but", "if", "when"),
    }
)
# Only after a bare name and a colon with a space ("name: "): ``name=``, ``"name": `` (JSON) and
# ``name:value`` always hold a value.
_PROSE_SEPARATOR = re.compile(r"[ \t]*:[ \t]+")
_SENTENCE_GOES_ON = re.compile(r"[ \t]+[A-Za-z]")
_QUOTED_GROUPS: Final = (("dq", "dqv", "dqc"), ("sq", "sqv", "sqc"), ("eq", "eqv", "eqc"))
_SECRET_OPERATION = re.compile(
    r"(?<![A-Za-z0-9_])operation\\?[\"']?[ \t]*[=:][ \t]*\\?[\"']?(?:"
    + "|".join(sorted(SECRET_OPERATIONS))
    + r")(?![A-Za-z0-9_])",
    re.IGNORECASE,
)


def normalize_name(name: str) -> str:
    return _NON_ALNUM.sub("", name.lower())


def is_sensitive_name(name: str) -> bool:
    """Whether a field / parameter / header called ``name`` holds a secret (``apiKey``, ``x-auth-token``)."""
    normalized = normalize_name(name)
    if not normalized or normalized in _SAFE_NAMES:
        return False
    # An exception's qualified class name (``wepush.server.domain.secrets.MasterKeyError: master key
    # file …``) is followed by its message, not by a value: masking it cut the message's first word.
    if normalized.endswith(_NOT_A_VALUE_SUFFIXES) and name[:1].isalpha() and not name.islower():
        return False
    if normalized in _SENSITIVE_EXACT or normalized.endswith("key"):
        return True
    return any(fragment in normalized for fragment in _SENSITIVE_FRAGMENTS)


def redact_text(text: str) -> str:
    """Mask every secret shape these rules recognise inside arbitrary text."""
    text = _PEM_PRIVATE_KEY.sub(f"-----PRIVATE KEY {_MASK}-----", text)
    text = _URL.sub(lambda m: _redact_url(m.group(0)), text)
    for target in (_REQUEST_LINE_TARGET, _REQUEST_TARGET):
        text = target.sub(lambda m: f"{m.group(1)}?{_mask_parameters(m.group(2))}", text)
    text = _AUTH_SCHEME.sub(lambda m: f"{m.group(1)}{m.group(2)}{_MASK}", text)
    text = _TOKEN_SCHEME.sub(lambda m: f"{m.group(1)}{m.group(2)}{_MASK}", text)
    text = _WEPUSH_TOKEN.sub(lambda m: f"{m.group(1)}_{_MASK}", text)
    text = _AUTHORIZATION.sub(lambda m: f"{m.group(1)}{_MASK} {_MASK}", text)
    return _mask_name_values(text)


def redact_diagnostic(
    text: str | None, *, secrets: tuple[str, ...] = (), limit: int = DIAGNOSTIC_MAX_CHARS
) -> str | None:
    """Mask any literal ``secrets`` and every shape :func:`redact_text` knows, then cap the length."""
    if text is None:
        return None
    out = text
    for secret in secrets:
        if secret:
            out = out.replace(secret, _MASK)
    out = redact_text(out)
    if len(out) > limit:
        out = out[: max(0, limit - 1)] + TRUNCATION_MARK
    return out


# --------------------------------------------------------------------------- name=value pairs


def _secret_operation_spans(text: str) -> list[tuple[int, int]]:
    """Where a secret update's ``value`` may sit: the innermost braces around each ``operation: REPLACE``
    (or the whole text when there are none), so ``'value'`` of the same object is treated as sensitive."""
    spans = []
    for marker in _SECRET_OPERATION.finditer(text):
        opening = text.rfind("{", 0, marker.start())
        closing = text.find("}", marker.end())
        spans.append((opening + 1 if opening >= 0 else 0, closing if closing >= 0 else len(text)))
    return spans


def _mask_name_values(text: str) -> str:
    spans = _secret_operation_spans(text)
    parts: list[str] = []
    copied = position = 0
    while (match := _NAME_VALUE.search(text, position)) is not None:
        masked = _masked_pair(match, spans)
        if masked is None:
            # Not a sensitive name: its "value" may itself hold a pair ("failed: pwd=x"), so look again
            # from just after the separator rather than from after the value.
            position = match.end("sep")
            continue
        parts += (text[copied : match.start()], masked)
        copied = position = match.end()
        bare = match.group("bare")
        if bare is not None and bare.endswith((":", "=")):
            # The value masked was a label (``tokens: apiKey: abc``, or base64 padding): the word after
            # it goes too, or a value would pass as what follows a masked word.
            following = _NEXT_WORD.match(text, position)
            if following is not None:
                copied = position = following.end()
    parts.append(text[copied:])
    return "".join(parts)


def _file_name(match: re.Match[str]) -> bool:
    """The last segment of a file path (``…/bootstrap-admin.token: Too many levels of symbolic links``):
    after a "/", with an extension, and followed by ": " and prose, not by a value."""
    start, name = match.start("name"), match.group("name")
    return (
        start > 0 and match.string[start - 1] == "/" and "." in name.strip(".") and match.group("sep") == ": "
    )


def _masked_pair(match: re.Match[str], spans: list[tuple[int, int]]) -> str | None:
    """The pair with its value masked, or ``None`` when the name is not sensitive."""
    name = match.group("name")
    if _file_name(match):
        return None
    if not is_sensitive_name(unquote(name) if "%" in name else name):
        secret_update_value = normalize_name(name) == "value" and any(
            start <= match.start() < end for start, end in spans
        )
        if not secret_update_value:
            return None
    elif _reads_as_prose(match):
        return None
    head = f"{name}{match.group('sep')}"
    for opening, value, closing in _QUOTED_GROUPS:
        if match.group(opening) is not None:
            if match.group(value) in ("", _MASK):
                return match.group(0)
            return f"{head}{match.group(opening)}{_MASK}{match.group(closing)}"
    if match.group("bare") == _MASK:
        return match.group(0)
    return f"{head}{_MASK}"


def _reads_as_prose(match: re.Match[str]) -> bool:
    """``/accessToken: is neither an access token nor a webhook URL``: the words after the name are a
    sentence about it. Only a bare prose word after ``": "``, with more words following on the line; a
    lone word (``token: is``) is masked, since a value may be any word."""
    bare = match.group("bare")
    return (
        bare is not None
        and bare.lower() in _PROSE_WORDS
        and _PROSE_SEPARATOR.fullmatch(match.group("sep")) is not None
        and _SENTENCE_GOES_ON.match(match.string, match.end()) is not None
    )


# --------------------------------------------------------------------------- URLs


def _mask_parameters(component: str) -> str:
    parts = []
    for part in component.split("&"):
        name, sep, _value = part.partition("=")
        parts.append(f"{name}={_MASK}" if sep and is_sensitive_name(unquote(name)) else part)
    return "&".join(parts)


def _mask_hook_path(path: str) -> str:
    segments = path.split("/")
    after_hook = False
    for index, segment in enumerate(segments):
        if after_hook and segment and not _ENDPOINT_WORD.fullmatch(segment):
            segments[index] = _MASK
        elif segment.lower() in _HOOK_SEGMENTS:
            after_hook = True
    return "/".join(segments)


def _redact_url(url: str) -> str:
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    netloc = parts.netloc
    if "@" in netloc:
        # The whole userinfo goes: a "username" is often the token itself (https://<token>@host/...).
        netloc = f"{_MASK}@{netloc.rpartition('@')[2]}"
    rebuilt = f"{parts.scheme}://{netloc}{_mask_hook_path(parts.path)}"
    if parts.query or "?" in url.partition("#")[0]:
        rebuilt += f"?{_mask_parameters(parts.query)}"
    if parts.fragment or url.endswith("#"):
        fragment = _mask_parameters(parts.fragment) if "=" in parts.fragment else parts.fragment
        rebuilt += f"#{fragment}"
    return rebuilt
