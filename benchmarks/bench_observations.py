"""Enriched record reads over HTTP and JSONL export, with many rollouts in the database.

Issue 5 §5: ``GET /v1/rollouts/{id}/record`` for a rollout with 50 calls, 10 invocations and
40 tool calls, with 100,000 rollouts in the database (p50, p99; target p50 <= 15 ms), and
``GET /v1/export`` throughput (target >= 2,000 records/s). Baselines measured in the same run:
``GET /healthz`` over the same connection (the HTTP floor) and the raw SQL scan of the stored
records (the database floor of an export).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import select

from ledger.app.areas import default_catalogue, write_side_projectors
from ledger.areas.captures.events import MODEL_CALL_CAPTURED, ModelCallCaptured
from ledger.areas.observations.events import (
    OBSERVATIONS_RECORDED,
    RESULT_RECORDED,
    ObservationsRecorded,
)
from ledger.areas.observations.tables import observation_records
from ledger.gym.observations import AgentObservationBundle
from ledger.gym.result import RolloutResult
from ledger.log import migrate
from ledger.log.store import LedgerStore
from ledger.log.transaction import WriteTransaction
from tests.support.server import ServerProcess

# Usage: scripts/bench observations [--quick] [--rollouts=N] [--reads=N] [--database-url=URL]
DESCRIPTION = "record read p50/p99 over HTTP and export records/s, with N rollouts stored"
TARGET = "bench-target"
MODEL_REF = {"type": "responses_api_models", "name": "policy"}


def exchange(model_call_id: str, index: int, *, words: int = 40) -> dict[str, Any]:
    text = " ".join(f"word{n}" for n in range(words))
    return {
        "model_call_id": model_call_id,
        "dialect": "responses",
        "model_ref": MODEL_REF,
        "started_at": 1764400000.0 + index,
        "completed_at": 1764400000.5 + index,
        "latency_ms": 500.0,
        "latency_ttft_ms": 50.0,
        "status_code": 200,
        "error_category": None,
        "request": {"model": "m", "input": [{"role": "user", "content": text}]},
        "response": {
            "id": f"resp-{model_call_id}",
            "model": "m",
            "status": "completed",
            "output": [
                {
                    "type": "function_call",
                    "call_id": f"t-{model_call_id}",
                    "name": "f",
                    "arguments": "{}",
                },
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": text}],
                },
            ],
            "usage": {
                "input_tokens": 100 + index,
                "output_tokens": 20,
                "total_tokens": 120 + index,
            },
        },
    }


def target_bundle() -> AgentObservationBundle:
    """10 invocations owning 5 calls each, 4 tool calls each (40), outputs in the conversation."""
    records: list[dict[str, Any]] = []
    for inv in range(10):
        invocation_id = "root" if inv == 0 else f"sub-{inv}"
        tools = [f"tool-{inv}-{n}" for n in range(4)]
        records.append(
            {
                "kind": "agent_invocation",
                "invocation_id": invocation_id,
                "parent_invocation_id": None if inv == 0 else "root",
                "status": "completed",
                "model_calls": [{"model_call_id": f"call-{inv * 5 + n}"} for n in range(5)],
                "conversation": [{"type": "message", "role": "user", "content": "task"}]
                + [
                    item
                    for tool in tools
                    for item in (
                        {"type": "function_call", "call_id": tool, "name": "f", "arguments": "{}"},
                        {"type": "function_call_output", "call_id": tool, "output": "ok " * 20},
                    )
                ],
            }
        )
        for n, tool in enumerate(tools):
            start = 1764400000.0 + inv * 10 + n * 0.5
            records.append(
                {
                    "kind": "tool_call",
                    "invocation_id": invocation_id,
                    "tool_call_id": tool,
                    "tool_name": "f",
                    "started_at": start,
                    "completed_at": start + 1.0,
                    "timing_source": "executor",
                    "status": "completed",
                }
            )
    return AgentObservationBundle.model_validate({"source": "bench", "records": records})


async def seed(url: str, rollouts: int, batch: int = 200) -> float:
    """Background rollouts (1 call + 1 result each) and the target; returns appends per second."""
    store = LedgerStore(url, default_catalogue(), write_side_projectors())
    await store.open()
    appended = 0
    started = time.perf_counter()
    try:
        for first in range(0, rollouts - 1, batch):
            ids = range(first, min(first + batch, rollouts - 1))

            def command(tx: WriteTransaction, ids: range = ids) -> int:
                for n in ids:
                    rollout_id = f"{n}-0"
                    call = exchange(f"c{n}", 0, words=10)
                    tx.append(
                        MODEL_CALL_CAPTURED,
                        ModelCallCaptured(model_call_id=f"c{n}", exchange=call),
                        rollout_id=rollout_id,
                    )
                    result = RolloutResult.model_validate(
                        {
                            "task_id": f"task-{n % 1000}",
                            "_ng_task_index": n,
                            "_ng_rollout_index": 0,
                            "resolved": n % 2 == 0,
                            "latency_ms": 1000 + n % 500,
                        }
                    )
                    tx.append(RESULT_RECORDED, result, rollout_id=rollout_id)
                return 2 * len(ids)

            appended += await store.execute(command)
            if first and first % 10_000 < batch:
                print(f"  seeded {first:,} rollouts", flush=True)

        def target(tx: WriteTransaction) -> int:
            for n in range(50):
                call_id = f"call-{n}"
                tx.append(
                    MODEL_CALL_CAPTURED,
                    ModelCallCaptured(model_call_id=call_id, exchange=exchange(call_id, n)),
                    rollout_id=TARGET,
                )
            tx.append(
                OBSERVATIONS_RECORDED,
                ObservationsRecorded(bundle=target_bundle()),
                rollout_id=TARGET,
            )
            result = RolloutResult.model_validate(
                {"task_id": "bench", "_ng_rollout_id": TARGET, "latency_ms": 61_000}
            )
            tx.append(RESULT_RECORDED, result, rollout_id=TARGET)
            return 52

        appended += await store.execute(target)
    finally:
        await store.close()
    return appended / (time.perf_counter() - started)


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def timed_gets(http: httpx.Client, path: str, count: int) -> list[float]:
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        response = http.get(path)
        response.raise_for_status()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


async def sql_scan_rate(url: str) -> tuple[int, float]:
    store = LedgerStore(url, default_catalogue(), write_side_projectors())
    try:
        started = time.perf_counter()
        count = 0
        async with store.read() as conn:
            result = await conn.stream(
                select(observation_records.c.record).execution_options(yield_per=500)
            )
            async for _row in result:
                count += 1
        return count, count / (time.perf_counter() - started)
    finally:
        await store.read_engine.dispose()


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench observations", description=DESCRIPTION)
    parser.add_argument("--quick", action="store_true", help="2,000 rollouts, 100 reads")
    parser.add_argument("--rollouts", type=int, default=100_000)
    parser.add_argument("--reads", type=int, default=1_000)
    parser.add_argument(
        "--database-url", help="an empty database (default: a temporary SQLite file)"
    )
    args = parser.parse_args(argv)
    rollouts, reads = (2_000, 100) if args.quick else (args.rollouts, args.reads)

    with tempfile.TemporaryDirectory(prefix="bench-observations-") as scratch:
        data_dir = Path(scratch)
        url = args.database_url or f"sqlite+aiosqlite:///{data_dir / 'ledger.db'}"
        asyncio.run(migrate.upgrade(url))
        print(
            f"seeding {rollouts:,} rollouts (the target: 50 calls, 10 invocations, 40 tools) ...",
            flush=True,
        )
        append_rate = asyncio.run(seed(url, rollouts))
        print(f"seed: {append_rate:,.0f} appends/s (each recomputes the rollout's record)")

        server = ServerProcess(data_dir=data_dir, database_url=url).start()
        try:
            with httpx.Client(base_url=server.base_url, timeout=60) as http:
                size = len(http.get(f"/v1/rollouts/{TARGET}/record").content)
                timed_gets(http, f"/v1/rollouts/{TARGET}/record", 20)  # warm-up
                baseline = timed_gets(http, "/healthz", reads)
                record = timed_gets(http, f"/v1/rollouts/{TARGET}/record", reads)
                print(
                    f"record read ({size / 1024:,.0f} KiB): p50 {percentile(record, 0.5):.2f} ms, "
                    f"p99 {percentile(record, 0.99):.2f} ms ({reads} reads; target p50 <= 15 ms)"
                )
                print(
                    f"baseline GET /healthz:   p50 {percentile(baseline, 0.5):.2f} ms, "
                    f"p99 {percentile(baseline, 0.99):.2f} ms"
                )
                print(f"  mean record read {statistics.fmean(record):.2f} ms")

                started = time.perf_counter()
                exported = 0
                with http.stream("GET", "/v1/export") as response:
                    response.raise_for_status()
                    for _line in response.iter_lines():
                        exported += 1
                elapsed = time.perf_counter() - started
                print(
                    f"export over HTTP: {exported:,} records in {elapsed:.1f} s = "
                    f"{exported / elapsed:,.0f} records/s (target >= 2,000)"
                )
        finally:
            server.stop()
        count, scan_rate = asyncio.run(sql_scan_rate(url))
        print(
            f"baseline SQL scan of stored records: {count:,} records at {scan_rate:,.0f} records/s"
        )
