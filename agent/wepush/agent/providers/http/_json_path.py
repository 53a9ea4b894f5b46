"""The JSONPath subset used by ``successCondition.jsonPath``.

Supported: ``$`` followed by any number of ``.name``, ``['name']`` / ``["name"]``
and ``[index]`` steps (a negative index counts from the end), e.g.
``$.data.items[0].status``. Wildcards, filters, slices and recursive descent are
not supported: a success condition must name exactly one value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["JsonPath", "JsonPathSyntaxError", "json_values_equal"]

_DOT_STEP = re.compile(r"\.([A-Za-z_][A-Za-z0-9_-]*)")
_INDEX_STEP = re.compile(r"\[(-?\d+)\]")
_QUOTED_STEP = re.compile(r"""\[(?:'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)")\]""")
_ESCAPE = re.compile(r"\\(.)")

_MISSING = object()


class JsonPathSyntaxError(ValueError):
    """The expression is outside the supported subset."""


@dataclass(frozen=True, slots=True)
class JsonPath:
    expression: str
    steps: tuple[str | int, ...]

    @classmethod
    def parse(cls, expression: str) -> JsonPath:
        if not expression.startswith("$"):
            raise JsonPathSyntaxError("a JSONPath starts with '$'")
        steps: list[str | int] = []
        position = 1
        while position < len(expression):
            for pattern in (_DOT_STEP, _INDEX_STEP, _QUOTED_STEP):
                match = pattern.match(expression, position)
                if match is None:
                    continue
                if pattern is _INDEX_STEP:
                    steps.append(int(match.group(1)))
                elif pattern is _DOT_STEP:
                    steps.append(match.group(1))
                else:
                    raw = match.group(1) if match.group(1) is not None else match.group(2)
                    steps.append(_ESCAPE.sub(r"\1", raw))
                position = match.end()
                break
            else:
                raise JsonPathSyntaxError(
                    f"unsupported JSONPath syntax at offset {position}: "
                    "use '.name', \"['name']\" or '[index]' steps"
                )
        return cls(expression, tuple(steps))

    def find(self, document: object) -> tuple[bool, object]:
        """``(True, value)`` when the path exists in ``document``, else ``(False, None)``."""
        current: object = document
        for step in self.steps:
            if isinstance(step, int):
                if not isinstance(current, list) or not -len(current) <= step < len(current):
                    return False, None
                current = current[step]
            else:
                if not isinstance(current, dict):
                    return False, None
                current = current.get(step, _MISSING)
                if current is _MISSING:
                    return False, None
        return True, current


def json_values_equal(left: object, right: object) -> bool:
    """JSON equality: ``true`` never equals ``1`` (Python's ``True == 1`` does)."""
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left is right
    if isinstance(left, int | float) and isinstance(right, int | float):
        return left == right
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(
            json_values_equal(a, b) for a, b in zip(left, right, strict=True)
        )
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(json_values_equal(left[k], right[k]) for k in left)
    return type(left) is type(right) and left == right
