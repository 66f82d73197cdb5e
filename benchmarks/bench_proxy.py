"""The capture proxy's added latency: direct to the fake upstream vs through ``ledger serve``.

One run: the fake upstream (tests/support/fake_upstream.py, answering after ``--delay-ms``, a
stand-in for model time) and a real ``ledger serve --upstream`` on a fresh SQLite file, both on
loopback. 32 concurrent keep-alive clients, their starts spread over one model latency (so calls
arrive as from independent agents, not in lockstep); rounds alternate direct and proxied phases
so both see the same machine. Figures: non-streaming latency p50/p99 direct vs proxied (the
difference is the added latency), time to first body byte of a chat SSE stream direct vs
proxied, CPU per call of each server, and the capture check: every proxied call the upstream
answered has exactly one ``model_call.captured`` event with the model_call_id the client got in
``x-nemo-gym-model-call-id``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import httpx

from ledger.gym.dialects import MODEL_CALL_ID_HEADER
from tests.support.fake_upstream import FakeUpstreamProcess
from tests.support.server import ServerProcess, free_port

DESCRIPTION = "capture proxy: added latency p50/p99, stream TTFB direct vs proxied, no capture lost"

CLIENTS = 32
CHAT = "/v1/chat/completions"


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    first_byte_s: float
    total_s: float


@dataclass
class Phase:
    latencies: list[float] = field(default_factory=list)
    first_bytes: list[float] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    failures: int = 0


class Connection:
    """HTTP/1.1 keep-alive: content-length and chunked replies, timing the first body byte.
    (httpx costs more CPU per request than the proxy under test would add.)"""

    def __init__(self, port: int) -> None:
        self._port = port
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        self._reader, self._writer = await asyncio.open_connection("127.0.0.1", self._port)

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            await self._writer.wait_closed()

    async def post(self, path: str, body: bytes, delay_ms: int) -> Reply:
        assert self._reader is not None and self._writer is not None
        started = time.perf_counter()
        self._writer.write(
            (
                f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"x-fake-delay-ms: {delay_ms}\r\nContent-Length: {len(body)}\r\n\r\n"
            ).encode()
            + body
        )
        status = int((await self._reader.readline()).split()[1])
        headers: dict[str, str] = {}
        while (line := await self._reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        if "content-length" in headers:
            first = await self._reader.readexactly(1)
            first_byte = time.perf_counter()
            await self._reader.readexactly(int(headers["content-length"]) - len(first))
        else:  # chunked
            first_byte = 0.0
            while True:
                size = int((await self._reader.readline()).strip(), 16)
                if not first_byte:
                    first_byte = time.perf_counter()
                await self._reader.readexactly(size + 2)
                if size == 0:
                    break
        finished = time.perf_counter()
        return Reply(status, headers, first_byte - started, finished - started)


def _body(stream: bool, marker: str) -> bytes:
    return json.dumps(
        {
            "model": "plain",
            "stream": stream,
            "messages": [
                {"role": "system", "content": "You are a helpful assistant. " * 20},
                {"role": "user", "content": marker},
            ],
        }
    ).encode()


async def _phase(port: int, path: str, *, stream: bool, calls: int, delay_ms: int) -> Phase:
    phase = Phase()

    async def client(number: int) -> None:
        connection = Connection(port)
        await connection.open()
        # Spread the clients over one model latency: 32 clients in lockstep would arrive as
        # one burst per round, a load no set of independent agents produces.
        await asyncio.sleep(delay_ms / 1000 * number / CLIENTS)
        try:
            for call in range(calls):
                reply = await connection.post(
                    path.replace("{n}", str(number)), _body(stream, f"{number}-{call}"), delay_ms
                )
                if reply.status != 200:
                    phase.failures += 1
                    continue
                phase.latencies.append(reply.total_s)
                phase.first_bytes.append(reply.first_byte_s)
                if MODEL_CALL_ID_HEADER in reply.headers:
                    phase.ids.append(reply.headers[MODEL_CALL_ID_HEADER])
        finally:
            await connection.close()

    await asyncio.gather(*(client(n) for n in range(CLIENTS)))
    return phase


def _percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=1000, method="inclusive")[int(q * 10) - 1] * 1000


def _captures(base_url: str) -> list[tuple[str, float]]:
    """Every ``model_call.captured`` event: its model_call_id, and how long after the call
    completed (the proxy's clock at the answer's end) the event was recorded, in ms: the
    window in which a SIGKILL would lose it."""
    found: list[tuple[str, float]] = []
    after = 0
    with httpx.Client(base_url=base_url, timeout=60) as http:
        while True:
            page = http.get("/v1/events", params={"after": after, "limit": 1000}).json()
            if not page["events"]:
                return found
            for event in page["events"]:
                if event["kind"] == "model_call.captured":
                    recorded = datetime.fromisoformat(event["recorded_at"]).timestamp()
                    window = (recorded - event["payload"]["exchange"]["completed_at"]) * 1000
                    found.append((event["payload"]["model_call_id"], window))
            after = page["next_after"]


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (from /proc): a figure the machine's other load
    barely moves, unlike latency. 0 for a process gone meanwhile."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _captures_appended(base_url: str, timeout_s: float = 60.0) -> None:
    """Until ``ledger_proxy_captures_pending`` reads 0: the phase's captures are appended (the
    niced capture process may lag the phase), so its CPU is the phase's."""
    deadline = time.monotonic() + timeout_s
    async with httpx.AsyncClient(base_url=base_url) as client:
        while time.monotonic() < deadline:
            for line in (await client.get("/metrics")).text.splitlines():
                name, _, value = line.partition(" ")
                if name == "ledger_proxy_captures_pending" and float(value) == 0:
                    return
            await asyncio.sleep(0.02)  # poll


