"""Gym's own CaptureStore writes a capture directory while a real ``ledger serve
--follow-capture-dir`` follows it: concurrent writers, Gym's pre-dispatch clear, ``-a<n>``
attempts and incomplete markers. Once the writers stop, the ledger's ng_model_call_capture
equals Gym's own merge_model_call_capture_into_record on the same directory; a SIGKILL of the
follower mid-stream loses and duplicates nothing."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from gym_tests.support import (
    ledger_serve_process,
)
from tests.support.exchanges import chat_exchange, messages_exchange, responses_exchange
from tests.support.server import ServerProcess

DEADLINE_S = 120.0
MAKERS = (chat_exchange, responses_exchange, messages_exchange)


def follower_server(tmp_path: Path, url: str, capture_dir: Path) -> ServerProcess:
    return ledger_serve_process(
        data_dir=tmp_path / "ledger-data",
        database_url=url,
        args=["--follow-capture-dir", str(capture_dir)],
    )


def row(task: int, rollout: int, attempt: int = 0) -> dict[str, Any]:
    """A collector row as Gym's rollout collection dispatches it."""
    return {"_ng_task_index": task, "_ng_rollout_index": rollout, "_ng_attempt_index": attempt}


def gym_merge(record: dict[str, Any], capture_dir: Path) -> dict[str, Any]:
    from nemo_gym.base_responses_api_model import merge_model_call_capture_into_record

    merged = merge_model_call_capture_into_record(dict(record), [capture_dir])
    attachment: dict[str, Any] = json.loads(json.dumps(merged["ng_model_call_capture"]))
    return attachment


def ledger_view(server: ServerProcess, rollout_id: str) -> dict[str, Any]:
    response = httpx.get(
        f"{server.base_url}/v1/rollouts/{rollout_id}/ng_model_call_capture", timeout=10
    )
    assert response.status_code == 200, response.text
    view: dict[str, Any] = response.json()
    return view


def captured_events(server: ServerProcess) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    after = 0
    while True:
        page = httpx.get(
            f"{server.base_url}/v1/events", params={"after": after, "limit": 1000}, timeout=10
        ).json()
        found += [e for e in page["events"] if e["kind"] == "model_call.captured"]
        if not page["events"]:
            return found
        after = page["next_after"]


def wait_until_equal(server: ServerProcess, rows: list[dict[str, Any]], capture_dir: Path) -> None:
    """Poll until the ledger shows, for every row, what Gym's merge reads; then the final
    comparison is an assertion (a difference left at the deadline fails, naming the rollout)."""
    from nemo_gym.rollout_correlation import maybe_rollout_id_from_run_body

    deadline = time.monotonic() + DEADLINE_S
    pending = list(rows)
    while pending and time.monotonic() < deadline:
        pending = [
            r
            for r in pending
            if ledger_view(server, str(maybe_rollout_id_from_run_body(r)))
            != gym_merge(r, capture_dir)
        ]
        if pending:
            time.sleep(0.2)  # poll
    for r in rows:
        rollout_id = str(maybe_rollout_id_from_run_body(r))
        ours, gyms = ledger_view(server, rollout_id), gym_merge(r, capture_dir)
        assert ours == gyms, (rollout_id, describe_difference(ours, gyms))


def describe_difference(ours: dict[str, Any], gyms: dict[str, Any]) -> str:
    """A bounded account of how two attachments differ (which calls, which keys)."""
    mine = [c["model_call_id"] for c in ours["calls"]]
    theirs = [c["model_call_id"] for c in gyms["calls"]]
    if mine != theirs:
        return f"{len(mine)} calls vs Gym's {len(theirs)}; first ids {mine[:3]} vs {theirs[:3]}"
    for a, b in zip(ours["calls"], gyms["calls"], strict=True):
        keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        if keys:
            return f"call {a['model_call_id']}: {[(k, a.get(k), b.get(k)) for k in keys]}"[:2000]
    return (
        f"gaps {ours.get('gaps')} vs {gyms.get('gaps')}, "
        f"metrics {ours['metrics']} vs {gyms['metrics']}"
    )


def exchange(n: int, label: str) -> dict[str, Any]:
    return MAKERS[n % len(MAKERS)](model_call_id=f"{label}-{n}")


