"""Gym's rollout health checks over N stored rollouts: the ledger's quality summary (all of
them, and a ~1,000-rollout id-glob selection) and one rollout's health, against Gym 0.7.0's own
``run_health_checks`` over the exported JSONL of the same rollouts, in the same run.

The ledger is measured twice: before its health follower has run (every record checked on
read, the freshness rule's fallback) and after the follower has caught up (the summary put
together from ``health_findings``); the follower's catch-up is timed too. Each answer is timed
to both files' bytes, as Gym's run is timed to its files written.

The run is generated (tests/support/health_run.py: every check the records can express) and
appended through the store's own path in big commands. Gym runs in its environment
(``.gym-venv``, built by scripts/gym-env) with its default worker count; the two answers are
also compared byte for byte. The two are measured in three rounds, Gym right after the ledger
in each, and the headline ratio is the median of the rounds' ratios: this machine's speed
drifts by tens of percent between minutes (both sides' figures moved by a third between two
runs ten minutes apart), and a ratio of figures taken in different minutes carries that drift.

The seeded database is built once per size and schema head and kept under ``bench-data/``
(cached_databases.py); each run works on a copy, so the on-read leg always starts with no
findings rows and the follower's catch-up is timed over all of them.

The quick path's ceiling is printed beside it: its own statement fetched whole on the stdlib
driver with no Python pass (for all the rollouts and for the selection), and a bare aggregate
over ``health_findings`` with no freshness test at all.

The follower's cost to ingest: bench captures' own ingest (a real ``ledger serve``, 32 clients
of single captures, then batches of 100), with the follower on (the product) and with
``LEDGER_HEALTH_FINDINGS_ENABLED=false``, alternated twice in the same run (``--no-ingest``
skips it).

Usage: scripts/bench health [--quick] [--rollouts=N] [--reads=N] [--no-ingest]
"""

from __future__ import annotations

import argparse
import asyncio
import fnmatch
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.bench_captures import IngestBodies, IngestServer, measure_ingest
from benchmarks.cached_databases import cached_database
from ledger.app.areas import default_catalogue, write_side_projectors
from ledger.areas.health.follower import HealthFollower
from ledger.areas.health.selection import Selection
from ledger.areas.health.service import HealthService, SelectionReport
from ledger.areas.health.summary_query import summary_rows_statement
from ledger.log import migrate
from ledger.log.store import LedgerStore
from ledger.log.transaction import WriteTransaction
from tests.support.health_append import append_posts
from tests.support.health_run import PlannedRollout, generate_run

DESCRIPTION = "quality summary of N rollouts (and a 1,000 selection) vs Gym's run_health_checks"
GYM_PYTHON = Path(".gym-venv/bin/python")
GYM_SCRIPT = """
import sys, time
from pathlib import Path
from nemo_gym.rollout_health import run_health_checks
started = time.perf_counter()
run_health_checks(Path(sys.argv[1]), output_dir=Path(sys.argv[2]))
print(time.perf_counter() - started)
"""


async def seed(url: str, planned: list[PlannedRollout], batch: int = 100) -> float:
    store = LedgerStore(url, default_catalogue(), write_side_projectors())
    await store.open()
    started = time.perf_counter()
    appended = 0
    try:
        for first in range(0, len(planned), batch):
            chunk = planned[first : first + batch]

            def command(tx: WriteTransaction, chunk: list[PlannedRollout] = chunk) -> int:
                return sum(append_posts(tx, p) for p in chunk)

            appended += await store.execute(command)
            if first and first % 20_000 < batch:
                print(f"  seeded {first:,} rollouts", flush=True)
    finally:
        await store.close()
    return appended / (time.perf_counter() - started)


def seeded_copy(planned: list[PlannedRollout], target: Path) -> None:
    """A copy of the cached database holding ``planned`` (built on first use)."""

    async def build(url: str) -> None:
        await migrate.upgrade(url)
        print(f"seeding {len(planned):,} rollouts ...", flush=True)
        print(f"seed: {await seed(url, planned):,.0f} appends/s")

    cache = cached_database(f"health-{len(planned)}", "health run", build)
    shutil.copyfile(cache, target)


def export(url: str, target: Path) -> None:
    env = {**os.environ, "LEDGER_DATABASE_URL": url, "LEDGER_DATA_DIR": str(target.parent)}
    subprocess.run(
        [".venv/bin/python", "-m", "ledger", "export", "--output", str(target)],
        env=env,
        check=True,
        capture_output=True,
    )


