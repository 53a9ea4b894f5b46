"""The baseline, in its own process: the embedded SDK alone sends the audience to the same vendor mock.

``python -m bench.e2e._embedded --url URL --count N --concurrency C [--loop uvloop|asyncio]`` prints one
JSON object. The run uses ``WePushEngine`` with the HTTP Provider, the same message, account and
concurrency as the Service's job, a result sink that keeps only each item's latency (as an application
that streams results elsewhere would) and an event sink that counts events.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import time
from collections.abc import Sequence
from typing import Any

from wepush.agent.engine import (
    ConcurrencyPolicy,
    ConfigDocument,
    EngineOptions,
    ExecutionPolicies,
    ItemResult,
    MappingSecretResolver,
    ProviderRef,
    RunEvent,
    RunEventType,
    RunExecutionSpec,
    SecretRef,
)
from wepush.agent.providers.http import HttpProviderFactory
from wepush.sdk.embedded import WePushEngine

from ._audience import MESSAGE_CONTENT, PROVIDER_ID, SECRET, account_config, recipients
from ._stats import Span, dispatch_gaps, percentiles


class LatencySink:
    """Keeps each item's latency (ms, from the engine's startedAt/finishedAt), its start and end, and the outcome
    counts."""

    def __init__(self) -> None:
        self.latencies_ms: list[float] = []
        self.spans: list[Span] = []
        self.states: dict[str, int] = {}

    async def open(self) -> None:
        return None

    async def append(self, batch: Sequence[ItemResult]) -> None:
        for item in batch:
            self.states[item.state.value] = self.states.get(item.state.value, 0) + 1
            if item.started_at is not None and item.finished_at is not None:
                self.latencies_ms.append((item.finished_at - item.started_at).total_seconds() * 1000.0)
                self.spans.append((item.started_at.timestamp(), item.finished_at.timestamp(), item.sequence))

    async def flush(self) -> None:
        return None

    async def close(self) -> None:
        return None


class EventCounter:
    def __init__(self) -> None:
        self.events = 0
        self.progress = 0

    async def publish(self, events: Sequence[RunEvent]) -> None:
        self.events += len(events)
        self.progress += sum(1 for event in events if event.type is RunEventType.PROGRESS)

    async def flush(self) -> None:
        return None

    async def close(self) -> None:
        return None


async def _run(url: str, count: int, concurrency: int) -> dict[str, Any]:
    results, events = LatencySink(), EventCounter()
    engine = (
        WePushEngine.builder()
        # The mock listens on loopback, which the production address policy refuses.
        .provider(HttpProviderFactory(allow_loopback_for_tests=True))
        .secret_resolver(MappingSecretResolver({SecretRef("default", "token"): SECRET}))
        .result_sink(results)
        .event_sink(events)
        .build()
    )
    spec = RunExecutionSpec(
        run_id="bench-embedded",
        provider=ProviderRef(PROVIDER_ID),
        account_config=ConfigDocument.from_json("bench/account", "1", account_config(url)),
        message_config=ConfigDocument.from_json("bench/message", "1", MESSAGE_CONTENT),
        policies=ExecutionPolicies(concurrency=ConcurrencyPolicy(min=1, max=concurrency, target=concurrency)),
    )
    started, cpu_started = time.perf_counter(), time.process_time()
    async with engine:
        handle = await engine.start(spec, recipients(count))
        summary = await handle.completion()
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    return {
        "items": summary.total,
        "succeeded": summary.succeeded,
        "final_state": summary.final_state.value,
        "seconds": round(elapsed, 3),
        "items_per_s": round(summary.total / elapsed, 1),
        "cpu_s": round(cpu, 3),
        "progress_events": events.progress,
        "events": events.events,
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1),
        **percentiles(results.latencies_ms),
        **dispatch_gaps(results.spans, read_batch_size=EngineOptions().read_batch_size),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--loop", choices=["uvloop", "asyncio"], default="uvloop")
    args = parser.parse_args()
    if args.loop == "uvloop":
        import uvloop

        figures = uvloop.run(_run(args.url, args.count, args.concurrency))
    else:
        figures = asyncio.run(_run(args.url, args.count, args.concurrency))
    print(json.dumps({"loop": args.loop, **figures}), flush=True)


if __name__ == "__main__":
    main()