def test_concurrent_gym_writers_clears_attempts_and_markers(
    tmp_path: Path, database_url: str
) -> None:
    from nemo_gym.base_responses_api_model import (
        CaptureStore,
        clear_model_call_captures_for_rollouts,
    )
    from nemo_gym.rollout_correlation import maybe_rollout_id_from_run_body

    capture_dir = tmp_path / "captures"
    store = CaptureStore(capture_dir)
    # One file exists before the server starts: the catch-up reads it.
    store.record("0-9", exchange(0, "early"))
    server = follower_server(tmp_path, database_url, capture_dir).start()
    rows: list[dict[str, Any]] = [row(0, 9)]
    errors: list[BaseException] = []
    try:

        def writer(task: int) -> None:
            try:
                mine = [row(task, 0), row(task, 1)]
                shared = row(99, 0)  # every writer appends to one file too (flock)
                for n in range(40):
                    for r in (*mine, shared):
                        rid = maybe_rollout_id_from_run_body(r)
                        store.record(rid, exchange(n, f"w{task}-{rid}"))
                    if n == 20:
                        # The collector re-dispatches the first row: Gym clears its file.
                        clear_model_call_captures_for_rollouts([mine[0]], [capture_dir])
                retry = row(task, 1, attempt=1)
                for n in range(5):
                    store.record(maybe_rollout_id_from_run_body(retry), exchange(n, f"retry{task}"))
                if task % 2:
                    store.mark_incomplete(maybe_rollout_id_from_run_body(mine[1]))
                    store.mark_incomplete(maybe_rollout_id_from_run_body(row(task, 2)))
            except BaseException as exc:  # surfaced below
                errors.append(exc)

        tasks = range(8)
        threads = [threading.Thread(target=writer, args=(task,)) for task in tasks]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        for task in tasks:
            rows += [row(task, 0), row(task, 1), row(task, 1, attempt=1)]
            if task % 2:
                rows.append(row(task, 2))  # a marker and no capture lines
        rows.append(row(99, 0))
        # A clear after the writers stopped, with a marker left in place: nothing but the gap.
        clear_model_call_captures_for_rollouts([row(0, 0)], [capture_dir])
        wait_until_equal(server, rows, capture_dir)
        shared_view = ledger_view(server, "99-0")
        assert len(shared_view["calls"]) == 8 * 40
        assert ledger_view(server, "1-1-a1")["metrics"]["num_calls"] == 5
        metrics = httpx.get(f"{server.base_url}/metrics", timeout=10).text
        assert f'ledger_capture_follow_files{{directory="{capture_dir}"}}' in metrics
    finally:
        server.stop()


def test_sigkill_of_the_follower_loses_and_duplicates_nothing(
    tmp_path: Path, database_url: str
) -> None:
    from nemo_gym.base_responses_api_model import CaptureStore

    capture_dir = tmp_path / "captures"
    store = CaptureStore(capture_dir)
    server = follower_server(tmp_path, database_url, capture_dir).start()
    # Three phases per writer: while the follower runs, while it is down (after its SIGKILL),
    # and while it catches up after the restart.
    phases = [threading.Event() for _ in range(3)]
    errors: list[BaseException] = []
    per_phase = 100

    def writer(task: int) -> None:
        try:
            for phase, go in enumerate(phases):
                go.wait(DEADLINE_S)
                for n in range(phase * per_phase, (phase + 1) * per_phase):
                    store.record(f"{task}-0", exchange(n, f"k{task}"))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(task,)) for task in range(4)]
    try:
        for thread in threads:
            thread.start()
        phases[0].set()
        deadline = time.monotonic() + DEADLINE_S
        while len(captured_events(server)) < 50:
            assert time.monotonic() < deadline, "the follower ingested nothing"
            time.sleep(0.02)  # poll
        server.kill()  # mid-stream: the writers are still in their first phase
        phases[1].set()
        server.start()
        phases[2].set()
        for thread in threads:
            thread.join()
        assert errors == []
        rows = [row(task, 0) for task in range(4)]
        wait_until_equal(server, rows, capture_dir)
        ids = [e["payload"]["model_call_id"] for e in captured_events(server)]
        assert len(ids) == len(set(ids)) == 4 * 3 * per_phase
    finally:
        for go in phases:
            go.set()
        for thread in threads:
            thread.join()
        server.stop()
