"""``python -m bench.e2e._profiled_serve STATS_FILE serve ...``: ``wepush serve`` with cProfile on demand.

The profiler starts on SIGUSR1 and stops on SIGUSR2, which writes the stats, so the profile covers the
run alone (not start-up or the import). It sees the main thread: the event loop with the API, the
embedded agent, the engine, the provider and the sinks; work handed to other threads (the SQLite
driver's thread) appears as the time the loop spends in the calls that hand it over and wait for it.

uvicorn handles SIGTERM, shuts down, then re-raises the signal to the handler it found; here that handler
turns it into ``SystemExit``, so a profile still running is written on the way out.
"""

from __future__ import annotations

import cProfile
import signal
import sys
from types import FrameType

from wepush.cli.main import main


class _Window:
    def __init__(self, stats_file: str) -> None:
        self._stats_file = stats_file
        self._profile: cProfile.Profile | None = None

    def start(self, signum: int, frame: FrameType | None) -> None:
        if self._profile is None:
            self._profile = cProfile.Profile()
            self._profile.enable()

    def stop(self, signum: int, frame: FrameType | None) -> None:
        if self._profile is not None:
            self._profile.disable()
            self._profile.dump_stats(self._stats_file)
            self._profile = None


def _exit(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def _profiled(stats_file: str, argv: list[str]) -> int:
    window = _Window(stats_file)
    signal.signal(signal.SIGUSR1, window.start)
    signal.signal(signal.SIGUSR2, window.stop)
    signal.signal(signal.SIGTERM, _exit)
    try:
        return main(argv)
    finally:
        window.stop(signal.SIGUSR2, None)


if __name__ == "__main__":
    raise SystemExit(_profiled(sys.argv[1], sys.argv[2:]))
