"""Follower lag: how long after a Gym writer's line lands on disk it is committed in the ledger.

N writer processes append capture lines to their own ``<id>.capture.jsonl`` as Gym's CaptureStore
does (open in append mode, ``flock(LOCK_EX)``, write the line, ``fsync``). The writers run in
this project's environment and write Gym's line format themselves (``serialize_capture_line``
of a realistic exchange); Gym's own CaptureStore is exercised by the Gym leg's tests instead.
An in-process ``CaptureDirFollower`` on a SQLite file ingests them; a line's lag is its event's
``recorded_at`` minus the time its write returned (carried in the line). Figures: lag p50/p99
with 32 writers (inotify), beside the same with 1 writer and with 32 writers under polling,
all measured in this run.
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import json
import multiprocessing
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from sqlalchemy import select

from ledger.app.areas import default_catalogue, write_side_projectors
from ledger.areas.captures.follower import CaptureDirFollower, FollowOptions
from ledger.gym.capture_lines import serialize_capture_line
from ledger.log import migrate
from ledger.log.store import LedgerStore
from ledger.log.tables import events

DESCRIPTION = "capture-dir follower lag p50/p99 under 32 concurrent Gym-format writers"


def _exchange(writer: int, n: int, written_at: float) -> dict[str, object]:
    return {
        "model_call_id": f"w{writer}-{n}",
        "dialect": "chat",
        "model_ref": {"type": "responses_api_models", "name": "policy_model"},
        "started_at": written_at,
        "completed_at": written_at,
        "latency_ms": 12.5,
        "latency_ttft_ms": None,
        "status_code": 200,
        "error_category": None,
        "request": {"model": "m", "messages": [{"role": "user", "content": "x" * 400}]},
        "response": {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion",
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": "y" * 200},
                }
            ],
            "usage": {"prompt_tokens": 100, "completion_tokens": 50, "total_tokens": 150},
        },
    }


def _writer(directory: Path, writer: int, lines: int, interval: float, ready: Any) -> None:
    """One writer process (a model server): its lines, then the time each became visible."""
    ready.wait()  # every writer has started (spawn imports take seconds of CPU on 2 cores)
    path = directory / f"{writer}-0.capture.jsonl"
    sent: dict[str, float] = {}
    for n in range(lines):
        started = time.time()
        data = (serialize_capture_line(_exchange(writer, n, started)) + "\n").encode()
        with path.open("ab") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            handle.write(data)
            handle.flush()
            # Readers take no lock: the line is visible from here on (fsync follows, as in Gym).
            sent[f"w{writer}-{n}"] = time.time()
            os.fsync(handle.fileno())
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        time.sleep(max(0.0, interval - (time.time() - started)))  # pace: the writer's call rate
    (directory.parent / f"sent-{writer}.json").write_text(json.dumps(sent))


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _measure(writers: int, lines: int, interval: float, *, polling: bool) -> list[float]:
    with tempfile.TemporaryDirectory(prefix="bench-follow-") as tmp:
        root = Path(tmp)
        directory = root / "captures"
        directory.mkdir()
        url = f"sqlite+aiosqlite:///{root / 'ledger.db'}"
        await migrate.upgrade(url)
        store = LedgerStore(url, default_catalogue(), write_side_projectors())
        await store.open()
        follower = CaptureDirFollower(
            store, directory, options=FollowOptions(force_polling=polling, poll_interval=0.1)
        )
        await follower.start()
        await follower.caught_up.wait()
        # Writer processes, as Gym's model servers are: they do not share this process's GIL.
        context = multiprocessing.get_context("spawn")
        ready = context.Barrier(writers + 1)
        processes = [
            context.Process(target=_writer, args=(directory, w, lines, interval, ready))
            for w in range(writers)
        ]
        for process in processes:
            process.start()
        await asyncio.to_thread(ready.wait)

        def join_all() -> None:
            for process in processes:
                process.join()

        await asyncio.to_thread(join_all)
        sent: dict[str, float] = {}
        for w in range(writers):
            sent.update(json.loads((root / f"sent-{w}.json").read_text()))
        deadline = time.monotonic() + 120
        total = writers * lines
        while time.monotonic() < deadline:
            if follower.total.lines >= total:
                break
            await asyncio.sleep(0.05)  # poll
        await follower.stop()
        async with store.read() as conn:
            rows = (await conn.execute(select(events.c.recorded_at, events.c.payload))).all()
        await store.close()
    lags = []
    for recorded_at, payload in rows:
        body = json.loads(payload)
        call_id = body.get("model_call_id")
        if call_id in sent:
            lags.append(recorded_at.timestamp() - sent[call_id])
    if len(lags) != total:
        print(f"  warning: {len(lags)} of {total} lines ingested before the deadline")
    return lags


def _report(label: str, lags: list[float]) -> None:
    print(
        f"  {label:34} lines={len(lags):6}  lag p50={_percentile(lags, 0.5) * 1000:7.1f} ms"
        f"  p99={_percentile(lags, 0.99) * 1000:7.1f} ms  max={max(lags) * 1000:7.1f} ms"
    )


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench follow")
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    args = parser.parse_args(argv)
    lines = 40 if args.quick else 200
    interval = 0.05  # each writer: 20 calls/s (32 writers: 640 lines/s)
    print(f"  {lines} lines per writer, one every {interval * 1000:.0f} ms; SQLite file")
    _report("baseline: 1 writer, inotify", asyncio.run(_measure(1, lines, interval, polling=False)))
    _report("32 writers, inotify", asyncio.run(_measure(32, lines, interval, polling=False)))
    _report("32 writers, polling 100 ms", asyncio.run(_measure(32, lines, interval, polling=True)))
