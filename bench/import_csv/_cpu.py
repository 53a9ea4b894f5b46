"""CPU time spent by the Service process and by the local PostgreSQL server, read from ``/proc``.

Wall-clock figures say how long an import took; CPU figures say which process did the work, and so
what the machine's cores allow: work one process does in a single statement cannot spread over more
than one core.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int | str) -> list[str]:
    # The command name (field 2) may hold spaces; every field after it follows the last ")".
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def process_cpu_s(pid: int | str, *, with_children: bool = False) -> float:
    """User + system CPU seconds of one process (and of its children that have exited and been reaped)."""
    fields = _stat_fields(pid)
    # After the command name: utime, stime, cutime, cstime are fields 14..17 of stat(5), here 11..14.
    used = int(fields[11]) + int(fields[12])
    if with_children:
        used += int(fields[13]) + int(fields[14])
    return used / _TICKS


def postgres_cpu_s() -> float:
    """CPU seconds of every process of the local PostgreSQL server: the postmaster with the backends that
    have exited, and every backend and background process still running. 0 when none is visible."""
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or _command(entry.name) != "postgres":
            continue
        try:
            # The postmaster is the one whose parent is not PostgreSQL; it reaps every backend.
            postmaster = _command(_stat_fields(entry.name)[1]) != "postgres"
            total += process_cpu_s(entry.name, with_children=postmaster)
        except (FileNotFoundError, ProcessLookupError):
            continue  # the process ended while being read
    return total


def _command(pid: int | str) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except (FileNotFoundError, ProcessLookupError):
        return ""


@dataclass(frozen=True)
class CpuUse:
    service_s: float
    postgres_s: float


class CpuMeter:
    """CPU used by the Service process ``pid`` and by PostgreSQL since the last reading."""

    def __init__(self, pid: int) -> None:
        self._pid = pid
        self._last = self._now()

    def _now(self) -> CpuUse:
        return CpuUse(process_cpu_s(self._pid), postgres_cpu_s())

    def lap(self) -> CpuUse:
        now = self._now()
        used = CpuUse(now.service_s - self._last.service_s, now.postgres_s - self._last.postgres_s)
        self._last = now
        return used
