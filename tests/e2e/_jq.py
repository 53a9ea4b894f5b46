"""The few `jq` options the documented curl sessions use, over libjq (the `jq` package), so the session
runs on a machine without the jq command and every machine filters with the same jq.

Usage: ``python _jq.py [-r] [-c] PROGRAM`` reading one JSON document from standard input.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import jq


def _render(value: Any, *, raw: bool, compact: bool) -> str:
    if raw and isinstance(value, str):
        return value
    if compact:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return json.dumps(value, ensure_ascii=False, indent=2)


def main(argv: list[str]) -> int:
    raw = compact = False
    while argv and argv[0].startswith("-") and len(argv[0]) > 1:
        for flag in argv.pop(0)[1:]:
            if flag not in "rc":
                print(f"jq: option -{flag} is not supported here (only -r and -c)", file=sys.stderr)
                return 2
            raw |= flag == "r"
            compact |= flag == "c"
    if len(argv) != 1:
        print("jq: usage: jq [-r] [-c] PROGRAM < input", file=sys.stderr)
        return 2
    try:
        values = jq.compile(argv[0]).input_text(sys.stdin.read()).all()
    except ValueError as error:
        # jq's own exit status for a program that failed on its input.
        print(f"jq: error: {error}", file=sys.stderr)
        return 5
    for value in values:
        print(_render(value, raw=raw, compact=compact))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
