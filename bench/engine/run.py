"""Engine and HTTP Provider benchmark.

Run from the repository root: ``.venv/bin/python -m bench.engine`` (``--quick`` for a smoke run).
Every phase runs in a fresh subprocess (clean peak RSS, no shared warm state); the vendor
mock runs in its own process on loopback. The last line printed is one JSON object.

Each phase reports a wall-clock rate and a rate per CPU-second of its own process. On a host whose
two CPUs are shared with other work the wall-clock rate drops with the load; the CPU rate is what
one core delivers to the phase and is the figure to compare across runs.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

import aiohttp
import httpx

ROOT = Path(__file__).resolve().parents[2]


def _phase(name: str, count: int, *, url: str = "", concurrency: int = 64) -> dict[str, Any]:
    command = [sys.executable, "-m", "bench.engine._phases", name, "--count", str(count)]
    command += ["--concurrency", str(concurrency), "--url", url]
    completed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        raise RuntimeError(f"phase {name} failed:\n{completed.stderr[-2000:]}")
    figures: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    return figures


class MockVendor:
    """The vendor mock in its own process; it exits when its stdin closes."""

    def __init__(self) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-m", "bench.engine._mock_server"],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        stdout: IO[str] | None = self._process.stdout
        assert stdout is not None
        line = stdout.readline().split()
        if len(line) != 2 or line[0] != "PORT":
            self.stop()
            raise RuntimeError("the vendor mock did not start")
        self.url = f"http://127.0.0.1:{line[1]}"

    def stop(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


_LABELS = {
    "aiohttp": "bare aiohttp loop",
    "session": "HTTP Provider session without engine",
    "http": "HTTP Provider through the engine",
}


def _median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    ordered = sorted(runs, key=lambda figures: figures["items_per_s"])
    return ordered[len(ordered) // 2]


def _median_cpu_rate(runs: list[dict[str, Any]]) -> float:
    rates = sorted(float(figures["items_per_cpu_s"]) for figures in runs)
    return rates[len(rates) // 2]


def _load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small counts, for a smoke run")
    parser.add_argument("--noop-count", type=int, default=1_000_000)
    parser.add_argument("--http-count", type=int, default=100_000)
    parser.add_argument("--httpx-count", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3, help="interleaved rounds of the HTTP phases")
    args = parser.parse_args()
    noop_count, small_count, http_count = args.noop_count, 100_000, args.http_count
    httpx_count, repeat, concurrency = args.httpx_count, max(1, args.repeat), args.concurrency
    if args.quick:
        noop_count, small_count, http_count, httpx_count, repeat = 50_000, 10_000, 5_000, 1_000, 1

    print(f"host: {_cpu_model()}, {platform.machine()}, python {platform.python_version()}")
    print(f"aiohttp {aiohttp.__version__}, httpx {httpx.__version__}, concurrency {concurrency}")
    print(f"load average before the run: {_load()}")
    noop_big = _phase("noop", noop_count, concurrency=concurrency)
    print(
        f"noop engine, {noop_count:,} recipients: {noop_big['items_per_s']:,.0f} items/s "
        f"({noop_big['items_per_cpu_s']:,.0f} per CPU-second), peak RSS "
        f"{noop_big['peak_rss_mib']} MiB, {noop_big['progress_events']} progress events"
    )
    noop_small = _phase("noop", small_count, concurrency=concurrency)
    print(
        f"noop engine, {small_count:,} recipients: {noop_small['items_per_s']:,.0f} items/s "
        f"({noop_small['items_per_cpu_s']:,.0f} per CPU-second), peak RSS {noop_small['peak_rss_mib']} MiB"
    )

    vendor = MockVendor()
    runs: dict[str, list[dict[str, Any]]] = {"aiohttp": [], "session": [], "http": []}
    try:
        # Interleaved rounds, median kept: the CPU is shared, so a slow moment must not
        # land on one contender only.
        for round_number in range(1, repeat + 1):
            for name, results in runs.items():
                figures = _phase(name, http_count, url=vendor.url, concurrency=concurrency)
                results.append(figures)
                print(
                    f"round {round_number}: {_LABELS[name]}, {http_count:,} requests: "
                    f"{figures['items_per_s']:,.0f} items/s ({figures['items_per_cpu_s']:,.0f} per CPU-second)"
                )
        bare_httpx = _phase("httpx", httpx_count, url=vendor.url, concurrency=concurrency)
        print(f"bare httpx loop, {httpx_count:,} requests: {bare_httpx['items_per_s']:,.0f} req/s")
    finally:
        vendor.stop()
    bare_aiohttp, session, http = (_median(runs[name]) for name in ("aiohttp", "session", "http"))
    cpu_rates = {name: _median_cpu_rate(results) for name, results in runs.items()}
    print(
        f"median of {repeat}: bare aiohttp {bare_aiohttp['items_per_s']:,.0f} req/s, provider session "
        f"{session['items_per_s']:,.0f} items/s, provider through the engine {http['items_per_s']:,.0f} items/s "
        f"(p50 {http['p50_ms']} ms, p95 {http['p95_ms']} ms, p99 {http['p99_ms']} ms)"
    )
    everything = [noop_big, noop_small, *runs["aiohttp"], *runs["session"], *runs["http"], bare_httpx]
    failures = [figures for figures in everything if figures["succeeded"] != figures["items"]]
    if failures:
        print(f"WARNING: {len(failures)} phase(s) had failed items: {failures}")
    print(f"load average after the run: {_load()}")
    summary = {
        "noop_items_per_s": noop_big["items_per_s"],
        "noop_items_per_cpu_s": noop_big["items_per_cpu_s"],
        "http_items_per_s": http["items_per_s"],
        "bare_aiohttp_items_per_s": bare_aiohttp["items_per_s"],
        "bare_httpx_items_per_s": bare_httpx["items_per_s"],
        "http_ratio": round(http["items_per_s"] / bare_aiohttp["items_per_s"], 3),
        "provider_session_items_per_s": session["items_per_s"],
        "provider_session_ratio": round(session["items_per_s"] / bare_aiohttp["items_per_s"], 3),
        # Per CPU-second of the client process (median over rounds): robust to other load on the host.
        "http_cpu_ratio": round(cpu_rates["http"] / cpu_rates["aiohttp"], 3),
        "provider_session_cpu_ratio": round(cpu_rates["session"] / cpu_rates["aiohttp"], 3),
        "p50_ms": http["p50_ms"],
        "p95_ms": http["p95_ms"],
        "p99_ms": http["p99_ms"],
        "rss_100k_mib": noop_small["peak_rss_mib"],
        "rss_1m_mib": noop_big["peak_rss_mib"],
        "progress_events": noop_big["progress_events"],
        "counts": {
            "noop": noop_count,
            "http": http_count,
            "httpx": httpx_count,
            "concurrency": concurrency,
            "repeat": repeat,
        },
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
