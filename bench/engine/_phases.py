"""One benchmark phase per process, so peak RSS and warm-up never leak between phases.

``python -m bench.engine._phases <noop|http|session|aiohttp|httpx> --count N [--url URL] [--concurrency C]``
prints one JSON object with the phase's figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import time
from collections.abc import Iterator
from typing import Any

import aiohttp
import httpx

from wepush.agent.engine import (
    CancellationToken,
    ConcurrencyPolicy,
    ConfigDocument,
    ExecutionEngine,
    ExecutionPolicies,
    ExecutionPorts,
    MappingSecretResolver,
    ProviderFactory,
    ProviderOpenContext,
    ProviderRef,
    ProviderSendRequest,
    ProviderSession,
    RecipientRecord,
    RetryPolicy,
    RunExecutionSpec,
    SystemClock,
)
from wepush.agent.engine.testing import InMemoryRecipientSource
from wepush.agent.providers.http import HttpProviderFactory

from ._noop import CountingArtifactSink, CountingEventSink, CountingResultSink, NoopProviderFactory

PATH = "/notify"
HEADERS = {"Content-Type": "application/json", "User-Agent": "WePush-Next"}
BODY_TEMPLATE = '{"mobile":"{{mobile}}","content":"{{content}}"}'


def _recipients(count: int) -> Iterator[RecipientRecord]:
    for n in range(1, count + 1):
        yield RecipientRecord.of(f"item-{n}", n, {"mobile": f"138{n:08d}", "content": f"hello {n}"})


def _body(n: int) -> bytes:
    return json.dumps({"mobile": f"138{n:08d}", "content": f"hello {n}"}, separators=(",", ":")).encode()


def _rates(count: int, elapsed: float, cpu: float) -> dict[str, Any]:
    """Wall-clock and CPU-time rates. The CPU rate is what one core achieves when the process gets it
    whole; it stays meaningful while the machine's two CPUs are shared with other work."""
    return {
        "seconds": round(elapsed, 3),
        "items_per_s": round(count / elapsed, 1),
        "cpu_s": round(cpu, 3),
        "items_per_cpu_s": round(count / cpu, 1) if cpu > 0 else None,
    }


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


async def _engine_run(
    factory: ProviderFactory, provider_id: str, count: int, concurrency: int, account: Any, message: Any
) -> dict[str, Any]:
    results, events = CountingResultSink(keep_latency=provider_id != "bench.noop"), CountingEventSink()
    spec = RunExecutionSpec(
        run_id=f"bench-{provider_id}",
        provider=ProviderRef(provider_id),
        account_config=ConfigDocument.from_json("bench/account", "1", account),
        message_config=ConfigDocument.from_json("bench/message", "1", message),
        policies=ExecutionPolicies(
            concurrency=ConcurrencyPolicy(min=1, max=concurrency, target=concurrency),
            retry=RetryPolicy(max_attempts=1),
        ),
    )
    ports = ExecutionPorts(
        recipient_source=InMemoryRecipientSource(records=_recipients(count)),
        secret_resolver=MappingSecretResolver({}),
        result_sink=results,
        artifact_sink=CountingArtifactSink(),
        event_sink=events,
        clock=SystemClock(),
    )
    engine = ExecutionEngine({provider_id: factory})
    started, cpu_started = time.perf_counter(), time.process_time()
    handle = await engine.start(spec, ports)
    summary = await handle.completion()
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    figures: dict[str, Any] = {
        "items": summary.total,
        "succeeded": summary.succeeded,
        **_rates(summary.total, elapsed, cpu),
        "progress_events": events.progress,
        "events": events.events,
        "peak_rss_mib": round(_peak_rss_mib(), 1),
    }
    if results.latencies_ms:
        cuts = statistics.quantiles(results.latencies_ms, n=100, method="inclusive")
        figures.update(p50_ms=round(cuts[49], 3), p95_ms=round(cuts[94], 3), p99_ms=round(cuts[98], 3))
    return figures


async def _noop(count: int, concurrency: int) -> dict[str, Any]:
    return await _engine_run(NoopProviderFactory(), "bench.noop", count, concurrency, {}, {})


