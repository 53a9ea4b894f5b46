"""Request validation that never echoes submitted values.

Connexion's stock validators put ``jsonschema``'s message into the problem detail and its log, and
those messages quote the offending *value* — for an account that can be a secret — and, for parameters,
the whole schema as well. These validators report the field (a body path, or the parameter's name) and
the rule that failed, never the instance, and answer undecodable bodies with 400 instead of letting the
decode error escape as a 500.
"""

from __future__ import annotations

import json
import logging
import math
import re
import unicodedata
from collections.abc import AsyncGenerator
from typing import Any, Final

from connexion.datastructures import MediaTypeDict
from connexion.exceptions import BadRequestProblem, UnsupportedMediaTypeProblem
from connexion.json_schema import Draft4RequestValidator
from connexion.lifecycle import ConnexionRequest
from connexion.utils import is_null, is_nullable
from connexion.validators import (
    VALIDATOR_MAP,
    AbstractResponseBodyValidator,
    FormDataValidator,
    JSONRequestBodyValidator,
    JSONResponseBodyValidator,
    MultiPartFormDataValidator,
    ParameterValidator,
    TextResponseBodyValidator,
)
from jsonschema import Draft4Validator, ValidationError
from starlette.datastructures import QueryParams
from starlette.types import Receive, Scope, Send

from wepush.agent.providers.common._schema_rules import (
    most_specific,
    value_free_rule,
    violation_path,
    with_ecma_pattern,
)

_log = logging.getLogger("wepush.server.api")
_MAX_DETAIL = 1000
_MAX_NAME = 64
_SURROGATE = re.compile("[\ud800-\udfff]")
#: Where the body parser leaves a document it changed (a name put in NFC) for ``wrap_receive`` to pass on.
_REWRITTEN_BODY = "wepush.rewritten_body"
_UNSTORABLE_RULE = "must not contain NUL (\\u0000) or an unpaired surrogate (\\ud800-\\udfff)"


# The contract's patterns are ECMA-262 regular expressions, whose ``$`` is the end of the text only.
_BodyValidator = with_ecma_pattern(Draft4RequestValidator)
_ParameterSchemaValidator = with_ecma_pattern(Draft4Validator)

#: Objects and arrays nested deeper than this are refused; no request of the contract comes close.
MAX_JSON_DEPTH = 64


class _NotANumber(ValueError):
    """``NaN``, ``Infinity`` or ``-Infinity`` in a body: Python's reader accepts them, JSON does not."""


def _refuse_constant(name: str) -> Any:
    raise _NotANumber(name)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotANumber(text)  # 1e400 reads as infinity
    return value


