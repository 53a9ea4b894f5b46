"""A channel vendor stand-in for end-to-end runs: a real aiohttp server on loopback in its own thread.

It counts deliveries per recipient (so a test can prove nobody got a message twice), can be slowed down
(so a Service restart lands in the middle of a run), and checks the bearer secret like a vendor would.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from aiohttp import web


@dataclass
class VendorState:
    expected_token: str
    delay_seconds: float = 0.0
    deliveries: Counter[str] = field(default_factory=Counter)
    unauthorised: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def delivered(self) -> int:
        with self.lock:
            return sum(self.deliveries.values())

    def duplicates(self) -> dict[str, int]:
        with self.lock:
            return {key: count for key, count in self.deliveries.items() if count > 1}


@dataclass
class Vendor:
    url: str
    state: VendorState


def _app(state: VendorState) -> web.Application:
    async def notify(request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {state.expected_token}":
            with state.lock:
                state.unauthorised += 1
            return web.json_response({"success": False}, status=401)
        payload = json.loads(await request.read())
        if state.delay_seconds:
            await asyncio.sleep(state.delay_seconds)
        with state.lock:
            state.deliveries[str(payload["to"])] += 1
        return web.json_response({"success": True, "id": payload["to"]})

    app = web.Application()
    app.router.add_post("/notify", notify)
    return app


@contextmanager
def running_vendor(expected_token: str, delay_seconds: float = 0.0) -> Iterator[Vendor]:
    state = VendorState(expected_token=expected_token, delay_seconds=delay_seconds)
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    holder: dict[str, object] = {}

    async def start() -> None:
        runner = web.AppRunner(_app(state), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        holder["runner"] = runner
        holder["port"] = runner.addresses[0][1]
        ready.set()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        loop.run_forever()

    thread = threading.Thread(target=serve, name="vendor", daemon=True)
    thread.start()
    if not ready.wait(10):
        raise RuntimeError("vendor server did not start")
    try:
        yield Vendor(f"http://127.0.0.1:{holder['port']}", state)
    finally:
        runner = holder["runner"]
        assert isinstance(runner, web.AppRunner)
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
