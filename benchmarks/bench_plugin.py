"""The lineage-store plug-in's ``record`` + ``resolve`` round trip over loopback, beside Gym's
own ``FileLineageStore`` on local disk, on the same commits in the same run.

One round trip is what a model-server worker does per call of a multi-call rollout: record the
call it just committed, then resolve the next request of the harness (which continues it). Each
rollout is a chain of calls; the conversation grows by two items per call, so the hashing Gym
does in both stores grows with it.

A third store shows the ceiling of this stack: the same plug-in client against a lean server
(``benchmarks/bare_server.py --mode lineage``: uvicorn and Starlette, the row parsed with orjson,
one INSERT and a FULL commit, one indexed SELECT, nothing else), started beside the ledger.

It needs the released Gym, which lives in its own environment: run from the project's ``.venv``
(``scripts/bench plugin``), it builds ``.gym-venv`` with ``scripts/gym-env`` if needed and runs
itself there, with the ledger server started from the project's interpreter.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.serving import wait_until_serving

DESCRIPTION = (
    "plug-in record+resolve round trip p50/p99 over loopback; Gym's FileLineageStore baseline"
)

REPO = Path(__file__).resolve().parent.parent
GYM_PYTHON = REPO / ".gym-venv" / "bin" / "python"
PROJECT_PYTHON_ENV = "LEDGER_PROJECT_PYTHON"
TOKEN = "bench-control-token"


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def show(label: str, samples_ms: list[float]) -> None:
    print(
        f"  {label:46} p50 {percentile(samples_ms, 0.5):8.3f} ms   "
        f"p99 {percentile(samples_ms, 0.99):8.3f} ms   (n={len(samples_ms)})",
        flush=True,
    )


def hex64(label: str) -> str:
    return hashlib.sha256(label.encode()).hexdigest()


def assistant(text: str, item_id: str) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "id": item_id,
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def chain(rollout_id: str, calls: int) -> list[tuple[Any, list[dict[str, Any]]]]:
    """(commit of call n, the request that continues it), for n = 1..calls, as Gym builds them."""
    from nemo_gym.token_id_capture import CallRecord, CaptureLedgerCommit

    out: list[tuple[Any, list[dict[str, Any]]]] = []
    request: list[dict[str, Any]] = [{"role": "user", "content": f"task {rollout_id}"}]
    parent: Any = None
    for n in range(1, calls + 1):
        call = f"c{n}"
        key = f"{rollout_id}/{call}"
        prev_len = parent.record.cum_len if parent is not None else 0
        record = CallRecord(
            model_call_id=call,
            parent_call_id=parent.record.model_call_id if parent is not None else None,
            prev_len=prev_len,
            delta_len=64,
            cum_len=prev_len + 64,
            weight_version=0,
            digest=hex64(f"staging:{key}"),
            extras_digest=hex64("extras"),
            staging_key=key,
            mode="token_in" if parent is not None else "text",
            chain_hash=hex64(f"chain:{key}"),
            cumulative_hash=hex64(f"cumulative:{key}"),
            response_id=f"resp-{key}",
            admitted_at=1755600000.25,
            fingerprint_version=2,
        )
        response = [assistant(f"step {n} of {rollout_id}: " + "x" * 200, f"msg-{key}")]
        commit = CaptureLedgerCommit(
            rollout_id=rollout_id,
            record=record,
            staging_chain=(parent.staging_chain if parent is not None else ()) + (key,),
            request_items=request,
            response_items=response,
        )
        request = [*request, *response, {"role": "user", "content": f"tool result {n}"}]
        out.append((commit, request))
        parent = commit
    return out


class Samples:
    """Milliseconds per round trip, and per half of it."""

    def __init__(self) -> None:
        self.round_trip: list[float] = []
        self.record: list[float] = []
        self.resolve: list[float] = []


async def round_trips(
    store: Any, rollout: list[tuple[Any, list[dict[str, Any]]]], into: Samples
) -> None:
    """Record each call, then resolve the request that continues it; every resolution is
    checked (a wrong one aborts the run)."""
    for commit, next_request in rollout:
        started = time.perf_counter()
        await store.record(commit)
        recorded = time.perf_counter()
        resolution = await store.resolve(commit.rollout_id, next_request)
        done = time.perf_counter()
        into.round_trip.append((done - started) * 1000)
        into.record.append((recorded - started) * 1000)
        into.resolve.append((done - recorded) * 1000)
        match = resolution.match
        if match is None or match.model_call_id != commit.record.model_call_id:
            raise RuntimeError(f"{type(store).__name__} resolved {resolution} for {commit}")


def start_server(python: str, url: str, data_dir: Path, port: int) -> subprocess.Popen[bytes]:

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(
        LEDGER_DATA_DIR=str(data_dir),
        LEDGER_DATABASE_URL=url,
        LEDGER_CONTROL_TOKEN=TOKEN,
        LEDGER_MIRROR_ENABLED="false",
    )
    process = subprocess.Popen(
        [
            python,
            "-m",
            "ledger",
            "serve",
            "--upgrade",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return wait_until_serving(process, port)


def start_lean_server(python: str, path: Path, port: int) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["LEDGER_DATABASE_URL"] = f"sqlite:///{path}"
    process = subprocess.Popen(
        [python, "-m", "benchmarks.bare_server", "--mode", "lineage", "--port", str(port)],
        env=env,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return wait_until_serving(process, port)


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def http_floor(base_url: str, count: int) -> list[float]:
    """What one loopback request to this server costs with no work behind it."""
    import httpx

    samples: list[float] = []
    async with httpx.AsyncClient(base_url=base_url) as http:
        for _ in range(count):
            started = time.perf_counter()
            (await http.get("/healthz")).raise_for_status()
            samples.append((time.perf_counter() - started) * 1000)
    return samples


async def measure(
    base_url: str, lean_url: str, files_root: Path, rollouts: int, calls: int
) -> None:
    from nemo_gym.token_id_capture.lineage import FileLineageStore

    from ledger.gym_plugin import LedgerCaptureLedger

    plugin = LedgerCaptureLedger(base_url)
    lean = LedgerCaptureLedger(lean_url)
    reference = FileLineageStore(files_root)
    ours, leans, gyms = Samples(), Samples(), Samples()
    stores = [(plugin, ours), (lean, leans), (reference, gyms)]
    # Warm each (connection, caches) on a rollout of its own.
    for store, _ in stores:
        await round_trips(store, chain("warm-0", 3), Samples())
    for n in range(rollouts):
        rollout = chain(f"{n}-0", calls)
        # Rotate which store goes first, so drift on a shared machine hits all alike.
        for store, into in stores[n % 3 :] + stores[: n % 3]:
            await round_trips(store, rollout, into)
    floor = await http_floor(base_url, len(ours.round_trip))
    for store, _ in stores:
        await store.close()
    show("floor: GET /healthz (HTTP, loopback)", floor)
    show("plug-in record+resolve (HTTP, loopback)", ours.round_trip)
    show("  of which record", ours.record)
    show("  of which resolve", ours.resolve)
    show("lean route record+resolve (same stack)", leans.round_trip)
    show("  of which record", leans.record)
    show("  of which resolve", leans.resolve)
    show("Gym FileLineageStore record+resolve (disk)", gyms.round_trip)
    show("  of which record", gyms.record)
    show("  of which resolve", gyms.resolve)
    a, b = ours.round_trip, gyms.round_trip
    base = percentile(floor, 0.5)
    print(
        f"ratios to the floor's p50: plug-in {percentile(a, 0.5) / base:.1f}x, lean route "
        f"{percentile(leans.round_trip, 0.5) / base:.1f}x, FileLineageStore "
        f"{percentile(b, 0.5) / base:.1f}x",
        flush=True,
    )
    print(
        f"summary: plug-in round trip p50 {percentile(a, 0.5):.2f} ms / p99 "
        f"{percentile(a, 0.99):.2f} ms vs FileLineageStore p50 {percentile(b, 0.5):.2f} ms"
        f" / p99 {percentile(b, 0.99):.2f} ms ({rollouts} rollouts x {calls} calls)",
        flush=True,
    )


def inner(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(REPO))
    python = os.environ.get(PROJECT_PYTHON_ENV) or str(REPO / ".venv" / "bin" / "python")
    rollouts, calls = (6, 10) if args.quick else (50, 20)
    with tempfile.TemporaryDirectory(prefix="bench-plugin-") as scratch:
        root = Path(scratch)
        url = args.postgres_url or f"sqlite+aiosqlite:///{root / 'ledger.db'}"
        backend = "postgresql" if args.postgres_url else "sqlite"
        port, lean_port = free_port(), free_port()
        server = start_server(python, url, root / "data", port)
        try:
            lean_server = start_lean_server(python, root / "lean.db", lean_port)
        except BaseException:
            server.terminate()
            raise
        try:
            print(f"ledger ({backend}) on 127.0.0.1:{port}; Gym's store under {root}", flush=True)
            asyncio.run(
                measure(
                    f"http://127.0.0.1:{port}",
                    f"http://127.0.0.1:{lean_port}",
                    root / "gym-files",
                    rollouts,
                    calls,
                )
            )
        finally:
            for process in (server, lean_server):
                process.terminate()
                process.wait(timeout=30)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench plugin")
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    parser.add_argument("--postgres-url", help="the ledger on PostgreSQL (an empty database)")
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.inner or importlib.util.find_spec("nemo_gym") is not None:
        inner(args)
        return
    # From the project's environment: run again inside Gym's, with the ledger from this one.
    subprocess.run([str(REPO / "scripts" / "gym-env"), str(REPO / ".gym-venv")], check=True)
    env = {**os.environ, "PYTHONPATH": str(REPO), PROJECT_PYTHON_ENV: sys.executable}
    command = [str(GYM_PYTHON), "-m", "benchmarks.bench_plugin", "--inner", *argv]
    subprocess.run(command, check=True, env=env, cwd=REPO)


if __name__ == "__main__":
    main(sys.argv[1:])
