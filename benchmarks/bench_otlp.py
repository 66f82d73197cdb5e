"""The OTLP export: spans/s the follower sends, and what running it costs capture ingest.

Export rate: a generated Gym run (tests/support/health_run.py) appended through the store's own
path, then an in-process ``OtlpFollower`` catches up against a collector that only counts spans
(benchmarks/otlp_sink.py, its own process), timed from its first read to its checkpoint saved.

Cost to ingest: bench captures' own ingest (a real ``ledger serve``, 32 clients of single
captures, then batches of 100; benchmarks/bench_captures.py) with the exporter on as shipped
(``LEDGER_OTLP_ENDPOINT`` at the sink: a niced process of its own; a rollout is sent once it
has not changed for 1 s), on in the server's own process (``LEDGER_OTLP_PROCESS=false``), its
process running but sending nothing (a diagnostic: settle 1 h), and off, alternated in four
rounds in the same run, each round in another order (the median of the rounds' ratios, and
each round's figures), with the CPU seconds the export process used beside the server's (from
/proc, when the clients are done). The spans the sink took during each run are printed beside
it: the single captures' rollouts settle, and are sent, while the batches are ingested. The
bound: the exporter must not cut ingest by more than 10%.

Usage: scripts/bench otlp [--quick] [--rollouts=N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks.bench_captures import IngestBodies, IngestServer, measure_ingest
from benchmarks.bench_health import seed
from benchmarks.serving import wait_until_serving
from ledger.app.areas import default_catalogue, write_side_projectors
from ledger.areas.otel.follower import OtlpFollower
from ledger.areas.otel.mapping import MappingOptions
from ledger.areas.otel.sender import OtlpSender
from ledger.log import migrate
from ledger.log.store import LedgerStore
from tests.support.health_run import generate_run
from tests.support.server import ServerProcess, free_port

DESCRIPTION = "OTLP export spans/s, and capture ingest with the exporter on and off"
# Rounds of the alternated ingest runs: this machine's speed drifts between minutes.
ROUNDS = 4


class Sink:
    def __init__(self) -> None:
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Sink:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.otlp_sink", "--port", str(self.port)]
        )
        wait_until_serving(self.process, self.port)
        return self

    def __exit__(self, *_exc: object) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=30)

    def spans(self) -> int:
        return int(httpx.get(f"{self.url}/count", timeout=10).text)


async def export_rate(rollouts: int, sink: Sink, *, content: bool) -> tuple[int, int, float]:
    """(rollouts, spans, seconds) of one catch-up over a fresh database of the run."""
    with tempfile.TemporaryDirectory(prefix="bench-otlp-") as scratch:
        url = f"sqlite+aiosqlite:///{Path(scratch) / 'ledger.db'}"
        await migrate.upgrade(url)
        await seed(url, generate_run(rollouts, seed=5))
        store = LedgerStore(url, default_catalogue(), write_side_projectors())
        await store.open()
        before = sink.spans()
        try:
            # catch_up runs the follower's steps here, without its background task.
            async with OtlpSender(sink.url) as sender:
                follower = OtlpFollower(
                    store, sender, options=MappingOptions(content=content), settle_seconds=0
                )
                started = time.perf_counter()
                sent = await follower.catch_up()
                seconds = time.perf_counter() - started
        finally:
            await store.close()
        return sent, sink.spans() - before, seconds


def cpu_seconds(pid: int) -> float:
    """User and system CPU a process has used (from /proc: its utime and stime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class CpuShares:
    """Per run: the server's CPU seconds and its children's (the export process)."""

    def __init__(self) -> None:
        self.server: list[float] = []
        self.children: list[float] = []

    def __call__(self, server: ServerProcess) -> None:
        assert server.process is not None
        self.server.append(cpu_seconds(server.process.pid))
        self.children.append(sum(cpu_seconds(pid) for pid in server.child_pids()))


def ingest_cost(sink: Sink, quick: bool) -> None:
    product = IngestServer(
        "exporter on (product: own process, niced)", env={"LEDGER_OTLP_ENDPOINT": sink.url}
    )
    eager = IngestServer(
        "exporter on, in the server's process",
        env={"LEDGER_OTLP_ENDPOINT": sink.url, "LEDGER_OTLP_PROCESS": "false"},
    )
    # Diagnostic: the export process polling, never sending (nothing settles within the run):
    # what its presence costs, apart from the export's own work.
    idle = IngestServer(
        "exporter process idle (settle 1 h)",
        env={"LEDGER_OTLP_ENDPOINT": sink.url, "LEDGER_OTLP_SETTLE_S": "3600"},
    )
    off = IngestServer("no exporter (baseline)")
    configs = [product, eager, idle, off]
    bodies = IngestBodies.build(30 if quick else 60, 2 if quick else 6)
    rates: dict[str, list[Any]] = {config.label: [] for config in configs}
    spans: dict[str, list[int]] = {config.label: [] for config in configs}
    cpu = {config.label: CpuShares() for config in configs}
    for round_ in range(ROUNDS):
        # Each round in another order, so the machine's drift within a round does not always
        # favour the same configuration.
        for config in configs[round_ % len(configs) :] + configs[: round_ % len(configs)]:
            before = sink.spans()
            rates[config.label].append(measure_ingest(config, bodies, cpu[config.label]))
            spans[config.label].append(sink.spans() - before)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"capture ingest with and without the exporter ({ROUNDS} rounds; load {load}):")
    for label, runs in rates.items():
        single = statistics.median(r.single for r in runs)
        batched = statistics.median(r.batched for r in runs)
        each = ", ".join(f"{r.single:,.0f}/{r.batched:,.0f}" for r in runs)
        print(
            f"  {label:42} single {single:6,.0f}/s  batched x100 {batched:6,.0f}/s ({each});"
            f" spans sent {spans[label]}"
        )
    shares = cpu[product.label]
    print(
        "  CPU of the export process against the server's (product runs): "
        + ", ".join(
            f"{child:.1f} s / {server:.1f} s ({child / server:.0%})"
            for child, server in zip(shares.children, shares.server, strict=True)
        )
    )
    baseline = rates[off.label]
    for config in (product, eager, idle):
        runs = rates[config.label]
        # The ratio of each round's runs, then their median: figures of one round were taken
        # minutes apart at most.
        single = [r.single / b.single for r, b in zip(runs, baseline, strict=True)]
        batched = [r.batched / b.batched for r, b in zip(runs, baseline, strict=True)]
        ratios = (statistics.median(single), statistics.median(batched))
        verdict = "within" if min(ratios) >= 0.9 else "OVER"
        print(
            f"  {config.label} / off, median of the rounds: single {ratios[0]:.2f}x"
            f" ({', '.join(f'{x:.2f}' for x in single)}), batched {ratios[1]:.2f}x"
            f" ({', '.join(f'{x:.2f}' for x in batched)}): {verdict} the 10% bound"
        )


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench otlp", description=DESCRIPTION)
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    parser.add_argument("--rollouts", type=int, default=None)
    args = parser.parse_args(argv)
    rollouts = args.rollouts or (300 if args.quick else 2_000)
    with Sink() as sink:
        print(f"export of a generated run of {rollouts:,} rollouts (SQLite file, sink collector):")
        for content in (False, True):
            sent, spans, seconds = asyncio.run(export_rate(rollouts, sink, content=content))
            print(
                f"  {'with --content' if content else 'without content':16} {sent:,} rollouts,"
                f" {spans:,} spans in {seconds:.2f} s: {spans / seconds:,.0f} spans/s,"
                f" {sent / seconds:,.0f} rollouts/s"
            )
        ingest_cost(sink, args.quick)
