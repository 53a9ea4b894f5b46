"""A readable summary of the Service's cProfile stats: own time grouped by component, then the top
functions by own time (cumulative times of coroutines include their suspensions, so own time is the
figure to read)."""

from __future__ import annotations

import io
import pstats
from pathlib import Path

#: (label, path fragment) in match order; the first fragment found in a function's file names its group.
_GROUPS = (
    ("engine", "/wepush/agent/engine/"),
    ("HTTP provider", "/wepush/agent/providers/"),
    ("Service execution (sinks, artifacts)", "/wepush/server/application/execution/"),
    ("Service application", "/wepush/server/application/"),
    ("Service persistence", "/wepush/server/infra/db/"),
    ("Service SSE broker", "/wepush/server/infra/events/"),
    ("Service other infra", "/wepush/server/infra/"),
    ("Service API + middleware", "/wepush/server/api/"),
    ("Service domain", "/wepush/server/domain/"),
    ("Service other", "/wepush/server/"),
    ("SQLAlchemy", "/sqlalchemy/"),
    ("aiosqlite", "/aiosqlite/"),
    ("aiohttp (client)", "/aiohttp/"),
    ("uvicorn/starlette/connexion", "/uvicorn/"),
    ("uvicorn/starlette/connexion", "/starlette/"),
    ("uvicorn/starlette/connexion", "/connexion/"),
    ("asyncio", "/asyncio/"),
    ("json", "/json/"),
)


def _group(filename: str) -> str:
    for label, fragment in _GROUPS:
        if fragment in filename:
            return label
    if filename.startswith("~"):
        return "built-ins (C functions)"
    return "other Python"


def by_component(stats: pstats.Stats) -> list[tuple[str, float]]:
    totals: dict[str, float] = {}
    entries = stats.stats  # type: ignore[attr-defined]  # pstats keeps its table undocumented
    for (filename, _line, _name), (_cc, _nc, own, _cum, _callers) in entries.items():
        label = _group(filename)
        totals[label] = totals.get(label, 0.0) + own
    return sorted(totals.items(), key=lambda kv: -kv[1])


def summarise(stats_file: Path, top: int = 40) -> str:
    """Write ``<stats_file>.txt`` (components, then own-time and cumulative rankings); return the
    component table and the own-time ranking."""
    stats = pstats.Stats(str(stats_file))
    groups = by_component(stats)
    total = sum(own for _, own in groups) or 1.0
    table = "\n".join(f"{own:8.2f}s {own / total:6.1%}  {label}" for label, own in groups)
    parts = [f"== own time by component (total {total:.2f}s) ==\n{table}\n"]
    for order in ("tottime", "cumulative"):
        out = io.StringIO()
        pstats.Stats(str(stats_file), stream=out).sort_stats(order).print_stats(top)
        parts.append(f"== by {order} ==\n{out.getvalue()}")
    stats_file.with_suffix(".txt").write_text("\n".join(parts), encoding="utf-8")
    return "\n".join(parts[:2])
