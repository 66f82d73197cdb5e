"""The capture process: ``python -m ledger.areas.proxy.capture_worker``, started by
``ledger serve`` (capture_process.py) to append the proxy's captures beside the server.

Protocol, frames (frames.py) over its stdin and stdout:
- in: the store's options (a ``WorkerOptions`` dict), then batches ``[(rollout_id, call)]``;
- out: ``("ready",)`` once the store is open, then per batch ``("ok", [(status, detail)])``
  or ``("failed", reason, detail)`` when the batch's append raised.
It also runs the health follower when asked (the server then only reads the verdict gauges).
The end of its stdin (the server closed it, or died) ends it. Its stdout carries frames only:
fd 1 is moved aside at start and what prints goes to stderr, the server's log.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import sys
from typing import IO, Any, TypedDict

from ledger.app.areas import default_catalogue, write_side_projectors
from ledger.areas.captures.service import CaptureService
from ledger.areas.health.follower import HealthFollower
from ledger.areas.proxy.capture_sink import AppendFailed, append_observed
from ledger.areas.proxy.frames import encode_frame, read_frame
from ledger.log.engines import Synchronous
from ledger.log.store import LedgerStore

log = logging.getLogger("ledger.capture_process")


class WorkerOptions(TypedDict):
    url: str
    synchronous: Synchronous
    busy_timeout_ms: int
    max_batch: int
    max_batch_bytes: int
    nice: int
    # The health follower runs here rather than in the server (bootstrap.py).
    health_follower: bool


async def serve(options: WorkerOptions, frames_in: IO[bytes], frames_out: IO[bytes]) -> None:
    store = LedgerStore(
        options["url"],
        default_catalogue(),
        write_side_projectors(),
        synchronous=options["synchronous"],
        busy_timeout_ms=options["busy_timeout_ms"],
        max_batch=options["max_batch"],
        max_batch_bytes=options["max_batch_bytes"],
        read_pool_size=1,
    )
    await store.open()
    follower = HealthFollower(store) if options["health_follower"] else None
    if follower is not None:
        await follower.start()
    try:
        captures = CaptureService(store)
        # What the start made lives until the process ends: out of the collector's way.
        gc.collect()
        gc.freeze()
        _send(frames_out, ("ready",))
        while True:
            batch = await asyncio.to_thread(read_frame, frames_in)
            if batch is None:
                return
            reply: tuple[Any, ...]
            try:
                outcomes = await append_observed(captures, batch, yielding=False)
                reply = ("ok", [(o.status, o.detail) for o in outcomes])
            except AppendFailed as failed:
                log.error("a batch of %d captures failed: %s", len(batch), failed)
                reply = ("failed", failed.reason, failed.detail[:2000])
            _send(frames_out, reply)
    finally:
        if follower is not None:
            await follower.stop()
        await store.close()


def _send(frames_out: IO[bytes], value: Any) -> None:
    frames_out.write(encode_frame(value))
    frames_out.flush()


def main() -> None:
    # fd 1 is the frames' pipe: keep it for them, and send anything printed to stderr.
    frames_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    frames_in = sys.stdin.buffer
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(levelname)s capture-process: %(message)s"
    )
    options = read_frame(frames_in)
    if options is None:
        return
    # Below the server: the forwarding loop wins the CPU whenever both want it.
    os.nice(options["nice"])
    # A broken pipe: the server is gone, nobody is left to answer.
    with contextlib.suppress(BrokenPipeError):
        asyncio.run(serve(options, frames_in, frames_out))


if __name__ == "__main__":
    main()