def _deeper_than(document: Any, limit: int, text: str) -> bool:
    """Whether objects and arrays nest deeper than ``limit`` (walked without recursion)."""
    if text.count("{") + text.count("[") <= limit:
        return False  # too few brackets to nest that deep, whatever the strings hold
    stack: list[tuple[Any, int]] = [(document, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _path(error: ValidationError) -> str:
    return "/" + "/".join(str(part) for part in error.absolute_path) if error.absolute_path else "/"


def describe(error: ValidationError) -> str:
    """A value-free description of one schema violation in a request body (``/name: is required``)."""
    error = most_specific(error)
    where = "/" + "/".join(str(part) for part in violation_path(error))
    return f"{where}: {_rule(error)}"[:_MAX_DETAIL]


def _rule(error: ValidationError) -> str:
    return value_free_rule(error)


def _parameter(kind: str, name: str) -> str:
    # Quoted: the problem handler takes the first quoted name as the field of the error entry.
    return f"{kind} parameter '{name[:_MAX_NAME]}'"


class SafeParameterValidator(ParameterValidator):  # type: ignore[misc]
    """Path, query and header parameters checked like connexion's validator, reported by name and
    rule (``query parameter 'limit': must satisfy minimum=1``) instead of jsonschema's text, which
    quotes the value and dumps the parameter's schema."""

    @staticmethod
    def validate_parameter(
        parameter_type: str, value: Any, param: dict[str, Any], param_name: str | None = None
    ) -> str | None:
        name = str(param_name or param.get("name", ""))
        if is_nullable(param) and is_null(value):
            return None
        if value is None:
            return f"{_parameter(parameter_type, name)}: is required" if param.get("required") else None
        if unstorable_text(value) is not None:
            # An id or filter holding NUL can match nothing, and PostgreSQL refuses it as a bound value.
            return f"{_parameter(parameter_type, name)}: {_UNSTORABLE_RULE}"
        schema = param.get("schema", param)
        try:
            _ParameterSchemaValidator(schema, format_checker=Draft4Validator.FORMAT_CHECKER).validate(value)
        except ValidationError as error:
            item = f" item {error.absolute_path[0]}" if error.absolute_path else ""
            return f"{_parameter(parameter_type, name)}{item}: {_rule(error)}"[:_MAX_DETAIL]
        return None

    def validate_request(self, request: ConnexionRequest) -> None:
        if self.strict_validation:
            extra = self.validate_query_parameter_list(request, security_params=self.security_query_params)
            if extra:
                names = ", ".join(f"'{name[:_MAX_NAME]}'" for name in sorted(extra)[:10])
                which = f"query parameters {names} are" if len(extra) > 1 else f"query parameter {names} is"
                raise BadRequestProblem(detail=f"{which} not defined for this operation")
        # ``?limit=5&limit=50`` would silently mean the last one; only array filters repeat. Connexion's
        # ``query_params`` has already folded repeats, so the raw query string is read again.
        raw = QueryParams(request.scope.get("query_string", b""))
        for param in self.parameters.get("query", []):
            name = param["name"]
            if param.get("schema", param).get("type") != "array" and len(raw.getlist(name)) > 1:
                raise BadRequestProblem(detail=f"{_parameter('query', name)}: is given more than once")
        super().validate_request(request)


class SafeJSONRequestBodyValidator(JSONRequestBodyValidator):  # type: ignore[misc]
    @property
    def _validator(self) -> Any:
        return _BodyValidator(self._schema, format_checker=Draft4Validator.FORMAT_CHECKER)

    async def wrap_receive(self, receive: Receive, *, scope: Scope) -> tuple[Receive, Scope]:
        # A JSON body is read as sent: a gzip-encoded one used to fail as "not valid UTF-8 text", which
        # hides the cause. RFC 9110 answers an unsupported content coding with 415.
        codings = b",".join(value for name, value in scope.get("headers", ()) if name == b"content-encoding")
        if any(coding.strip().lower() not in (b"", b"identity") for coding in codings.split(b",")):
            raise UnsupportedMediaTypeProblem(
                detail="header 'Content-Encoding': a JSON request body is sent without a content coding"
            )
        # Connexion validates a body sent without a Content-Type as the operation's JSON, but the
        # handler then receives the raw bytes; saying so in the scope gives the handler the document
        # that was validated.
        if not any(name == b"content-type" for name, _ in scope.get("headers", ())):
            scope = {**scope, "headers": [*scope.get("headers", ()), (b"content-type", b"application/json")]}
        rewritten: dict[str, Any] = {}
        scope = {**scope, _REWRITTEN_BODY: rewritten}
        receive, scope = await super().wrap_receive(receive, scope=scope)
        if "body" in rewritten:
            # The handler reads the body again from the channel: it gets the document as normalised.
            receive, scope = self._insert_body(receive, body=rewritten["body"], scope=scope)
        return receive, scope

    async def _parse(self, stream: AsyncGenerator[bytes, None], scope: Scope) -> Any:
        raw = b"".join([chunk async for chunk in stream])
        try:
            text = raw.decode(self._encoding)
        except (UnicodeDecodeError, LookupError):
            raise BadRequestProblem(detail="/: the request body is not valid UTF-8 text") from None
        # RFC 8259 lets a parser ignore a byte-order mark; Windows tools (PowerShell 5's
        # ``Set-Content -Encoding utf8``, Notepad before 2019) put one before every file they save.
        text = text.removeprefix("\ufeff")
        if not text:
            return None
        try:
            document = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
        except json.JSONDecodeError as exc:
            # Position only: the message of JSONDecodeError never includes the document.
            raise BadRequestProblem(
                detail=f"/: malformed JSON at line {exc.lineno} column {exc.colno}"
            ) from None
        except _NotANumber:
            raise BadRequestProblem(detail="/: a number in the body is NaN or infinite") from None
        except ValueError:
            # Python refuses to convert integers of more than 4,300 digits (CVE-2020-10735).
            raise BadRequestProblem(detail="/: a number in the body has too many digits") from None
        except RecursionError:
            raise BadRequestProblem(detail=f"/: nested deeper than {MAX_JSON_DEPTH} levels") from None
        if _deeper_than(document, MAX_JSON_DEPTH, text):
            # Every later step (schemas, canonical JSON, the database) walks the document recursively.
            raise BadRequestProblem(detail=f"/: nested deeper than {MAX_JSON_DEPTH} levels")
        # Only a \u escape can put NUL or a lone surrogate into a JSON string.
        if "\\u" in text:
            where = unstorable_text(document)
            if where is not None:
                raise BadRequestProblem(detail=f"{where}: {_UNSTORABLE_RULE}")
        hidden = _hidden_in_name(document)
        if hidden is not None:
            raise BadRequestProblem(detail=f"/name: {NAME_RULE} ({hidden})")
        rewritten = scope.get(_REWRITTEN_BODY)
        if _composed_name(document) and isinstance(rewritten, dict):
            rewritten["body"] = document
        return document

    def _validate(self, body: Any) -> dict[str, Any] | None:
        if not self._nullable and body is None:
            raise BadRequestProblem(detail="/: the request body must not be empty")
        try:
            validated: dict[str, Any] | None = self._validator.validate(body)
            return validated
        except ValidationError as error:
            detail = describe(error)
            _log.info("request body rejected: %s", detail, extra={"event": "REQUEST_BODY_REJECTED"})
            raise BadRequestProblem(detail=detail) from None


#: The contract's rule for resource names (``ResourceNameInput``, x-wepush-pattern-rule).
NAME_RULE: Final = (
    "must not start or end with white space, nor contain control characters, line breaks or invisible "
    "formatting characters"
)
#: A subdivision flag: the black flag, tag letters or digits, the cancel tag. The one place tag
#: characters (U+E0020..U+E007F, invisible) mean anything.
_TAG_SEQUENCE: Final = re.compile("\U0001f3f4[\U000e0020-\U000e007e]+\U000e007f")
_TAG: Final = re.compile("[\U000e0000-\U000e007f]")
#: A variation selector after an ASCII letter selects nothing (letters have no variants): it only makes
#: a name that looks like another one.
_EMPTY_VARIATION: Final = re.compile("[A-Za-z][\ufe00-\ufe0f]")


def _hidden_in_name(document: Any) -> str | None:
    """What hides in a body's ``name`` beyond what the contract's pattern can express (its characters
    outside the Basic Multilingual Plane, the context of a variation selector), or ``None``."""
    if not isinstance(document, dict):
        return None
    name = document.get("name")
    if not isinstance(name, str) or name.isascii():
        return None
    if _TAG.search(_TAG_SEQUENCE.sub("", name)):
        return "a tag character outside a flag"
    if _EMPTY_VARIATION.search(name):
        return "a variation selector after a letter"
    return None


def _composed_name(document: Any) -> bool:
    """Put a body's ``name`` in Unicode normal form C; whether that changed it.

    Every top-level ``name`` of a request body is a resource name (a contract test keeps it so). "café"
    typed as ``e`` + U+0301 looks like, but is not, the "café" of U+00E9, so two resources could show
    the same name; NFC, the form keyboards produce, makes them one name."""
    if not isinstance(document, dict):
        return False
    name = document.get("name")
    if not isinstance(name, str) or name.isascii() or unicodedata.is_normalized("NFC", name):
        return False
    document["name"] = unicodedata.normalize("NFC", name)
    return True


def unstorable_text(document: Any, where: str = "") -> str | None:
    """The JSON pointer of the first key or string holding a character no text column stores: NUL
    (PostgreSQL refuses it in TEXT and JSONB) or an unpaired surrogate (not encodable as UTF-8)."""
    if isinstance(document, str):
        return (where or "/") if _unstorable(document) else None
    if isinstance(document, dict):
        for key, value in document.items():
            path = f"{where}/{_pointer_token(key)}"
            if _unstorable(key):
                return path
            found = unstorable_text(value, path)
            if found is not None:
                return found
    elif isinstance(document, list):
        for index, value in enumerate(document):
            found = unstorable_text(value, f"{where}/{index}")
            if found is not None:
                return found
    return None


def _unstorable(text: str) -> bool:
    return "\x00" in text or (not text.isascii() and _SURROGATE.search(text) is not None)


def _pointer_token(key: str) -> str:
    # RFC 6901; a key that cannot be shown safely is shown by its position's nature, not its text.
    shown = key.replace("~", "~0").replace("/", "~1")
    return shown if not _unstorable(shown) and len(shown) <= _MAX_NAME else "<key>"


class StreamedResponse(AbstractResponseBodyValidator):  # type: ignore[misc]
    """JSON Lines downloads and event streams are not one JSON document: pass them through unbuffered.

    (Connexion's ``*/*json`` rule would otherwise buffer a whole ``application/x-ndjson`` artifact and
    then fail to parse it as a single document.)"""

    def wrap_send(self, send: Send) -> Send:
        return send


def validator_map() -> dict[str, Any]:
    """Connexion's validators with the JSON body and parameter validators replaced and streamed media
    passed through."""
    mapping = dict(VALIDATOR_MAP)
    mapping["parameter"] = SafeParameterValidator
    mapping["response"] = MediaTypeDict(
        {
            "application/x-ndjson": StreamedResponse,
            "text/event-stream": StreamedResponse,
            "*/*json": JSONResponseBodyValidator,
            "text/plain": TextResponseBodyValidator,
        }
    )
    mapping["body"] = MediaTypeDict(
        {
            "*/*json": SafeJSONRequestBodyValidator,
            "application/x-www-form-urlencoded": FormDataValidator,
            "multipart/form-data": MultiPartFormDataValidator,
        }
    )
    return mapping