def _tree(pid: int) -> list[int]:
    """The process and its descendants alive now (its workers, its capture process)."""
    found, pending = [], [pid]
    while pending:
        parent = pending.pop()
        found.append(parent)
        for task in Path(f"/proc/{parent}/task").glob("*"):
            with contextlib.suppress(FileNotFoundError):
                pending += [int(child) for child in (task / "children").read_text().split()]
    return found


class LeanForwarder:
    """``benchmarks/lean_forwarder.py`` in its own process, forwarding to the fake upstream."""

    def __init__(self, upstream_url: str) -> None:
        self.port = free_port()
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "benchmarks.lean_forwarder",
                "--port",
                str(self.port),
                "--upstream",
                upstream_url,
            ],
        )

    def wait(self, timeout: float = 30.0) -> LeanForwarder:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port)):
                return self
            time.sleep(0.05)  # poll
        raise RuntimeError("the lean forwarder did not start")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


@dataclass(frozen=True)
class Leg:
    name: str
    port: int
    path: str
    # The process whose CPU this leg adds (the fake upstream's for the direct leg).
    pid: int


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench proxy")
    parser.add_argument("--quick", action="store_true", help="fewer calls per client")
    parser.add_argument("--calls", type=int, default=None, help="calls per client per phase")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--delay-ms", type=int, default=100, help="the fake model's latency")
    parser.add_argument("--workers", type=int, default=1, help="ledger serve --workers")
    args = parser.parse_args(argv)
    calls = args.calls or (5 if args.quick else 20)
    rounds = args.rounds or (1 if args.quick else 3)
    with tempfile.TemporaryDirectory(prefix="bench-proxy-") as scratch:
        directory = Path(scratch)
        upstream = FakeUpstreamProcess(directory, record=False).start()
        lean = LeanForwarder(upstream.url)
        server = ServerProcess(
            data_dir=directory / "data",
            database_url=f"sqlite+aiosqlite:///{directory / 'ledger.db'}",
            env={"LEDGER_UPSTREAMS": json.dumps({"fake": upstream.url})},
            argv=("ledger", "serve", "--upgrade", "--workers", str(args.workers)),
        )
        (directory / "data").mkdir()
        try:
            server.start(timeout=60)
            if args.workers > 1:
                server.wait_for_children(args.workers)
            lean.wait()
            answered, failures = asyncio.run(
                _run(
                    upstream,
                    lean,
                    server,
                    workers=args.workers,
                    calls=calls,
                    rounds=rounds,
                    delay_ms=args.delay_ms,
                )
            )
            _check_captures(server.base_url, answered, failures)
        finally:
            server.stop()
            lean.stop()
            upstream.stop()


