"""The "lean" leg of ``bench captures``: the least code that still does the capture routes' job,
so the figure beside ours says where the ceiling of issue 9's ratios is on this machine.

    python -m benchmarks.lean_ingest --port P

Same stack as the baselines (uvicorn + Starlette, benchmarks/bare_server.py) and the same
routes and statuses. Per capture it does what the ledger must do before its answer means
"stored", with the ledger's own pure functions and nothing of its machinery:

- the body parsed by orjson, the exchange validated, its ``model_call_id`` assigned and the
  event payload's canonical bytes and SHA-256 made (``prepare_exchange``, what the ingest
  routes call, on the event loop);
- on one writer thread with group commit (every request waiting when a transaction starts
  joins it): the idempotency lookup and ``call_index`` from dicts in memory, the canonical
  header and the hash chain, then one ``executemany`` each into an events table and a table of
  positions (the capture's identity), one ``synchronous=FULL`` commit.

Like the ledger since issue 27 it derives nothing from the exchange before its answer: Gym's
``ModelCallRecord`` and trajectory entry are the views' work, behind the acknowledgement (this
leg has no views; ``bench projector`` measures them).

It leaves out what the ledger also keeps (so its rate is an upper bound for the same job on
this stack): the ``rollouts`` rows, generations and fences, the rollout's enriched record and
its running totals, the lineage and state rows, the mirror's files, metrics and the server's
error handling. Nothing survives a restart but the tables (the dicts are not reloaded).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import queue
import sqlite3
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response

from benchmarks.bare_server import capture_app, database_path, json_response
from ledger.areas.captures.events import MODEL_CALL_CAPTURED
from ledger.areas.captures.service import (
    PreparedExchange,
    prepare_batch_item,
    prepare_exchange,
)
from ledger.log.chain import canonical_header, chain_hash

_KIND = MODEL_CALL_CAPTURED
_CREATED = orjson.dumps({"status": 201})
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS lean_events (seq INTEGER PRIMARY KEY, kind TEXT NOT NULL,"
    " rollout_id TEXT, recorded_at TEXT NOT NULL, payload TEXT NOT NULL,"
    " payload_sha256 TEXT NOT NULL, hash TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS lean_capture_positions (rollout_id TEXT NOT NULL,"
    " call_index INTEGER NOT NULL, model_call_id TEXT NOT NULL, seq INTEGER NOT NULL,"
    " exchange_sha256 TEXT NOT NULL, PRIMARY KEY (rollout_id, call_index))",
)


@dataclass
class _Request:
    items: list[PreparedExchange]
    loop: asyncio.AbstractEventLoop
    done: asyncio.Future[list[int]]


@dataclass
class LeanWriter:
    """One thread, one connection; each transaction takes every request already waiting."""

    path: str
    _queue: queue.SimpleQueue[_Request] = field(default_factory=queue.SimpleQueue)
    _seq: int = 0
    _prev: str = "0" * 64
    _known: dict[tuple[str, str], int] = field(default_factory=dict)  # idempotency: -> seq
    _next_index: dict[str, int] = field(default_factory=dict)

    def start(self) -> None:
        threading.Thread(target=self._run, name="lean-writer", daemon=True).start()

    async def append(self, items: list[PreparedExchange]) -> list[int]:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[list[int]] = loop.create_future()
        self._queue.put(_Request(items, loop, done))
        return await done

    def _run(self) -> None:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        for statement in _SCHEMA:
            conn.execute(statement)
        while True:
            waiting = [self._queue.get()]
            while True:
                try:
                    waiting.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            events: list[tuple[Any, ...]] = []
            positions: list[tuple[Any, ...]] = []
            answers = [
                [self._apply(item, events, positions) for item in request.items]
                for request in waiting
            ]
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany("INSERT INTO lean_events VALUES (?, ?, ?, ?, ?, ?, ?)", events)
            conn.executemany("INSERT INTO lean_capture_positions VALUES (?, ?, ?, ?, ?)", positions)
            conn.execute("COMMIT")
            for request, seqs in zip(waiting, answers, strict=True):
                request.loop.call_soon_threadsafe(_resolve, request.done, seqs)

    def _apply(
        self,
        item: PreparedExchange,
        events: list[tuple[Any, ...]],
        positions: list[tuple[Any, ...]],
    ) -> int:
        payload = item.payload
        model_call_id = payload.body["model_call_id"]
        key = (item.rollout_id, model_call_id)
        known = self._known.get(key)
        if known is not None:  # an idempotent repeat
            return known
        self._seq += 1
        seq = self._seq
        recorded_at = datetime.now(UTC)
        header = canonical_header(
            seq=seq,
            recorded_at=recorded_at,
            kind=_KIND,
            schema_version=1,
            rollout_id=item.rollout_id,
            generation=0,
            idempotency_key=model_call_id,
        )
        self._prev = chain_hash(self._prev, header, payload.sha256)
        events.append(
            (
                seq,
                _KIND,
                item.rollout_id,
                recorded_at.isoformat(),
                payload.text,
                payload.sha256,
                self._prev,
            )
        )
        index = self._next_index.get(item.rollout_id, 0)
        self._next_index[item.rollout_id] = index + 1
        positions.append((item.rollout_id, index, model_call_id, seq, payload.sha256))
        self._known[key] = seq
        return seq


def _resolve(done: asyncio.Future[list[int]], seqs: list[int]) -> None:
    if not done.done():
        done.set_result(seqs)


def lean_app(path: str) -> Starlette:
    writer = LeanWriter(path)
    writer.start()

    async def single(request: Request) -> Response:
        rollout_id = request.path_params["rollout_id"]
        prepared = prepare_exchange(rollout_id, orjson.loads(await request.body()))
        (seq,) = await writer.append([prepared])
        model_call_id = prepared.payload.body["model_call_id"]
        return json_response(
            {"rollout_id": rollout_id, "model_call_id": model_call_id, "seq": seq}, 201
        )

    async def batch(request: Request) -> Response:
        items = orjson.loads(await request.body())["items"]
        prepared = [prepare_batch_item(item, f"items[{n}]") for n, item in enumerate(items)]
        await writer.append(prepared)
        return Response(
            b'{"results":[' + b",".join([_CREATED] * len(prepared)) + b"]}",
            media_type="application/json",
        )

    return capture_app(single, batch)


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    parser = argparse.ArgumentParser(prog="python -m benchmarks.lean_ingest")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args(argv)
    app = lean_app(database_path(os.environ["LEDGER_DATABASE_URL"]))
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level=args.log_level)


if __name__ == "__main__":
    main()