async def _http(url: str, count: int, concurrency: int) -> dict[str, Any]:
    # The mock listens on loopback, which the production policy refuses; the test setting re-opens it.
    factory = HttpProviderFactory(allow_loopback_for_tests=True)
    account = {"baseUrl": url, "requestTimeout": "PT30S"}
    message = {"method": "POST", "path": PATH, "headers": HEADERS, "bodyTemplate": BODY_TEMPLATE}
    return await _engine_run(factory, "wepush.http", count, concurrency, account, message)


async def _http_session_only(url: str, count: int, concurrency: int) -> dict[str, Any]:
    """The HTTP Provider session driven by plain workers: provider overhead without the engine."""
    factory = HttpProviderFactory(allow_loopback_for_tests=True)
    account = ConfigDocument.from_json("bench/account", "1", {"baseUrl": url, "requestTimeout": "PT30S"})
    message = ConfigDocument.from_json(
        "bench/message",
        "1",
        {"method": "POST", "path": PATH, "headers": HEADERS, "bodyTemplate": BODY_TEMPLATE},
    )
    context = ProviderOpenContext(
        run_id="bench-session",
        account_config=account,
        message_config=message,
        secrets=MappingSecretResolver({}),
        policies=ExecutionPolicies(concurrency=ConcurrencyPolicy(min=1, max=concurrency, target=concurrency)),
        dry_run=False,
        clock=SystemClock(),
    )
    records = _recipients(count)
    ok = 0

    async def worker(session: ProviderSession) -> None:
        nonlocal ok
        for record in records:
            request = ProviderSendRequest("bench", record.item_id, 1, record, message, record.item_id, None)
            result = await session.send(request, CancellationToken())
            ok += result.success

    session = await factory.open(context)
    try:
        started, cpu_started = time.perf_counter(), time.process_time()
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    finally:
        await session.close()
    return {"items": count, "succeeded": ok, **_rates(count, elapsed, cpu)}


async def _bare_aiohttp(url: str, count: int, concurrency: int) -> dict[str, Any]:
    connector = aiohttp.TCPConnector(limit=concurrency, limit_per_host=concurrency, keepalive_timeout=75)
    next_item = iter(range(1, count + 1))
    ok = 0

    async def worker(session: aiohttp.ClientSession) -> None:
        nonlocal ok
        for n in next_item:
            async with session.post(url + PATH, data=_body(n), headers=HEADERS) as response:
                await response.read()
                ok += response.status == 200

    async with aiohttp.ClientSession(connector=connector) as session:
        started, cpu_started = time.perf_counter(), time.process_time()
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    return {"items": count, "succeeded": ok, **_rates(count, elapsed, cpu)}


async def _bare_httpx(url: str, count: int, concurrency: int) -> dict[str, Any]:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    next_item = iter(range(1, count + 1))
    ok = 0

    async def worker(client: httpx.AsyncClient) -> None:
        nonlocal ok
        for n in next_item:
            response = await client.post(url + PATH, content=_body(n), headers=HEADERS)
            ok += response.status_code == 200

    async with httpx.AsyncClient(limits=limits) as client:
        started, cpu_started = time.perf_counter(), time.process_time()
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    return {"items": count, "succeeded": ok, **_rates(count, elapsed, cpu)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("phase", choices=["noop", "http", "session", "aiohttp", "httpx"])
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--url", default="")
    args = parser.parse_args()
    if args.phase == "noop":
        figures = asyncio.run(_noop(args.count, args.concurrency))
    elif args.phase == "http":
        figures = asyncio.run(_http(args.url, args.count, args.concurrency))
    elif args.phase == "session":
        figures = asyncio.run(_http_session_only(args.url, args.count, args.concurrency))
    elif args.phase == "aiohttp":
        figures = asyncio.run(_bare_aiohttp(args.url, args.count, args.concurrency))
    else:
        figures = asyncio.run(_bare_httpx(args.url, args.count, args.concurrency))
    print(json.dumps(figures), flush=True)


if __name__ == "__main__":
    main()