async def _run(
    upstream: FakeUpstreamProcess,
    lean: LeanForwarder,
    server: ServerProcess,
    *,
    workers: int,
    calls: int,
    rounds: int,
    delay_ms: int,
) -> tuple[list[str], int]:
    assert server.process is not None and upstream.process is not None
    server_pid = server.process.pid
    # One rollout per client (an agent's rollout), as in an RL run; "{n}" is the client.
    proxied_path = f"/ng-rollout/bench-{uuid.uuid4().hex[:8]}-{{n}}{CHAT}"
    legs = (
        Leg("direct", upstream.port, CHAT, upstream.process.pid),
        Leg("lean", lean.port, CHAT, lean.process.pid),
        # Unprefixed: forwarded by the ledger, not captured (what forwarding alone costs).
        Leg("uncaptured", server.port, CHAT, 0),
        Leg("proxied", server.port, proxied_path, 0),
    )
    results: dict[tuple[str, bool], Phase] = {}
    cpu = dict.fromkeys((leg.name for leg in legs), 0.0)

    def cpu_of(leg: Leg) -> float:
        # ledger serve's whole tree: its workers and its capture process work for it too.
        return sum(_cpu_s(pid) for pid in ([leg.pid] if leg.pid else _tree(server_pid)))

    # Warm every path (connections, imports, the first writer batch).
    warm_ids: list[str] = []
    for leg in legs:
        warm = await _phase(leg.port, leg.path, stream=False, calls=2, delay_ms=delay_ms)
        warm_ids += warm.ids
    for _ in range(rounds):
        for stream in (False, True):
            for leg in legs:
                before = cpu_of(leg)
                phase = await _phase(
                    leg.port, leg.path, stream=stream, calls=calls, delay_ms=delay_ms
                )
                if leg.name == "proxied":
                    await _captures_appended(server.base_url)
                cpu[leg.name] += cpu_of(leg) - before
                total = results.setdefault((leg.name, stream), Phase())
                total.latencies += phase.latencies
                total.first_bytes += phase.first_bytes
                total.ids += phase.ids
                total.failures += phase.failures
    print(
        f"{CLIENTS} clients, {calls} calls each per phase, {rounds} rounds, "
        f"fake model latency {delay_ms} ms, SQLite FULL, ledger serve --workers {workers}; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    names = [leg.name for leg in legs]
    print(
        f"{'(ms)':28}"
        + "".join(f"{n:>11}" for n in names)
        + "".join(f"{'+' + n:>12}" for n in names[1:])
    )
    for label, stream, values, q in (
        ("non-streaming p50", False, "latencies", 50),
        ("non-streaming p99", False, "latencies", 99),
        ("stream first byte p50", True, "first_bytes", 50),
        ("stream first byte p99", True, "first_bytes", 99),
        ("stream complete p50", True, "latencies", 50),
    ):
        figures = [_percentile(getattr(results[(n, stream)], values), q) for n in names]
        added = [f - figures[0] for f in figures[1:]]
        print(
            f"{label:28}"
            + "".join(f"{f:11.2f}" for f in figures)
            + "".join(f"{a:12.2f}" for a in added)
        )
    per_call = {
        n: cpu[n] / (len(results[(n, False)].latencies) + len(results[(n, True)].latencies)) * 1000
        for n in names
    }
    print(
        "CPU per call (ms): "
        + ", ".join(f"{n} {per_call[n]:.2f}" for n in names)
        + " (direct: the fake upstream's; lean: the forwarder's; uncaptured and proxied: ledger "
        "serve's process tree, a proxied phase's until its captures are appended)"
    )
    others = {n: results[(n, False)].failures + results[(n, True)].failures for n in names}
    if any(others.values()):
        print("failed calls per leg: " + ", ".join(f"{n} {f}" for n, f in others.items()))
    failures = others["proxied"]
    answered = warm_ids + results[("proxied", False)].ids + results[("proxied", True)].ids
    return answered, failures


def _check_captures(base_url: str, answered: list[str], failures: int) -> None:
    deadline = time.monotonic() + 60
    while True:  # poll: captures land after their answers (with --workers N, in N processes)
        found = _captures(base_url)
        captured = Counter(model_call_id for model_call_id, _ in found)
        if all(captured[i] for i in answered) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    missing = [i for i in answered if captured[i] == 0]
    doubled = [i for i, n in captured.items() if n > 1]
    unexpected = set(captured) - set(answered)
    ok = not missing and not doubled and not unexpected and failures == 0
    print(
        f"captures: {len(answered)} proxied calls answered, {sum(captured.values())} captured; "
        f"missing {len(missing)}, duplicated {len(doubled)}, unexpected {len(unexpected)}, "
        f"failed calls {failures} -> {'OK' if ok else 'FAIL'}"
    )
    windows = [window for _, window in found]
    if len(windows) >= 2:
        print(
            "capture recorded after the answer's end (the SIGKILL window, ms): "
            f"p50 {statistics.median(windows):.1f}, p99 {_percentile(windows, 99) / 1000:.1f}, "
            f"max {max(windows):.1f}"
        )
