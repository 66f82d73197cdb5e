"""The OTLP export's process: ``python -m ledger.areas.otel.export_worker``, started by
``ledger serve`` (export_process.py) to run the follower beside the server, niced.

Protocol, JSON lines: in on stdin, its options (an ``ExportOptions``) and then nothing; out on
stdout, ``{"ready": true}`` once the store is open, then the sender's running tally whenever it
moved, and ``{"checkpoint": seq}`` for the server to write. The process only reads the
database: a write of its own would take the writer's lock at the lowest CPU priority, and the
server's writer would wait for it whenever the machine is busy. The end of its stdin (the
server closed it, or died) ends it: the follower finishes its step and sends its checkpoint.
The collector's headers come from its environment (``LEDGER_OTLP_HEADERS``, inherited), never
from the pipe. What prints goes to stderr, the server's log.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sys
from functools import partial
from typing import IO, TypedDict

from ledger.app.areas import default_catalogue, write_side_projectors
from ledger.areas.otel.follower import OtlpFollower
from ledger.areas.otel.mapping import MappingOptions
from ledger.areas.otel.sender import OtlpSender, SendTally, headers_from_environment
from ledger.log.engines import Synchronous
from ledger.log.store import LedgerStore

log = logging.getLogger("ledger.otlp_export")

REPORT_S = 0.25


class ExportOptions(TypedDict):
    url: str
    synchronous: Synchronous
    busy_timeout_ms: int
    nice: int
    endpoint: str
    content: bool
    settle_s: float
    batch_spans: int
    page_rollouts: int


def tally_line(tally: SendTally, export_failures: int) -> str:
    return json.dumps(
        {
            "sent": tally.sent,
            "refused": tally.refused,
            "retried": tally.retried,
            "failed_requests": tally.failed_requests,
            "export_failures": export_failures,
        }
    )


async def serve(options: ExportOptions, lines_in: IO[str], lines_out: IO[str]) -> None:
    store = LedgerStore(
        options["url"],
        default_catalogue(),
        write_side_projectors(),
        synchronous=options["synchronous"],
        busy_timeout_ms=options["busy_timeout_ms"],
        read_pool_size=1,
        read_only=True,
    )
    await store.open()
    sender = OtlpSender(options["endpoint"], headers=headers_from_environment())
    follower = OtlpFollower(
        store,
        sender,
        options=MappingOptions(content=options["content"]),
        batch_spans=options["batch_spans"],
        page_rollouts=options["page_rollouts"],
        settle_seconds=options["settle_s"],
        checkpoint_sink=partial(_send_checkpoint, lines_out),
    )
    # A tally line after every request, before the checkpoint line of its page: when the server
    # has written a checkpoint, it has counted every request that led to it.
    sender.on_request = lambda: _write(
        lines_out, tally_line(sender.tally, follower.export_failures)
    )
    await follower.start()
    reporter = asyncio.create_task(_report(follower, sender, lines_out))
    try:
        _write(lines_out, json.dumps({"ready": True}))
        # Nothing more comes in: the end of stdin is the server closing it, or dying.
        await asyncio.to_thread(lines_in.read)
    finally:
        await follower.stop()
        reporter.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reporter
        with contextlib.suppress(BrokenPipeError):
            _write(lines_out, tally_line(sender.tally, follower.export_failures))
        await store.close()


async def _report(follower: OtlpFollower, sender: OtlpSender, lines_out: IO[str]) -> None:
    last = ""
    while True:
        line = tally_line(sender.tally, follower.export_failures)
        if line != last:
            _write(lines_out, line)
            last = line
        await asyncio.sleep(REPORT_S)


async def _send_checkpoint(lines_out: IO[str], seq: int) -> None:
    _write(lines_out, json.dumps({"checkpoint": seq}))


def _write(lines_out: IO[str], line: str) -> None:
    lines_out.write(line + "\n")
    lines_out.flush()


def main() -> None:
    # fd 1 is the tallies' pipe: keep it for them, and send anything printed to stderr.
    lines_out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(levelname)s otlp-export: %(message)s"
    )
    first = sys.stdin.readline()
    if not first:
        return
    options: ExportOptions = json.loads(first)
    # Below the server: its requests win the CPU whenever both want it.
    os.nice(options["nice"])
    with contextlib.suppress(BrokenPipeError):
        asyncio.run(serve(options, sys.stdin, lines_out))


if __name__ == "__main__":
    main()
