"""The viewer's server time: the run overview at 100,000 rollouts and a 400-call rollout's page.

Sequential GETs over loopback against a real ``ledger serve`` (SQLite, WAL), p50/p99 per
page, beside baselines measured in the same run on the same server: ``GET /healthz`` (the
HTTP round trip alone) and the JSON record route of the same 400-call rollout. The overview
is measured sorted by id (the default), deep in the run (a keyset cursor from the middle),
sorted by last event, filtered by an id glob, filtered by call evidence (named against the
clock, so its summary is recomputed on each request), and with the selection summary
recomputed (a new filter selecting the same rollouts on each request, so the summary cache
never hits).

The database (``--quick``: 10,000 rollouts) is built once in-process and cached in
``bench-data/``; each rollout has 2 calls, the long one 400 calls in 4 invocations with 100
tool calls. The last figure appends a call to the long rollout before each request, so its
record is rebuilt and (with the health rules installed) its verdict recomputed.

The transcript is timed on a conversation of its own, ``long-talk`` (posted over HTTP to the
copy before timing): 400 chat calls of one thread whose requests carry the whole history so
far (so the 400th request holds 800 messages), each reply a text and a tool call whose result
opens the next request. Its first page and its last (``calls_from=300``, the longest
histories) are timed.

The compare page is timed on ``long-talk`` and ``long-talk-b``, the same conversation but for
the last reply: the first window (25 calls) agrees, so the scan reads all of it on both sides
(the most one request reads), and the last window (``calls_from=375``, the longest histories)
finds the difference at the 400th call; and the task view of both (each compared over its
first 8 calls).
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from benchmarks.bench_captures import _bulk_command, exchange
from benchmarks.cached_databases import cached_database
from ledger.app.areas import default_catalogue, write_side_projectors
from ledger.areas.observations.service import ObservationService
from ledger.log import migrate
from ledger.log.store import LedgerStore
from tests.support.server import ServerProcess

DESCRIPTION = (
    "viewer pages: overview at 100,000 rollouts, a 400-call rollout, its transcript and a"
    " compare of two;"
    " /healthz baseline"
)
TALK = "long-talk"
TALK_B = "long-talk-b"
TALK_TASK = "bench/long-talk"

LONG = "long-rollout"
LONG_CALLS = 400
T0 = 1764400000.0


def _long_exchange(i: int) -> dict[str, Any]:
    body = exchange(f"long-{i:04d}", padding=600)
    body["started_at"] = T0 + i * 2.0
    body["completed_at"] = T0 + i * 2.0 + 1.0 + (i % 7) * 0.1
    body["latency_ms"] = (body["completed_at"] - body["started_at"]) * 1000
    return body


def _talk(calls: int, last_reply: str = "") -> list[dict[str, Any]]:
    """A thread of ``calls`` chat calls, each request the whole history so far (the last
    reply's text prefixed with ``last_reply``)."""
    history: list[dict[str, Any]] = [{"role": "system", "content": "You fix bugs. " * 20}]
    bodies = []
    for i in range(calls):
        if i:
            history.append({"role": "tool", "tool_call_id": f"call-{i - 1}", "content": "ok " * 60})
        else:
            history.append({"role": "user", "content": "Fix the failing test. " * 10})
        reply = {
            "role": "assistant",
            "content": (last_reply if i == calls - 1 else "")
            + f"Step {i}: looking at the next file. " * 4,
            "tool_calls": [
                {
                    "id": f"call-{i}",
                    "type": "function",
                    "function": {"name": "shell", "arguments": f'{{"cmd": "cat f{i}.py"}}'},
                }
            ],
        }
        body = exchange(f"talk-{i:04d}", padding=0)
        body["started_at"] = T0 + i * 2.0
        body["completed_at"] = T0 + i * 2.0 + 1.0
        body["request"] = {"model": "policy", "messages": list(history)}
        body["response"]["choices"][0]["message"] = reply
        bodies.append(body)
        history.append(reply)
    return bodies


def _post_talk(http: httpx.Client, rollout_id: str, last_reply: str = "") -> None:
    items = [{"rollout_id": rollout_id, "exchange": body} for body in _talk(LONG_CALLS, last_reply)]
    for start in range(0, len(items), 50):
        reply = http.post("/v1/model-calls/batch", json={"items": items[start : start + 50]})
        reply.raise_for_status()
    result = {"task_id": TALK_TASK, "resolved": not last_reply}
    http.post(f"/v1/rollouts/{rollout_id}/result", json=result).raise_for_status()


def _bundle() -> dict[str, Any]:
    records: list[dict[str, Any]] = []
    for k in range(4):
        records.append(
            {
                "kind": "agent_invocation",
                "invocation_id": f"inv-{k}",
                "parent_invocation_id": None if k == 0 else "inv-0",
                "status": "completed",
                "model_calls": [
                    {"model_call_id": f"long-{i:04d}"} for i in range(k, LONG_CALLS, 4)
                ],
            }
        )
    for t in range(100):
        start = T0 + t * 8.0 + 1.2
        records.append(
            {
                "kind": "tool_call",
                "invocation_id": f"inv-{t % 4}",
                "tool_call_id": f"tool-{t}",
                "tool_name": "shell",
                "started_at": start,
                "completed_at": start + 0.6,
                "status": "completed",
            }
        )
    return {"source": "bench", "records": records, "gaps": []}


async def _build(database_url: str, rollouts: int) -> None:
    await migrate.upgrade(database_url)
    store = LedgerStore(
        database_url,
        default_catalogue(),
        write_side_projectors(),
        synchronous="NORMAL",
        max_batch=64,
    )
    await store.open()
    try:
        started = time.perf_counter()
        chunk = 1000  # rollouts per command
        for first in range(0, rollouts, chunk):
            items = [
                (f"r-{n:06d}", exchange(uuid.uuid4().hex, padding=200))
                for n in range(first, min(first + chunk, rollouts))
                for _ in range(2)
            ]
            await store.execute(_bulk_command(items))
            if (first + chunk) % 20_000 == 0:
                rate = (first + chunk) / (time.perf_counter() - started)
                print(f"  built {first + chunk:,} rollouts ({rate:,.0f}/s)", flush=True)
        await store.execute(_bulk_command([(LONG, _long_exchange(i)) for i in range(LONG_CALLS)]))
        await ObservationService(store).record_observations(LONG, _bundle())
    finally:
        await store.close()


def database(rollouts: int) -> Path:
    return cached_database(
        f"ui-{rollouts}",
        f"viewer database with {rollouts:,} rollouts",
        lambda url: _build(url, rollouts),
    )


def _quantiles(samples: list[float]) -> tuple[float, float]:
    return statistics.median(samples), statistics.quantiles(samples, n=100)[98]


def _time(
    http: httpx.Client, path: str, requests: int, *, cold: bool = False, moved: bool = False
) -> list[float]:
    for _ in range(5):  # warm up: connection, lazy imports, caches
        http.get(path).raise_for_status()
    samples = []
    for n in range(requests):
        if moved:  # a new call of the long rollout: its record (and verdict) must be redone
            body = _long_exchange(LONG_CALLS + n)
            body["model_call_id"] = uuid.uuid4().hex
            http.post(f"/v1/rollouts/{LONG}/model-calls", json=body).raise_for_status()
        # cold: ``r-*``, ``r-**``, ...: the same selection under a new filter each time, so the
        # summary cache never hits and every request aggregates the whole run.
        target = f"/ui/?id=r-{'*' * (n + 1)}" if cold else path
        started = time.perf_counter()
        reply = http.get(target)
        samples.append((time.perf_counter() - started) * 1000)
        assert reply.status_code == 200, (path, reply.status_code)
    return samples


def _middle_cursor(http: httpx.Client, rollouts: int) -> str:
    """A cursor from the middle of the run: the page after ``r-<half>``."""
    page = http.get(f"/ui/?id=r-{rollouts // 2:06d}").text
    found = re.search(r'href="/ui/\?[^"]*after=([A-Za-z0-9_-]+)', page)
    if found is None:  # a one-row selection has no next page: build the cursor as the page does
        from ledger.areas.viewer.overview_query import encode_cursor

        return encode_cursor(f"r-{rollouts // 2:06d}", f"r-{rollouts // 2:06d}")
    return found.group(1)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench ui")
    parser.add_argument("--quick", action="store_true", help="10,000 rollouts, fewer requests")
    args = parser.parse_args(argv)
    rollouts = 10_000 if args.quick else 100_000
    requests = 40 if args.quick else 300
    cache = database(rollouts)
    with tempfile.TemporaryDirectory(prefix="bench-ui-") as scratch:
        root = Path(scratch)
        db = root / "ledger.db"
        shutil.copyfile(cache, db)
        server = ServerProcess(
            data_dir=root,
            database_url=f"sqlite+aiosqlite:///{db}",
            env={"LEDGER_MIRROR_ENABLED": "false"},
        ).start()
        try:
            with httpx.Client(base_url=server.base_url, timeout=120) as http:
                cursor = _middle_cursor(http, rollouts)
                _post_talk(http, TALK)
                _post_talk(http, TALK_B, last_reply="On second thought: ")
                cases = [
                    ("baseline GET /healthz", "/healthz", False),
                    (
                        f"baseline GET /v1/rollouts/{LONG}/record (JSON)",
                        f"/v1/rollouts/{LONG}/record",
                        False,
                    ),
                    ("/ui/ first page (sorted by id)", "/ui/", False),
                    ("/ui/ page from the middle (keyset)", f"/ui/?after={cursor}", False),
                    (
                        "/ui/ sorted by last event, newest first",
                        "/ui/?sort=last_event&dir=desc",
                        False,
                    ),
                    ("/ui/ id glob r-0421*", "/ui/?id=r-0421*", False),
                    (
                        "/ui/ sorted by calls (not indexed: a scan)",
                        "/ui/?sort=calls&dir=desc",
                        False,
                    ),
                    ("/ui/ with the summary recomputed (cache missed)", "/ui/", True),
                    (
                        "/ui/ evidence=missing (a scan; summary recomputed)",
                        "/ui/?evidence=missing",
                        False,
                    ),
                    (
                        f"/ui/rollouts/{LONG} ({LONG_CALLS} calls, 100 tools)",
                        f"/ui/rollouts/{LONG}",
                        False,
                    ),
                    (
                        f"/ui/rollouts/{TALK}/transcript (first 100 of {LONG_CALLS} calls)",
                        f"/ui/rollouts/{TALK}/transcript",
                        False,
                    ),
                    (
                        f"/ui/rollouts/{TALK}/transcript?calls_from=300 (the last page)",
                        f"/ui/rollouts/{TALK}/transcript?calls_from=300",
                        False,
                    ),
                    (
                        f"/ui/compare {TALK} vs {TALK_B} (25 calls agree: all read)",
                        f"/ui/compare?a={TALK}&b={TALK_B}",
                        False,
                    ),
                    (
                        "/ui/compare, calls_from=375 (differs at the 400th call)",
                        f"/ui/compare?a={TALK}&b={TALK_B}&calls_from=375",
                        False,
                    ),
                    (
                        f"/ui/compare?task= ({TALK_TASK}: 2 rollouts of {LONG_CALLS} calls)",
                        f"/ui/compare?task={TALK_TASK}",
                        False,
                    ),
                ]
                figures = []
                for label, path, cold in cases:
                    n = min(max(requests // 6, 10), 150) if cold else requests
                    if "a scan" in label:  # each one scans the run: fewer are enough
                        n = min(n, 50)
                    figures.append((label, n, _quantiles(_time(http, path, n, cold=cold))))
                n = min(max(requests // 6, 10), 50)
                samples = _time(http, f"/ui/rollouts/{LONG}", n, moved=True)
                label = f"/ui/rollouts/{LONG} after a new call (record, verdict redone)"
                figures.append((label, n, _quantiles(samples)))
        finally:
            server.stop()
    print(f"{rollouts:,} rollouts; sequential GETs over loopback (ms, client-observed)")
    for label, n, (p50, p99) in figures:
        print(f"  {label:58} p50 {p50:8.2f}   p99 {p99:8.2f}   (n={n})")
    print(
        "targets: overview p50 <= 50 ms, rollout page p50 <= 100 ms, transcript p50 <= 150 ms,"
        " compare p50 <= 200 ms (its worst window: 25 calls of the longest histories a side)"
    )
