"""Fewer cyclic garbage collections while one long pass allocates (``ledger verify``).

A replay allocates many containers (parsed payloads, derived records, rows) that reference
counting frees. With the default thresholds (700, 10, 10) the cyclic collector still runs a
young collection every 700 net allocations, and now and then a full one that traverses every
object the process holds, the imported modules' tens of thousands included. Frozen (the objects
alive before the pass are moved out of the collector's sight until it ends) and with a higher
young threshold it runs far less often, but it still runs: cycles the pass makes are freed, so
memory stays bounded.

The collector's settings belong to the whole process: ``fewer_collections`` is for a process
that does nothing else meanwhile (the ``ledger verify`` command, the benchmark), never for the
server. The server's process freezes what its start made (``settle_server_process``).
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from contextlib import contextmanager

# Allocations between young collections: ~30x the default, a few MiB of young objects at most.
YOUNG_THRESHOLD = 20_000


@contextmanager
def fewer_collections() -> Iterator[None]:
    thresholds = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


def settle_server_process(switch_interval_ms: float) -> None:
    """What a server process sets once, after its entry point has built its app (``ledger
    serve`` and each of its workers): its start frozen, and the switch interval.

    Frozen: a server process starts with about 115,000 tracked objects (its imported modules,
    the app and its routes), nearly all alive until it exits, and every full collection
    traversed them all: 76-82 ms each on a 2-core machine of this kind, a stall of every request
    in flight, which was the tail of the capture proxy's added latency. Collected first, so no
    garbage is frozen; never called from code a test process runs many times, since what a
    freeze holds is never collected afterwards.

    The switch interval: the event loop that forwards proxied calls and answers requests shares
    the GIL with the writer, mirror and health threads; when it wants the GIL back it waits up
    to the switch interval (Python's default 5 ms) for the thread holding it, which is latency
    on every request in flight. 1 ms measured lower added latency through the capture proxy in
    three pairs of runs at about the same CPU per call (docs/decisions.md, "proxy-latency" 9)."""
    gc.collect()
    gc.freeze()
    sys.setswitchinterval(switch_interval_ms / 1000)
