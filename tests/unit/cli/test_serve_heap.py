"""``wepush serve`` settles its heap once started: frozen startup objects, a larger young generation.

Each case runs in a child interpreter: freezing the test process's own heap would keep every app the
other tests build alive."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from wepush.server.composition._heap import YOUNG_GENERATION_THRESHOLD


def _child(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_settle_heap_freezes_what_exists_and_raises_the_young_threshold() -> None:
    out = _child(
        """
        import gc
        from wepush.server.composition._heap import settle_heap
        before = gc.get_threshold()
        settle_heap()
        print(gc.get_freeze_count() > 1000, before[1:] == gc.get_threshold()[1:], gc.get_threshold()[0])
        """
    )
    assert out == f"True True {YOUNG_GENERATION_THRESHOLD}"


def test_the_serve_server_settles_the_heap_after_its_startup() -> None:
    out = _child(
        """
        import asyncio, gc
        import uvicorn
        from wepush.cli._serve import _Server

        async def app(scope, receive, send):
            if scope["type"] == "lifespan":
                while (message := await receive())["type"] != "lifespan.shutdown":
                    await send({"type": "lifespan.startup.complete"})
                await send({"type": "lifespan.shutdown.complete"})

        async def main():
            server = _Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_config=None, lifespan="on"))
            frozen_before = gc.get_freeze_count()
            serving = asyncio.create_task(server.serve())
            async with asyncio.timeout(30):
                while not server.started:
                    await asyncio.sleep(0.01)
            print(frozen_before, gc.get_freeze_count() > 0, server.started)
            server.should_exit = True
            await serving

        asyncio.run(main())
        """
    )
    assert out == "0 True True"
