"""End-to-end benchmark: recipients through the standalone Service versus the embedded SDK alone.

Run from the repository root: ``.venv/bin/python -m bench.e2e`` (``make bench-e2e``; ``--quick`` for a
smoke run). One vendor mock (``bench/engine/_mock_server.py``, its own process on loopback) serves every
phase:

1. the embedded SDK sends the audience (its own process), as the baseline;
2. a fresh ``wepush serve`` process: the audience CSV is imported through the SDK (timed separately),
   a job is confirmed and started, SSE subscribers watch the run until RUN_COMPLETED; then the run
   detail, the event log and the SUCCEEDED_ITEMS artifact are read back;
3. the embedded baseline again, so the comparison brackets the Service phase in time.

``e2e_items_per_s`` = recipients / (start request → the first subscriber receives RUN_COMPLETED);
``ratio`` = that / the mean of the embedded rounds. The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ._audience import write_csv
from ._procs import ROOT, MockVendor, mock_vendor
from ._profile_report import summarise
from ._service_phase import service_phase


def _embedded(vendor: MockVendor, count: int, concurrency: int, loop: str) -> dict[str, Any]:
    command = [sys.executable, "-m", "bench.e2e._embedded", "--url", vendor.url, "--count", str(count)]
    command += ["--concurrency", str(concurrency), "--loop", loop]
    cpu0 = vendor.cpu_s()
    completed = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, check=False, timeout=max(600, count / 50)
    )
    if completed.returncode != 0:
        raise RuntimeError(f"the embedded phase failed:\n{completed.stderr[-3000:]}")
    figures: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    figures["vendor_cpu_s"] = round(vendor.cpu_s() - cpu0, 2)
    print(
        f"embedded SDK ({loop}): {figures['items_per_s']:,.0f} items/s in {figures['seconds']:.1f}s, "
        f"p50/p95/p99 {figures['p50_ms']}/{figures['p95_ms']}/{figures['p99_ms']} ms, "
        f"{figures['progress_events']} progress events, CPU {figures['cpu_s']:.1f}s "
        f"(vendor {figures['vendor_cpu_s']:.1f}s), peak RSS {figures['peak_rss_mib']} MiB, "
        f"{figures['mean_in_flight']} in flight on average, dispatch stalled {figures['dispatch_gap_s']}s ({figures['dispatch_gap_at_read_batch_s']}s "
        f"waiting for recipient batches)",
        flush=True,
    )
    return figures


@contextmanager
def _work_dir(keep: Path | None) -> Iterator[Path]:
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        if any(keep.iterdir()):
            raise SystemExit(
                f"--work {keep}: use a new or empty directory (the Service needs a fresh data dir)"
            )
        yield keep.resolve()
        return
    with tempfile.TemporaryDirectory(prefix="wepush-bench-e2e-") as tmp:
        yield Path(tmp)


def _load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def _host() -> str:
    model = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} CPUs, {platform.machine()}, Python {platform.python_version()}"


def _print_service(s: dict[str, Any]) -> None:
    print(
        f"import: {s['recipients']:,} rows, upload {s['import_upload_s']:.1f}s + commit "
        f"{s['import_commit_s']:.1f}s ({s['import_rows_per_s']:,.0f} rows/s; not part of the e2e rate)"
    )
    print(
        f"Service run: {s['state']} {s['counts']}, {s['items_per_s']:,.0f} items/s in {s['seconds']:.1f}s "
        f"(start request -> first RUN_COMPLETED; Service's own duration {s['service_duration']})"
    )
    print(
        f"  latency p50/p95/p99 {s['p50_ms']}/{s['p95_ms']}/{s['p99_ms']} ms over {s['latency_items']:,} "
        f"items; event log {s['event_log']}"
    )
    print(
        f"  {s['mean_in_flight']} items in flight on average; dispatch stalled >= 10 ms {s['dispatch_gaps']} times, {s['dispatch_gap_s']}s in all; "
        f"{s['dispatch_gaps_at_read_batch']} of them ({s['dispatch_gap_at_read_batch_s']}s) waiting for "
        f"the next recipient batch"
    )
    if s.get("subscribers"):
        print(
            f"  SSE: {s['subscribers_completed']}/{s['subscribers']} subscribers saw RUN_COMPLETED, events "
            f"each {s['events_per_subscriber']}, PROGRESS each {s['progress_per_subscriber']}, "
            f"out of sequence {s['out_of_sequence_events']}, reconnects {s['reconnects']}, spread {s['completion_spread_ms']} ms, "
            f"errors {s['subscriber_errors']}"
        )
    print(
        f"  RSS idle {s['service_idle_rss_mib']} MiB, import peak {s['service_import_peak_rss_mib']} MiB, "
        f"run peak {s['service_run_peak_rss_mib']} MiB (sampled max {s['service_run_sampled_max_rss_mib']})"
    )
    print(
        f"  CPU during the run: Service {s['service_cpu_s']}s {s['service_thread_cpu_s']}, vendor "
        f"{s['vendor_cpu_s']}s, driver+subscribers {s['driver_cpu_s']}s; log warnings/errors "
        f"{s['service_log_warnings']}",
        flush=True,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.e2e", description=__doc__.splitlines()[0])
    parser.add_argument("--recipients", type=int, default=100_000)
    parser.add_argument("--subscribers", type=int, default=50)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--quick", action="store_true", help="5,000 recipients, for a smoke run")
    parser.add_argument("--no-asyncio-baseline", action="store_true", help="skip the asyncio-loop round")
    parser.add_argument(
        "--profile", type=Path, help="run the Service under cProfile and write its stats to this file"
    )
    parser.add_argument(
        "--service-env",
        action="append",
        default=[],
        metavar="WEPUSH_KEY=VALUE",
        help="extra configuration for the Service (repeatable), e.g. WEPUSH_DATABASE_POOL_SIZE=1",
    )
    parser.add_argument("--work", type=Path, help="keep the data, logs and artifacts in this directory")
    args = parser.parse_args(argv)
    count = 5_000 if args.quick else args.recipients
    load_before = _load()
    print(f"host: {_host()}; load average before: {load_before}")
    print(f"{count:,} recipients, concurrency {args.concurrency}, {args.subscribers} SSE subscribers")
    with _work_dir(args.work) as work, mock_vendor() as vendor:
        csv_path = write_csv(work / "audience.csv", count)
        before = _embedded(vendor, count, args.concurrency, "uvloop")
        service = service_phase(
            vendor,
            csv_path=csv_path,
            work=work,
            concurrency=args.concurrency,
            subscribers=args.subscribers,
            timeout_s=max(600.0, count / 50),
            profile_to=args.profile.resolve() if args.profile else None,
            env=dict(item.split("=", 1) for item in args.service_env),
        )
        _print_service(service)
        if args.profile is not None:
            print(summarise(args.profile.resolve(), top=25), flush=True)
        after = _embedded(vendor, count, args.concurrency, "uvloop")
        plain = None if args.no_asyncio_baseline else _embedded(vendor, count, args.concurrency, "asyncio")
    for label, succeeded in (
        ("the Service run", service["counts"]["succeeded"]),
        *((f"embedded round {r['loop']}", r["succeeded"]) for r in (before, after)),
    ):
        if succeeded != count:
            # A rate over a run that did not deliver everything would compare different work.
            raise SystemExit(f"{label} delivered {succeeded:,} of {count:,} recipients: no figures")
    rounds = [before, after]
    embedded_rate = statistics.fmean(r["items_per_s"] for r in rounds)
    ratio = service["items_per_s"] / embedded_rate
    # Per CPU-second of the sending process: what the wall-clock ratio tends to on an idle machine,
    # where both contenders are bound by their one event-loop thread.
    service_per_cpu = count / service["service_cpu_s"]
    embedded_per_cpu = statistics.fmean(count / r["cpu_s"] for r in rounds)
    print(
        f"ratio e2e / embedded = {service['items_per_s']:,.0f} / {embedded_rate:,.0f} = {ratio:.3f} "
        f"(target >= 0.7); per CPU-second {service_per_cpu:,.0f} / {embedded_per_cpu:,.0f} = "
        f"{service_per_cpu / embedded_per_cpu:.3f}; load average after: {_load()}"
    )
    summary = {
        "e2e_items_per_s": service["items_per_s"],
        "embedded_items_per_s": round(embedded_rate, 1),
        "ratio": round(ratio, 3),
        "p50_ms": service["p50_ms"],
        "p95_ms": service["p95_ms"],
        "p99_ms": service["p99_ms"],
        "service_peak_rss_mib": service["service_peak_rss_mib"],
        "progress_events": service["progress_events"],
        "recipients": count,
        "concurrency": args.concurrency,
        "e2e_seconds": service["seconds"],
        "import_s": round(service["import_upload_s"] + service["import_commit_s"], 3),
        "e2e_items_per_cpu_s": round(service_per_cpu, 1),
        "embedded_items_per_cpu_s": round(embedded_per_cpu, 1),
        "cpu_ratio": round(service_per_cpu / embedded_per_cpu, 3),
        "load_average_before": load_before,
        "profiled": args.profile is not None,
        "service_env": args.service_env,
        "service": service,
        "embedded_rounds": rounds,
        "embedded_asyncio": plain,
    }
    print(json.dumps(summary, separators=(",", ":")), flush=True)
