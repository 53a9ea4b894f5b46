"""The Service phase: a fresh ``wepush serve``, the audience imported through the SDK, one run started and
watched by SSE subscribers, then what the Service kept read back. Returns the phase's figures."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path
from typing import Any

from wepush.agent.engine import EngineOptions
from wepush.sdk import WePushClient

from ._journey import event_log_counts, prepare_job, start_run, succeeded_item_timings, text
from ._observe import Observation, observe
from ._procs import MockVendor, ServiceProcess, thread_cpu_s, wepush_serve
from ._stats import dispatch_gaps, percentiles


def _subscriber_figures(observation: Observation, began: float) -> dict[str, Any]:
    tallies = observation.tallies
    if not tallies:
        return {"subscribers": 0}
    completed = [t for t in tallies if t.completed_at is not None]
    first, last = observation.first_completed_at, observation.last_completed_at
    return {
        "subscribers": len(tallies),
        "subscribers_completed": len(completed),
        "subscriber_errors": sorted({t.error for t in tallies if t.error}),
        "events_per_subscriber": sorted({t.events for t in tallies}),
        "progress_per_subscriber": sorted({t.by_type.get("PROGRESS", 0) for t in tallies}),
        "out_of_sequence_events": sum(t.out_of_sequence for t in tallies),
        "reconnects": sum(t.reconnects for t in tallies),
        "completion_spread_ms": None if first is None or last is None else round((last - first) * 1000, 1),
        "first_completed_after_s": None if first is None else round(first - began, 3),
    }


def _thread_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {name: round(after[name] - before.get(name, 0.0), 2) for name in after}


def _warnings(service: ServiceProcess) -> int:
    log = service.log_path.read_text(encoding="utf-8", errors="replace")
    return sum(1 for line in log.splitlines() if "WARNING" in line or "ERROR" in line)


def _watched_run(
    client: WePushClient,
    service: ServiceProcess,
    vendor: MockVendor,
    *,
    csv_path: Path,
    work: Path,
    concurrency: int,
    subscribers: int,
    timeout_s: float,
    profiled: bool,
) -> dict[str, Any]:
    idle_rss = service.rss_mib()
    job = prepare_job(client, vendor.url, csv_path, concurrency)
    import_peak = service.peak_rss_mib()
    peak_reset = service.reset_peak_rss()
    cpu0, vendor0, threads0 = service.cpu_s(), vendor.cpu_s(), thread_cpu_s(service.pid)
    driver0 = time.process_time()
    if profiled:
        os.kill(service.pid, signal.SIGUSR1)  # _profiled_serve: profile from here
    run_id, began = start_run(client, job)
    observation = asyncio.run(
        observe(client, service, job.workspace_id, run_id, subscribers=subscribers, timeout_s=timeout_s)
    )
    ended = observation.first_completed_at or observation.terminal_polled_at
    assert ended is not None
    if profiled:
        os.kill(service.pid, signal.SIGUSR2)  # _profiled_serve: stop and write the stats
    service_cpu, vendor_cpu = service.cpu_s() - cpu0, vendor.cpu_s() - vendor0
    driver_cpu = time.process_time() - driver0
    threads = _thread_delta(threads0, thread_cpu_s(service.pid))
    run_peak = service.peak_rss_mib()
    detail = client.workspace(job.workspace_id).runs.get(run_id)
    events = event_log_counts(client, job.workspace_id, run_id)
    timings = succeeded_item_timings(client, job.workspace_id, run_id, work)
    elapsed = ended - began
    counts = detail.counts
    return {
        "run_id": run_id,
        "state": text(detail.state),
        "counts": {
            "total": counts.total,
            "succeeded": counts.succeeded,
            "failed": counts.failed,
            "unknown": counts.unknown,
            "unsent": counts.unsent,
        },
        "recipients": job.recipients,
        "import_upload_s": round(job.upload_s, 3),
        "import_commit_s": round(job.commit_s, 3),
        "import_rows_per_s": round(job.recipients / (job.upload_s + job.commit_s), 1),
        "seconds": round(elapsed, 3),
        "items_per_s": round(job.recipients / elapsed, 1),
        "service_duration": detail.duration,
        "latency_items": len(timings.latencies_ms),
        **percentiles(timings.latencies_ms),
        **dispatch_gaps(timings.spans, read_batch_size=EngineOptions().read_batch_size),
        "event_log": events,
        "progress_events": events.get("PROGRESS", 0),
        **_subscriber_figures(observation, began),
        "service_idle_rss_mib": round(idle_rss, 1),
        "service_import_peak_rss_mib": round(import_peak, 1),
        "service_run_peak_rss_mib": round(run_peak if peak_reset else max(observation.rss_samples_mib), 1),
        "service_run_sampled_max_rss_mib": round(max(observation.rss_samples_mib, default=0.0), 1),
        "service_cpu_s": round(service_cpu, 2),
        "service_thread_cpu_s": threads,
        "vendor_cpu_s": round(vendor_cpu, 2),
        "driver_cpu_s": round(driver_cpu, 2),
    }


def service_phase(
    vendor: MockVendor,
    *,
    csv_path: Path,
    work: Path,
    concurrency: int,
    subscribers: int,
    timeout_s: float,
    profile_to: Path | None = None,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    with wepush_serve(work / "service", profile_to=profile_to, env=env) as service:
        with WePushClient(service.base_url, service.token, request_timeout=300.0) as client:
            figures = _watched_run(
                client,
                service,
                vendor,
                csv_path=csv_path,
                work=work,
                concurrency=concurrency,
                subscribers=subscribers,
                timeout_s=timeout_s,
                profiled=profile_to is not None,
            )
        # VmHWM over the whole process life: the import's peak and the run's, whichever is higher.
        figures["service_peak_rss_mib"] = round(
            max(service.peak_rss_mib(), figures["service_import_peak_rss_mib"]), 1
        )
        figures["service_log_warnings"] = _warnings(service)
    return figures
