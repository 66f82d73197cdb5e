"""Gym's own token store writes ``<id>.tokens.intents`` (``TokenCaptureStore.begin_call``, what
its model server runs before each dispatch) beside its lock, state and token files, while a real
``ledger serve --follow-capture-dir`` follows the directory: every intent Gym wrote is recorded,
once, and nothing else is read as one. With no capture written (observability off), every
admitted call is listed with its lineage row and intent and no capture."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx

from gym_tests.support import ledger_serve_process
from tests.support.server import ServerProcess

DEADLINE_S = 60.0


def evidence(server: ServerProcess, rollout_id: str) -> dict[str, Any]:
    reply = httpx.get(f"{server.base_url}/v1/rollouts/{rollout_id}/call-evidence", timeout=10)
    if reply.status_code == 404:
        return {"calls": []}
    assert reply.status_code == 200, reply.text
    document: dict[str, Any] = reply.json()
    return document


def wait_for_calls(server: ServerProcess, rollout_id: str, count: int) -> dict[str, Any]:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        document = evidence(server, rollout_id)
        if len(document["calls"]) >= count or time.monotonic() > deadline:
            return document
        time.sleep(0.1)  # poll


def test_gyms_intents_are_recorded_once_and_listed_without_captures(tmp_path: Path) -> None:
    from nemo_gym.token_id_capture.store import TokenCaptureStore

    capture_dir = tmp_path / "captures"
    store = TokenCaptureStore(capture_dir)
    data_dir = tmp_path / "ledger-data"
    server = ledger_serve_process(
        data_dir=data_dir,
        database_url=f"sqlite+aiosqlite:///{data_dir / 'ledger.db'}",
        env={"LEDGER_CAPTURE_GRACE_S": "0"},
        args=["--follow-capture-dir", str(capture_dir), "--follow-poll"],
    ).start()
    try:
        ids = [f"call-{n}" for n in range(12)]
        for model_call_id in ids[:6]:
            asyncio.run(store.begin_call("7-0", model_call_id))
        # Lineage rows for every call but the last (as the plug-in records them).
        for n, model_call_id in enumerate(ids[:-1]):
            row = {"failure_reason": "worker_capture_failed", "model_call_id": model_call_id}
            if n % 2 == 0:
                posted = httpx.post(
                    f"{server.base_url}/v1/rollouts/7-0/ledger/rows", json=row, timeout=10
                )
                assert posted.status_code == 200, posted.text
        for model_call_id in ids[6:]:
            asyncio.run(store.begin_call("7-0", model_call_id))
        store.read_entries("7-0")  # takes Gym's lock file too
        document = wait_for_calls(server, "7-0", len(ids))
        calls = {call["model_call_id"]: call for call in document["calls"]}
        assert sorted(calls) == sorted(ids)
        assert all(call["intent_seq"] is not None for call in calls.values())
        assert all(call["capture_seq"] is None for call in calls.values())
        with_rows = {mid for mid, call in calls.items() if call["row_seq"] is not None}
        assert with_rows == set(ids[0:11:2])
        # Observability off: nothing captured, every admitted call named missing (grace 0).
        assert document["coverage"]["admitted"] == len(ids)
        assert document["coverage"]["captured"] == 0
        assert sorted(document["findings"]["model_call_capture_missing"]) == sorted(ids)
        events = httpx.get(
            f"{server.base_url}/v1/events", params={"after": 0, "limit": 1000}, timeout=10
        ).json()["events"]
        intents = [e for e in events if e["kind"] == "model_call.intent_recorded"]
        assert len(intents) == len(ids)
        files = sorted(path.name for path in capture_dir.iterdir())
        assert "7-0.tokens.intents" in files and "7-0.tokens.lock" in files
    finally:
        server.stop()
