"""Process-wide tuning for a server process, applied once it has started up.

A server allocates many short-lived containers per request and frees nearly all of them
by reference counting, yet CPython's collector still runs on allocation counts, and a
full collection walks every object loaded at start-up (modules, schemas, the app). On
a loaded HTTP server those pauses stall every request in flight and set the p99
latency. So, once start-up is done: collect, move what survived into the permanent
generation (``gc.freeze``) where the collector no longer walks it, and collect the young
generation less often. Cycles are still collected.
"""

from __future__ import annotations

import gc

__all__ = ["settle_heap"]

_done = False


def settle_heap() -> None:
    """Freeze the start-up heap and relax collection thresholds (once per process)."""
    global _done
    if _done:
        return
    _done = True
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 20, 20)
