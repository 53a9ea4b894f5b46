"""How the SDK words a request it refuses itself: the way the Service words the same refusal.

The Service reports every way a request breaks the contract with the code ``INVALID`` and a rule that
never quotes the value (``must satisfy maxLength=200``, ``is required``, a pattern's own words). The SDK
checks the same contract earlier, with the generated pydantic models, whose error types
(``string_too_long``, ``missing`` ...) and messages (a name's pattern spelled out as a regular expression)
are translated here: code that branches on ``errors[].code`` sees the same code whichever side refused.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final

__all__ = ["INVALID", "PATTERN_RULES", "RESOURCE_NAME_PATTERN", "rule"]

#: The Service's code for a value that breaks the contract's schema (a body member, a parameter).
INVALID: Final = "INVALID"

#: ``ResourceNameInput.pattern``, the rule every resource name follows.
RESOURCE_NAME_PATTERN: Final = (
    r"^[^\s\x00-\x1f\x7f-\x9f\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180e\u200b\u200e\u200f\u2028-\u202e\u2060-\u206f\u3164\ufeff\uffa0\ufff9-\ufffb\u200c\u200d\ufe00-\ufe0f]"
    r"(?:[^\x00-\x1f\x7f-\x9f\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180e\u200b\u200e\u200f\u2028-\u202e\u2060-\u206f\u3164\ufeff\uffa0\ufff9-\ufffb]*"
    r"[^\s\x00-\x1f\x7f-\x9f\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180e\u200b\u200e\u200f\u2028-\u202e\u2060-\u206f\u3164\ufeff\uffa0\ufff9-\ufffb\u200c\u200d])?$"
)

#: What the contract says a pattern means (``x-wepush-pattern-rule``), said instead of the pattern, as the
#: Service does; a unit test keeps this table equal to the bundled contract.
PATTERN_RULES: Final[Mapping[str, str]] = {
    RESOURCE_NAME_PATTERN: (
        "must not start or end with white space, nor contain control characters, line breaks or invisible "
        "formatting characters"
    ),
}

_NO_PATTERN_RULE: Final = "does not match the required pattern"
_PATTERN_MESSAGE: Final = "must validate the regular expression /"
_VALUE_ERROR: Final = "Value error, "
# A oneOf model's message appends each alternative's pydantic error, which quotes the submitted value.
_DETAILS: Final = " Details:"
_MAX_MESSAGE: Final = 200
_QUOTED: Final = re.compile(r"'([^']*)'")

_TYPES: Final[Mapping[str, str]] = {
    "int_type": "integer",
    "int_parsing": "integer",
    "int_from_float": "integer",
    "float_type": "number",
    "float_parsing": "number",
    "string_type": "string",
    "bool_type": "boolean",
    "bool_parsing": "boolean",
    "list_type": "array",
    "dict_type": "object",
    "model_type": "object",
    "model_attributes_type": "object",
}

#: pydantic's error type → (the JSON Schema keyword the Service names, the ``ctx`` key holding its bound).
_BOUNDS: Final[Mapping[str, tuple[str, str]]] = {
    "string_too_long": ("maxLength", "max_length"),
    "string_too_short": ("minLength", "min_length"),
    "too_long": ("maxItems", "max_length"),
    "too_short": ("minItems", "min_length"),
    "greater_than_equal": ("minimum", "ge"),
    "less_than_equal": ("maximum", "le"),
    "greater_than": ("exclusiveMinimum", "gt"),
    "less_than": ("exclusiveMaximum", "lt"),
}


def _safe_message(message: str) -> str:
    """pydantic's own text, cut before any alternative's details (which quote the value) and shortened."""
    return message.split(_DETAILS, 1)[0][:_MAX_MESSAGE]


def rule(error: Mapping[str, Any]) -> str:
    """The rule one pydantic error (read without its input) reports, in the Service's words.

    Only the constraint is read from ``ctx`` (a bound, the allowed values), never the submitted value.
    """
    kind = str(error.get("type", ""))
    context = error.get("ctx") or {}
    message = str(error.get("msg", ""))
    if kind == "missing":
        return "is required"
    if kind in _TYPES:
        return f'must satisfy type="{_TYPES[kind]}"'
    if kind in _BOUNDS and _BOUNDS[kind][1] in context:
        keyword, key = _BOUNDS[kind]
        if kind in ("too_long", "too_short") and context.get("field_type") == "Dictionary":
            keyword = keyword.replace("Items", "Properties")
        return f"must satisfy {keyword}={json.dumps(context[key], default=str)}"
    if kind in ("enum", "literal_error") and "expected" in context:
        # pydantic lists them as "'A', 'B' or 'C'"; the Service as ['A', 'B', 'C'].
        allowed = _QUOTED.findall(str(context["expected"]))
        return f"must be one of {allowed[:20]}" if allowed else f"must be one of {context['expected']}"
    if kind == "value_error":
        text = message.removeprefix(_VALUE_ERROR)
        if text.startswith(_PATTERN_MESSAGE) and text.endswith("/"):
            return PATTERN_RULES.get(text[len(_PATTERN_MESSAGE) : -1], _NO_PATTERN_RULE)
        return _safe_message(text)
    return _safe_message(message)
