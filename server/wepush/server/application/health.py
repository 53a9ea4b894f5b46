"""Liveness and readiness: is the process alive, and can it serve (database, migrations, secrets, artifacts)?"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CheckResult:
    name: str
    ok: bool
    detail: str


ReadinessCheck = Callable[[], Awaitable[CheckResult]]


@dataclass(frozen=True, slots=True)
class Readiness:
    ready: bool
    checks: tuple[CheckResult, ...]


class HealthService:
    """Runs readiness checks concurrently with a bound on each, so one hung dependency cannot hang probes."""

    def __init__(self, checks: Sequence[ReadinessCheck] = (), timeout_s: float = 2.0) -> None:
        self._checks = list(checks)
        self._timeout_s = timeout_s

    def add_check(self, check: ReadinessCheck) -> None:
        self._checks.append(check)

    async def _run(self, check: ReadinessCheck) -> CheckResult:
        name = getattr(check, "check_name", getattr(check, "__name__", "check"))
        try:
            return await asyncio.wait_for(check(), self._timeout_s)
        except TimeoutError:
            return CheckResult(name, False, "timed out")
        except Exception as exc:  # a failing probe is a result, not a crash
            return CheckResult(name, False, exc.__class__.__name__)

    async def readiness(self) -> Readiness:
        results = await asyncio.gather(*(self._run(check) for check in self._checks))
        return Readiness(ready=all(r.ok for r in results), checks=tuple(results))
