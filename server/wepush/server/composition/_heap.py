"""Garbage collection settings for the long-running Service process.

Once the Service has started, everything it built to get there (the contract, schemas, the ORM's
metadata, providers, compiled statements) lives as long as the process. CPython's cycle collector would
still walk all of it on every full collection — about 140 ms each in a sending run, a stall of every
request in flight — and with the default young-generation threshold (700 allocations) it collects about
every third item sent. :func:`settle_heap` moves what exists into the permanent generation
(``gc.freeze``) and raises that threshold; reference counting still frees almost everything at once,
the collector only looks for cycles less often and among newer objects.

Only the ``wepush serve`` process calls it: a test process that builds many apps must keep collecting them.
"""

from __future__ import annotations

import gc
from typing import Final

__all__ = ["YOUNG_GENERATION_THRESHOLD", "settle_heap"]

#: Allocations (minus deallocations) between two young-generation collections.
YOUNG_GENERATION_THRESHOLD: Final = 20_000


def settle_heap() -> None:
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_GENERATION_THRESHOLD, middle, old)