def gym_seconds(source: Path, out: Path) -> float:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run(
        [str(GYM_PYTHON), "-c", GYM_SCRIPT, str(source), str(out)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return float(done.stdout.strip().splitlines()[-1])


def choose_glob(planned: list[PlannedRollout], wanted: int = 1_000) -> tuple[str, set[str]]:
    """The id glob whose selection is closest to ``wanted`` rollouts."""
    ids = [p.rollout_id for p in planned]
    candidates = [
        f"{prefix}{'?' * width}-*"
        for prefix in (*map(str, range(1, 10)), *map(str, range(10, 100)))
        for width in range(0, 5)
    ]
    best = min(candidates, key=lambda g: abs(sum(fnmatch.fnmatchcase(i, g) for i in ids) - wanted))
    return best, {i for i in ids if fnmatch.fnmatchcase(i, best)}


def ledger_id(line: bytes) -> str:
    record = json.loads(line)
    capture = record.get("ng_model_call_capture")
    if isinstance(capture, dict):
        return str(capture["rollout_id"])
    trajectory = record.get("ng_trajectory") or {}
    return str(trajectory.get("rollout_id") or record.get("_ng_rollout_id"))


async def on_read_seconds(url: str) -> float:
    """The whole selection's summary with no findings rows (every record checked on read)."""
    store = LedgerStore(url, default_catalogue(), [])
    try:
        service = HealthService(store.read_sync)
        started = time.perf_counter()
        report = await service.report(Selection(attempts="all"))
        report.summary_bytes()
        b"".join(report.verdict_lines())
        assert report.computed_on_read == report.counts.matched
        return time.perf_counter() - started
    finally:
        await store.close()


async def catch_up(url: str) -> tuple[float, int]:
    """The health follower's catch-up over every stored record: seconds, records checked."""
    store = LedgerStore(url, default_catalogue(), write_side_projectors())
    await store.open()
    try:
        follower = HealthFollower(store)
        started = time.perf_counter()
        checked = await follower.catch_up()
        return time.perf_counter() - started, checked
    finally:
        await store.close()


@dataclass(frozen=True)
class Round:
    """One round: the ledger's median answers, then Gym's runs over the same rollouts."""

    ours_all: float
    gym_all: float
    ours_glob: float
    gym_glob: float


async def measure(
    url: str,
    scratch: Path,
    glob: str,
    reads: int,
    probe: list[str],
    gym: Callable[[str, int], float],
) -> tuple[list[Round], dict[str, Any]]:
    """ROUNDS rounds of [the ledger's answers for all and for the glob, each with Gym's run
    right after it]: this machine's speed drifts by tens of percent within minutes, so each
    ratio compares figures taken within the same minute. ``gym(which, round)`` runs Gym."""
    store = LedgerStore(url, default_catalogue(), [])
    service = HealthService(store.read_sync)
    rounds = []
    firsts: dict[str, Any] = {}
    try:
        for number in range(ROUNDS):
            # The first summary after the catch-up reads the follower's fresh pages (SQLite's
            # WAL not yet checkpointed), and the first of each statement shape compiles it;
            # each round's figure is the median of RUNS, the very first is printed beside it.
            all_runs, every = await _timed_reports(service, Selection(attempts="all"))
            assert every.computed_on_read == 0
            if number == 0:
                firsts["all_first"] = all_runs[0]
                _write_files(scratch / "ledger-all", every)
            # Dropped before the next answers are timed: a server keeps no answer, and 100,000
            # lines held alive only move the collector's work into the next timing.
            del every
            gym_all = await asyncio.to_thread(gym, "all", number)
            glob_runs, chosen = await _timed_reports(service, Selection(ids=glob, attempts="all"))
            assert chosen.computed_on_read == 0
            if number == 0:
                firsts["glob_first"] = glob_runs[0]
                firsts["glob_records"] = chosen.counts.matched
                _write_files(scratch / "ledger-glob", chosen)
            gym_glob = await asyncio.to_thread(gym, "glob", number)
            rounds.append(
                Round(statistics.median(all_runs), gym_all, statistics.median(glob_runs), gym_glob)
            )
        samples = []
        for rollout_id in (probe * (reads // max(1, len(probe)) + 1))[:reads]:
            started = time.perf_counter()
            await service.rollout(rollout_id)
            samples.append((time.perf_counter() - started) * 1000)
    finally:
        await store.close()
    firsts["one_p50"] = statistics.median(samples)
    firsts["one_p99"] = sorted(samples)[int(0.99 * (len(samples) - 1))]
    return rounds, firsts


ROUNDS = 3
RUNS = 5


async def _timed_reports(
    service: HealthService, selection: Selection
) -> tuple[list[float], SelectionReport]:
    """Seconds of each of RUNS answers, and the last answer. An answer is what the routes and
    ``ledger health`` hand on: both files' bytes (Gym's figure includes writing them)."""
    runs = []
    for _ in range(RUNS):
        started = time.perf_counter()
        report = await service.report(selection)
        report.summary_bytes()
        b"".join(report.verdict_lines())
        runs.append(time.perf_counter() - started)
    return runs, report


def _write_files(directory: Path, report: SelectionReport) -> None:
    directory.mkdir()
    (directory / "quality_summary.json").write_bytes(report.summary_bytes())
    (directory / "rollout_verdicts.jsonl").write_bytes(b"".join(report.verdict_lines()))


async def quick_statements(url: str, glob: str) -> dict[str, str]:
    """The quick path's statement for all the rollouts and for the glob, as SQLite text."""
    store = LedgerStore(url, default_catalogue(), [])
    try:
        async with store.read() as conn:
            return {
                name: str(
                    summary_rows_statement(selection, (), conn).compile(
                        dialect=conn.dialect, compile_kwargs={"literal_binds": True}
                    )
                )
                for name, selection in (
                    ("rows", Selection(attempts="all")),
                    ("glob_rows", Selection(ids=glob, attempts="all")),
                )
            }
    finally:
        await store.read_engine.dispose()


def _ceiling(database: Path, statements: dict[str, str]) -> dict[str, float]:
    """The leanest reads of the same rows, each the median of three, on the stdlib driver
    (no SQLAlchemy, no Python pass): the quick path's own statements fetched whole, and a bare
    aggregate of ``health_findings`` (no freshness test, no selection, no rows)."""
    statements = {
        **statements,
        "bare": "SELECT count(*), sum(model_call_errors), sum(transcript_prompt_tokens) "
        "FROM health_findings",
    }
    figures: dict[str, list[float]] = {name: [] for name in statements}
    with closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as db:
        for _ in range(3):
            for name, text in statements.items():
                started = time.perf_counter()
                db.execute(text).fetchall()
                figures[name].append(time.perf_counter() - started)
    return {f"ceiling_{name}": statistics.median(runs) for name, runs in figures.items()}


FOLLOWER_ON = IngestServer("ledger serve (health follower on)")
FOLLOWER_OFF = IngestServer(
    "ledger serve, LEDGER_HEALTH_FINDINGS_ENABLED=false",
    env={"LEDGER_HEALTH_FINDINGS_ENABLED": "false"},
)


def follower_cost(quick: bool) -> None:
    """Captures/s with the follower on and off, alternated (on, off, on, off): the same
    clients and bodies, a fresh database each."""
    bodies = IngestBodies.build(30 if quick else 60, 2 if quick else 6)
    rates: dict[str, list[Any]] = {FOLLOWER_ON.label: [], FOLLOWER_OFF.label: []}
    for _ in range(2):
        for config in (FOLLOWER_ON, FOLLOWER_OFF):
            rates[config.label].append(measure_ingest(config, bodies))
    print(f"ingest with and without the health follower (load {_load()}):")
    medians = {}
    for label, runs in rates.items():
        single = statistics.median(r.single for r in runs)
        batched = statistics.median(r.batched for r in runs)
        medians[label] = (single, batched)
        each = ", ".join(f"{r.single:,.0f}/{r.batched:,.0f}" for r in runs)
        print(f"  {label:52} single {single:7,.0f}/s  batched x100 {batched:7,.0f}/s ({each})")
    on, off = medians[FOLLOWER_ON.label], medians[FOLLOWER_OFF.label]
    print(f"  follower on / off: single {on[0] / off[0]:.2f}x, batched {on[1] / off[1]:.2f}x")


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def same_files(a: Path, b: Path) -> bool:
    return all(
        (a / name).read_bytes() == (b / name).read_bytes()
        for name in ("quality_summary.json", "rollout_verdicts.jsonl")
    )


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench health", description=DESCRIPTION)
    parser.add_argument("--quick", action="store_true", help="5,000 rollouts, 100 reads")
    parser.add_argument("--rollouts", type=int, default=100_000)
    parser.add_argument("--reads", type=int, default=1_000)
    parser.add_argument("--no-ingest", action="store_true", help="skip the follower's ingest leg")
    args = parser.parse_args(argv)
    rollouts, reads = (5_000, 100) if args.quick else (args.rollouts, args.reads)
    if not GYM_PYTHON.exists():
        raise SystemExit("bench health needs Gym's environment: run scripts/gym-env .gym-venv")

    print(f"load average before: {_load()}")
    with tempfile.TemporaryDirectory(prefix="bench-health-") as name:
        scratch = Path(name)
        url = f"sqlite+aiosqlite:///{scratch / 'ledger.db'}"
        planned = generate_run(rollouts, seed=12)
        seeded_copy(planned, scratch / "ledger.db")
        glob, chosen = choose_glob(planned)
        export(url, scratch / "rollouts.jsonl")
        with (
            (scratch / "rollouts.jsonl").open("rb") as lines,
            (scratch / "chosen.jsonl").open("wb") as kept,
        ):
            for line in lines:
                if ledger_id(line) in chosen:
                    kept.write(line)
        probe = [p.rollout_id for p in planned[:: max(1, len(planned) // 200)]]
        on_read = asyncio.run(on_read_seconds(url))
        follower_seconds, checked = asyncio.run(catch_up(url))
        sources = {"all": scratch / "rollouts.jsonl", "glob": scratch / "chosen.jsonl"}

        def gym(which: str, number: int) -> float:
            return gym_seconds(sources[which], scratch / f"gym-{which}-{number}")

        rounds, ours = asyncio.run(measure(url, scratch, glob, reads, probe, gym))
        ours.update(_ceiling(scratch / "ledger.db", asyncio.run(quick_statements(url, glob))))
        records = len(planned)
        for number, one in enumerate(rounds, 1):
            print(
                f"round {number}: all {records:,}: ledger {one.ours_all:.2f} s (median of {RUNS}), "
                f"Gym {one.gym_all:.2f} s: {one.gym_all / one.ours_all:.1f}x; selection: ledger "
                f"{one.ours_glob * 1000:.1f} ms (median of {RUNS}), Gym "
                f"{one.gym_glob * 1000:.0f} ms: {one.gym_glob / one.ours_glob:.1f}x"
            )
        all_ratio = statistics.median(one.gym_all / one.ours_all for one in rounds)
        glob_ratio = statistics.median(one.gym_glob / one.ours_glob for one in rounds)
        gym_all = statistics.median(one.gym_all for one in rounds)
        gym_glob = statistics.median(one.gym_glob for one in rounds)
        print(
            f"quality summary, all {records:,} rollouts: {all_ratio:.1f}x Gym's run_health_checks "
            f"over the export (median of {ROUNDS} rounds' ratios; target >= 20x); ledger "
            f"{statistics.median(one.ours_all for one in rounds):.2f} s, Gym {gym_all:.2f} s "
            f"(medians); same files: {same_files(scratch / 'ledger-all', scratch / 'gym-all-0')}"
        )
        print(f"  the first: {ours['all_first']:.2f} s ({gym_all / ours['all_first']:.1f}x)")
        print(
            f"  computed on read (no findings rows yet): {on_read:.2f} s "
            f"({gym_all / on_read:.1f}x); the follower's catch-up: {checked:,} records in "
            f"{follower_seconds:.2f} s ({checked / follower_seconds:,.0f} records/s)"
        )
        print(
            f"quality summary, selection {glob!r} ({ours['glob_records']:,} rollouts): "
            f"{glob_ratio:.1f}x Gym (median of {ROUNDS} rounds' ratios; target >= 20x); ledger "
            f"{statistics.median(one.ours_glob for one in rounds) * 1000:.1f} ms, Gym "
            f"{gym_glob * 1000:.0f} ms (medians); same files: "
            f"{same_files(scratch / 'ledger-glob', scratch / 'gym-glob-0')}"
        )
        print(
            f"  the first: {ours['glob_first'] * 1000:.1f} ms "
            f"({gym_glob / ours['glob_first']:.1f}x)"
        )
        print(
            f"one rollout's health: p50 {ours['one_p50']:.2f} ms, p99 {ours['one_p99']:.2f} ms "
            f"({reads} reads; target p50 <= 5 ms)"
        )
        print(
            f"ceiling, the same statement on the stdlib driver with no Python pass: all "
            f"{ours['ceiling_rows'] * 1000:.0f} ms ({gym_all / ours['ceiling_rows']:.0f}x Gym), "
            f"the selection {ours['ceiling_glob_rows'] * 1000:.1f} ms "
            f"({gym_glob / ours['ceiling_glob_rows']:.0f}x Gym); a bare aggregate of "
            f"health_findings {ours['ceiling_bare'] * 1000:.0f} ms"
        )
        print(f"load average after the summaries: {_load()}")
    if not args.no_ingest:
        follower_cost(args.quick)
