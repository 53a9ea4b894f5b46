"""Every log call in the Service and the agent names a stable ``event`` (the seed's structured log field).

An AST scan rather than a grep: a new ``_log.warning(...)`` without ``extra={"event": ...}`` fails here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parents[3]
SCANNED: Final = (ROOT / "server", ROOT / "agent")
LEVEL_METHODS: Final = frozenset(
    {"debug", "info", "warning", "warn", "error", "exception", "critical", "log"}
)
# ``_log``, ``log``, ``logger``, ``self._logger``, ``LOGGER`` ...; ``logging.warning(...)`` (the root logger) too.
LOGGER_NAME: Final = re.compile(r"_*(log|logger|logging)", re.IGNORECASE)
EVENT_NAME: Final = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")
# The one module that logs an event code it is given (``extra={"event": self.event}``): each background
# loop's failure code, a literal where the loop makes its ``PassFailures``, checked there instead.
RELAYING: Final = ROOT / "server" / "wepush" / "server" / "application" / "background.py"


def _receiver(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "getLogger":
        return "logger"
    return None


def _log_calls(tree: ast.AST) -> list[ast.Call]:
    calls = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr not in LEVEL_METHODS:
            continue
        name = _receiver(node.func.value)
        if name is not None and LOGGER_NAME.fullmatch(name):
            calls.append(node)
    return calls


def _event_of(call: ast.Call) -> str | None:
    for keyword in call.keywords:
        if keyword.arg == "extra" and isinstance(keyword.value, ast.Dict):
            for key, value in zip(keyword.value.keys, keyword.value.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "event":
                    if isinstance(value, ast.Constant) and isinstance(value.value, str):
                        return value.value
                    return None
    return None


def _relays_its_event(call: ast.Call) -> bool:
    """``extra={..., "event": self.event}``."""
    for keyword in call.keywords:
        if keyword.arg == "extra" and isinstance(keyword.value, ast.Dict):
            for key, value in zip(keyword.value.keys, keyword.value.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "event":
                    return ast.unparse(value) == "self.event"
    return False


def _trees() -> list[tuple[Path, ast.AST]]:
    return [
        (path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
        for base in SCANNED
        for path in sorted(base.rglob("*.py"))
    ]


def _scan() -> tuple[list[str], list[str]]:
    found: list[str] = []
    missing: list[str] = []
    for path, tree in _trees():
        for call in _log_calls(tree):
            where = f"{path.relative_to(ROOT)}:{call.lineno}"
            event = _event_of(call)
            literal = isinstance(event, str) and EVENT_NAME.fullmatch(event) is not None
            if literal or (path == RELAYING and _relays_its_event(call)):
                found.append(where)
            else:
                missing.append(where)
    return found, missing


def _pass_failure_events() -> tuple[list[str], list[str]]:
    """The ``event=`` of every ``PassFailures(...)`` made: (literal codes, places without one)."""
    found: list[str] = []
    missing: list[str] = []
    for path, tree in _trees():
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and _receiver(node.func) == "PassFailures"):
                continue
            event = next((k.value for k in node.keywords if k.arg == "event"), None)
            if (
                isinstance(event, ast.Constant)
                and isinstance(event.value, str)
                and EVENT_NAME.fullmatch(event.value)
            ):
                found.append(event.value)
            else:
                missing.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found, missing


def test_every_log_call_in_server_and_agent_passes_an_upper_snake_event() -> None:
    found, missing = _scan()

    assert not missing, 'log calls without extra={"event": "UPPER_SNAKE_NAME"} (a literal):\n' + "\n".join(
        missing
    )
    # The scan must actually see the code's log calls, or it proves nothing.
    assert len(found) >= 25


def test_every_background_loop_names_a_literal_failure_event() -> None:
    found, missing = _pass_failure_events()

    assert not missing, 'PassFailures(...) without event="UPPER_SNAKE_NAME" (a literal):\n' + "\n".join(
        missing
    )
    # The loops the Service runs in the background, each with its own code.
    assert {
        "IMPORT_RETENTION_FAILED",
        "ARTIFACT_RETENTION_FAILED",
        "ARTIFACT_REBUILD_FAILED",
        "LEASE_REAPER_FAILED",
        "AGENT_HEARTBEAT_FAILED",
        "EVENT_POLL_FAILED",
    } <= set(found)


def test_the_scan_recognises_calls_without_an_event() -> None:
    tree = ast.parse(
        "\n".join(
            [
                '_log.warning("no event")',
                'logger.info("wrong key", extra={"evt": "X_Y"})',
                'self._log.error("lower case", extra={"event": "lease lost"})',
                'logging.getLogger("x").exception("dynamic", extra={"event": name})',
                '_log.info("ok", extra={"event": "RUN_CLAIMED"})',
                'run_log.append("not a logging call")',
            ]
        )
    )

    calls = _log_calls(tree)
    events = [_event_of(call) for call in calls]

    assert len(calls) == 5
    assert [e for e in events if isinstance(e, str) and EVENT_NAME.fullmatch(e)] == ["RUN_CLAIMED"]
