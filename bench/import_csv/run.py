"""``python -m bench.import_csv``: audience import throughput and memory of the real Service.

Phases (each Service phase in a fresh ``wepush serve`` process on a free loopback port):

1. SQLite, 100,000 rows: peak RSS of the Service (``VmHWM``).
2. SQLite, 1,000,000 rows: end-to-end rows/s and peak RSS; then the same file gzip-compressed
   (``Content-Encoding: gzip``), as a user sends a large export to save bandwidth.
3. PostgreSQL (a temporary database), 1,000,000 rows: end-to-end rows/s, and the CPU seconds the Service
   and the PostgreSQL server spent in the upload and in the commit.
4. Baselines with the same file: bare SQLite ``executemany`` into a table shaped like the staging table,
   and one server-side PostgreSQL ``COPY`` into an unindexed table.

The last line printed is one JSON object with the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from ._baselines import postgres_copy, sqlite_executemany
from ._data import expected_counts, write_csv
from ._postgres import dsn, temporary_database
from ._service import ImportTiming, import_file, wepush_serve

MIB = 1024 * 1024


def _checked(timing: ImportTiming) -> ImportTiming:
    expected = expected_counts(timing.rows)
    if timing.counts != expected or timing.recipients != expected["acceptedRows"]:
        raise RuntimeError(f"wrong counts: {timing.counts} / {timing.recipients}, expected {expected}")
    return timing


def _service_phase(
    name: str,
    work: Path,
    csv_path: Path,
    rows: int,
    env: dict[str, str] | None = None,
    *,
    content_encoding: str | None = None,
) -> tuple[ImportTiming, float, float]:
    with wepush_serve(work / name, env) as service:
        idle = service.rss_mib()
        timing = _checked(import_file(service, csv_path, rows, content_encoding=content_encoding))
        peak = service.peak_rss_mib()
    print(
        f"{name:>14}: {rows:>9,} rows  upload {timing.upload_s:6.1f}s  commit {timing.commit_s:5.1f}s  "
        f"{timing.rows_per_s:9,.0f} rows/s  RSS idle {idle:6.1f} MiB  peak {peak:6.1f} MiB\n"
        f"{'':>14}  CPU seconds  upload: Service {timing.upload_cpu.service_s:5.1f}  "
        f"PostgreSQL {timing.upload_cpu.postgres_s:5.1f}   commit: Service {timing.commit_cpu.service_s:5.1f}  "
        f"PostgreSQL {timing.commit_cpu.postgres_s:5.1f}",
        flush=True,
    )
    return timing, idle, peak


async def _postgres_phase(work: Path, csv_path: Path, rows: int) -> tuple[ImportTiming, float, float]:
    async with temporary_database() as name:
        env = {
            "WEPUSH_DATABASE_TYPE": "postgresql",
            "WEPUSH_DATABASE_URL": dsn(name).replace("postgresql://", "postgresql+asyncpg://"),
        }
        return await asyncio.to_thread(_service_phase, "postgresql-1m", work, csv_path, rows, env)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.import_csv", description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the large import")
    parser.add_argument("--small-rows", type=int, default=100_000, help="rows of the small import")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="wepush-bench-import-") as tmp:
        work = Path(tmp)
        started = time.perf_counter()
        large = write_csv(work / "large.csv", args.rows)
        small = write_csv(work / "small.csv", args.small_rows)
        print(
            f"generated {args.rows:,} rows ({large.stat().st_size / MIB:.1f} MiB) in {time.perf_counter() - started:.1f}s"
        )

        _, _, rss_small = _service_phase("sqlite-100k", work, small, args.small_rows)
        sqlite_large, _, rss_large = _service_phase("sqlite-1m", work, large, args.rows)
        compressed = work / "large.csv.gz"
        compressed.write_bytes(gzip.compress(large.read_bytes(), compresslevel=6))
        sqlite_gzip, _, rss_gzip = _service_phase(
            "sqlite-1m-gzip", work, compressed, args.rows, content_encoding="gzip"
        )
        pg_large, _, _ = asyncio.run(_postgres_phase(work, large, args.rows))

        compressed_mib = compressed.stat().st_size / MIB
        bare_rows, bare_s = sqlite_executemany(large, work)
        print(
            f"{'sqlite bare':>14}: {bare_rows:>9,} rows  executemany {bare_s:5.1f}s  {bare_rows / bare_s:9,.0f} rows/s"
        )
        copy_rows, copy_s, floor_s = asyncio.run(postgres_copy(large))
        print(
            f"{'pg COPY':>14}: {copy_rows:>9,} rows  copy {copy_s:5.1f}s  {copy_rows / copy_s:9,.0f} rows/s"
        )
        print(
            f"{'pg snapshot':>14}: {copy_rows:>9,} rows  INSERT ... SELECT alone {floor_s:5.1f}s  "
            f"(bounds the ratio at {copy_s / floor_s:.3f})"
        )

    figures: dict[str, Any] = {
        "rows": args.rows,
        "small_rows": args.small_rows,
        "sqlite_rows_per_s": round(sqlite_large.rows_per_s),
        "sqlite_upload_s": round(sqlite_large.upload_s, 2),
        "sqlite_commit_s": round(sqlite_large.commit_s, 2),
        "sqlite_gzip_rows_per_s": round(sqlite_gzip.rows_per_s),
        "sqlite_gzip_upload_s": round(sqlite_gzip.upload_s, 2),
        "gzip_body_mib": round(compressed_mib, 1),
        "rss_1m_gzip_mib": round(rss_gzip, 1),
        "sqlite_bare_rows_per_s": round(bare_rows / bare_s),
        "sqlite_ratio": round(sqlite_large.rows_per_s / (bare_rows / bare_s), 3),
        "pg_rows_per_s": round(pg_large.rows_per_s),
        "pg_upload_s": round(pg_large.upload_s, 2),
        "pg_commit_s": round(pg_large.commit_s, 2),
        "pg_copy_rows_per_s": round(copy_rows / copy_s),
        "pg_copy_ratio": round(pg_large.rows_per_s / (copy_rows / copy_s), 3),
        "pg_upload_cpu_service_s": round(pg_large.upload_cpu.service_s, 2),
        "pg_upload_cpu_postgres_s": round(pg_large.upload_cpu.postgres_s, 2),
        "pg_commit_cpu_service_s": round(pg_large.commit_cpu.service_s, 2),
        "pg_commit_cpu_postgres_s": round(pg_large.commit_cpu.postgres_s, 2),
        "cpus": os.cpu_count(),
        "pg_snapshot_copy_s": round(floor_s, 2),
        "pg_ratio_bound": round(copy_s / floor_s, 3),
        "rss_100k_mib": round(rss_small, 1),
        "rss_1m_mib": round(rss_large, 1),
        "rss_growth_mib": round(rss_large - rss_small, 1),
    }
    print(json.dumps(figures, separators=(",", ":")))
