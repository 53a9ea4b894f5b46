"""Watch a run as its audience would: SSE subscribers on the run's event stream, plus a sampler of the
Service's memory. All in one asyncio loop of the driver process.

The subscribers share one ``httpx.AsyncClient`` but each holds its own streaming connection, so the
Service serves 50 independent streams while the driver spends little CPU on client set-up (an
``AsyncClient`` per subscriber costs a TLS context each, about a CPU-second for fifty, all at the start
of the run). Each replays the run's events from the beginning with the SDK's ``SSEDecoder``, checks the
sequences are contiguous, reconnects with ``Last-Event-ID`` if the Service drops it, and stops at
RUN_COMPLETED.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from wepush.sdk import WePushClient
from wepush.sdk.remote import SSEDecoder

from ._journey import TERMINAL_STATES, run_state
from ._procs import ServiceProcess

SAMPLE_INTERVAL_S = 0.25
STATE_POLL_S = 5.0
#: After the run detail reports a terminal state, the subscribers have this long to see RUN_COMPLETED.
COMPLETION_GRACE_S = 60.0
MAX_RECONNECTS = 5


@dataclass
class SubscriberTally:
    events: int = 0
    by_type: dict[str, int] = field(default_factory=dict)
    out_of_sequence: int = 0
    reconnects: int = 0
    completed_at: float | None = None
    error: str | None = None


@dataclass
class Observation:
    tallies: list[SubscriberTally]
    rss_samples_mib: list[float]
    terminal_polled_at: float | None

    @property
    def first_completed_at(self) -> float | None:
        times = [t.completed_at for t in self.tallies if t.completed_at is not None]
        return min(times) if times else None

    @property
    def last_completed_at(self) -> float | None:
        times = [t.completed_at for t in self.tallies if t.completed_at is not None]
        return max(times) if times else None


async def _stream_once(
    http: httpx.AsyncClient, path: str, headers: dict[str, str], tally: SubscriberTally, after: int
) -> int:
    """Read one connection's events; returns the last sequence seen (RUN_COMPLETED sets completed_at)."""
    decoder, utf8 = SSEDecoder(), codecs.getincrementaldecoder("utf-8")()
    if after:
        headers = {**headers, "Last-Event-ID": str(after)}
    async with http.stream("GET", path, headers=headers) as response:
        if response.status_code != 200:
            raise RuntimeError(f"GET {path} answered {response.status_code}")
        async for chunk in response.aiter_bytes():
            for sse in decoder.feed(utf8.decode(chunk)):
                data = json.loads(sse.data)
                kind = str(data.get("type") or sse.event.upper())
                tally.events += 1
                tally.by_type[kind] = tally.by_type.get(kind, 0) + 1
                if sse.id is not None and sse.id.isdigit():
                    if int(sse.id) != after + 1:
                        tally.out_of_sequence += 1
                    after = int(sse.id)
                if kind == "RUN_COMPLETED":
                    tally.completed_at = time.perf_counter()
                    return after
    return after


async def _subscribe(http: httpx.AsyncClient, path: str, token: str, tally: SubscriberTally) -> None:
    headers = {"Authorization": f"Bearer {token}", "Accept": "text/event-stream", "Cache-Control": "no-cache"}
    after = 0
    try:
        while tally.completed_at is None:
            after = await _stream_once(http, path, headers, tally, after)
            if tally.completed_at is None:
                tally.reconnects += 1
                if tally.reconnects > MAX_RECONNECTS:
                    raise RuntimeError(f"dropped {tally.reconnects} times")
    except Exception as exc:  # one broken subscriber is a figure, not the end of the benchmark
        tally.error = f"{type(exc).__name__}: {exc}"


async def _sample(service: ServiceProcess, stop: asyncio.Event, samples: list[float]) -> None:
    while not stop.is_set():
        with contextlib.suppress(OSError):
            samples.append(service.rss_mib())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), SAMPLE_INTERVAL_S)


async def _watch_state(client: WePushClient, workspace_id: str, run_id: str, timeout_s: float) -> float:
    """Poll the run detail rarely (the subscribers are the fast path); returns when it turned terminal."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        await asyncio.sleep(STATE_POLL_S)
        state = await asyncio.to_thread(run_state, client, workspace_id, run_id)
        if state in TERMINAL_STATES:
            return time.perf_counter()
    raise TimeoutError(f"run {run_id} did not reach a terminal state within {timeout_s:.0f}s")


async def observe(
    client: WePushClient,
    service: ServiceProcess,
    workspace_id: str,
    run_id: str,
    *,
    subscribers: int,
    timeout_s: float,
) -> Observation:
    tallies = [SubscriberTally() for _ in range(subscribers)]
    samples: list[float] = []
    stop = asyncio.Event()
    sampler = asyncio.create_task(_sample(service, stop, samples))
    path = f"/api/v1/workspaces/{workspace_id}/runs/{run_id}/events"
    limits = httpx.Limits(max_connections=subscribers + 1, max_keepalive_connections=0)
    timeout = httpx.Timeout(10.0, read=60.0)  # the Service sends a heartbeat every 15 s
    http = httpx.AsyncClient(base_url=service.base_url, limits=limits, timeout=timeout)
    streams = asyncio.gather(*(_subscribe(http, path, service.token, t) for t in tallies))
    watcher = asyncio.create_task(_watch_state(client, workspace_id, run_id, timeout_s))
    terminal_at: float | None = None
    try:
        racing: set[asyncio.Future[Any]] = {streams, watcher}
        done, _ = await asyncio.wait(racing, return_when=asyncio.FIRST_COMPLETED)
        if streams not in done:
            terminal_at = watcher.result()  # raises on timeout
            await asyncio.wait_for(streams, COMPLETION_GRACE_S)
        if not subscribers:
            # Nobody listens: the state poll is the only signal, so poll it finely from here.
            terminal_at = await _poll_until_terminal(client, workspace_id, run_id, timeout_s)
    finally:
        stop.set()
        watcher.cancel()
        streams.cancel()
        await asyncio.gather(sampler, watcher, streams, return_exceptions=True)
        await http.aclose()
    return Observation(tallies, samples, terminal_at)


async def _poll_until_terminal(
    client: WePushClient, workspace_id: str, run_id: str, timeout_s: float
) -> float:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if await asyncio.to_thread(run_state, client, workspace_id, run_id) in TERMINAL_STATES:
            return time.perf_counter()
        await asyncio.sleep(0.1)
    raise TimeoutError(f"run {run_id} did not reach a terminal state within {timeout_s:.0f}s")
