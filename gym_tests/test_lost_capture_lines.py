"""Gym 0.7.0's own ``vllm_model`` server (started as its launcher starts it, the ledger's plug-in
as its lineage store, external worker staging against a fake upstream) loses capture lines; the
ledger, following the capture directory, names exactly the lost calls.

The loss: a non-streaming call whose client closes its connection as soon as it has read the
body. Gym's session middleware streams the JSON body through with ``more_body`` set, so the
capture middleware forwards it at once and holds back only the empty final message; the client
has the whole body (Content-Length) and closes; Gym's ClientDisconnectCancellationMiddleware
sees the disconnect before the response completed and cancels the request while the capture
write is still queued: no line, no ``.capture.incomplete`` marker, no log. The lineage row was
committed before the body went out, so the trainer's manifest holds a call whose capture never
appears. It is a race, not every call: the test asserts it happened, so a run where it did not
fails instead of passing silently."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import httpx
import pytest

from gym_tests.gym_model_server import LoopbackProcess, fake_worker, vllm_model_server
from gym_tests.support import (
    ledger_serve_process,
)
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow

CALLS = 60
CLIENTS = 4
ROUNDS = 3
# Small, so the test waits little for lost calls to turn from pending into missing.
GRACE_S = "1"
DEADLINE_S = 180.0


@dataclass
class Run:
    """A ledger following the capture directory, the fake upstream, and how to start Gym's
    model server against both."""

    ledger: ServerProcess
    upstream: LoopbackProcess
    capture_dir: Path
    observability: bool
    log_dir: Path

    def gym(self) -> LoopbackProcess:
        return vllm_model_server(
            upstream_url=self.upstream.base_url,
            ledger_url=self.ledger.base_url,
            control_token=self.ledger.control_token,
            capture_dir=self.capture_dir,
            observability=self.observability,
            log_dir=self.log_dir,
        ).start()


@contextmanager
def run(tmp_path: Path, database_url: str, *, observability: bool) -> Iterator[Run]:
    capture_dir = tmp_path / "captures"
    capture_dir.mkdir()
    ledger = ledger_serve_process(
        data_dir=tmp_path / "ledger-data",
        database_url=database_url,
        env={"LEDGER_CAPTURE_GRACE_S": GRACE_S},
        args=["--follow-capture-dir", str(capture_dir), "--follow-poll"],
    ).start()
    try:
        upstream = fake_worker(tmp_path).start()
        try:
            yield Run(ledger, upstream, capture_dir, observability, tmp_path)
        finally:
            upstream.stop()
    finally:
        ledger.stop()


def dispatch_and_stop(evidence_run: Run, rollout_id: str) -> tuple[list[str], set[str]]:
    """60 calls to a fresh Gym model server, which then exits; returns Gym's files. A capture
    write can still be running after its client has the body: the files are final once Gym's
    server has exited."""
    gym = evidence_run.gym()
    try:
        dispatch(gym, rollout_id)
    finally:
        gym.stop()
    return gyms_files(evidence_run.capture_dir, rollout_id)


def call_and_close(port: int, rollout_id: str, n: int) -> int:
    """One non-streaming chat call on its own connection, closed the moment the body is read
    (what a client without a connection pool does). Returns the HTTP status."""
    body = json.dumps({"messages": [{"role": "user", "content": f"question {n}"}]}).encode()
    path = f"/ng-rollout/{rollout_id}/training-token-capture/v1/chat/completions"
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(head.encode() + body)
        received = b""
        while b"\r\n\r\n" not in received:
            chunk = sock.recv(65536)
            assert chunk, "Gym closed the connection before its response headers"
            received += chunk
        headers, rest = received.split(b"\r\n\r\n", 1)
        lines = headers.decode("latin-1").split("\r\n")
        length = next(
            int(line.split(":", 1)[1])
            for line in lines
            if line.lower().startswith("content-length:")
        )
        while len(rest) < length:
            chunk = sock.recv(65536)
            assert chunk, "Gym closed the connection inside its response body"
            rest += chunk
        assert json.loads(rest[:length])["choices"], rest
    return int(lines[0].split(" ")[1])


def dispatch(gym: LoopbackProcess, rollout_id: str) -> None:
    with ThreadPoolExecutor(CLIENTS) as pool:
        statuses = list(pool.map(lambda n: call_and_close(gym.port, rollout_id, n), range(CALLS)))
    assert statuses == [200] * CALLS


def gyms_files(capture_dir: Path, rollout_id: str) -> tuple[list[str], set[str]]:
    """What Gym wrote, read with Gym's own stores: the admitted calls (its token store's
    intents, in order) and the calls it captured (its CaptureStore's lines)."""
    from nemo_gym.base_responses_api_model import CaptureStore
    from nemo_gym.token_id_capture.store import TokenCaptureStore

    intents_path = TokenCaptureStore(capture_dir).intents_path_for(rollout_id)
    intents = [line for line in intents_path.read_text().splitlines() if line.strip()]
    store = CaptureStore(capture_dir)
    captured: set[str] = set()
    if store.path_for(rollout_id).exists():
        lines, invalid = store.read_available(rollout_id)
        assert invalid == 0
        captured = {exchange["model_call_id"] for _, exchange in lines}
    return intents, captured


async def lineage_rows(ledger: ServerProcess, rollout_id: str) -> set[str]:
    """The calls with a lineage row, as the trainer reads them: the manifest, by Gym's own
    RolloutControlClient (on the leg's one event loop: Gym's shared aiohttp client is bound to
    it)."""
    from nemo_gym.token_id_capture.control_routes import RolloutControlClient

    control = RolloutControlClient(
        ledger.base_url, auth_token=ledger.control_token, request_timeout_s=30
    )
    manifest = await control.manifest(rollout_id)
    return {record.model_call_id for record in manifest.records}


def settled_evidence(ledger: ServerProcess, rollout_id: str, captured: int) -> dict[str, Any]:
    """The rollout's call evidence once the follower has read every line Gym wrote and nothing
    is pending any more (the grace window has passed for every call)."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        reply = httpx.get(f"{ledger.base_url}/v1/rollouts/{rollout_id}/call-evidence", timeout=10)
        if reply.status_code == 200:
            document: dict[str, Any] = reply.json()
            coverage = document["coverage"]
            if coverage["captured"] == captured and coverage["pending"] == 0:
                return document
        assert time.monotonic() < deadline, reply.text
        time.sleep(0.2)  # poll


def ledger_check(ledger: ServerProcess, rollout_id: str) -> dict[str, Any]:
    """The ledger's own check in the rollout's health (beside Gym's)."""
    health = httpx.get(f"{ledger.base_url}/v1/rollouts/{rollout_id}/health", timeout=10)
    assert health.status_code == 200, health.text
    check: dict[str, Any] = health.json()["ledger_checks"]["model_call_evidence"]
    return check


async def test_the_ledger_names_exactly_the_lines_gym_lost(
    tmp_path: Path, database_url: str
) -> None:
    with run(tmp_path, database_url, observability=True) as evidence_run:
        # The loss is a race: a round (one rollout, its own Gym server) that loses no line is
        # followed by another, up to ROUNDS; each round is checked in full below.
        rounds: dict[str, tuple[list[str], set[str]]] = {}
        while len(rounds) < ROUNDS:
            rollout_id = f"7-{len(rounds)}"
            intents, captured = rounds[rollout_id] = dispatch_and_stop(evidence_run, rollout_id)
            if set(intents) - captured:
                break
        lost_in_all = {
            mid for intents, captured in rounds.values() for mid in intents if mid not in captured
        }
        assert lost_in_all, f"Gym 0.7.0 lost no capture line in {ROUNDS} rounds of {CALLS} calls"

        for rollout_id, (intents, captured) in rounds.items():
            assert len(intents) == len(set(intents)) == CALLS
            assert captured <= set(intents)
            lost = set(intents) - captured
            # Gym wrote no incomplete marker for them, and the trainer's manifest lists them.
            assert not (evidence_run.capture_dir / f"{rollout_id}.capture.incomplete").exists()
            assert await lineage_rows(evidence_run.ledger, rollout_id) == set(intents)

            document = settled_evidence(evidence_run.ledger, rollout_id, len(captured))
            calls = {call["model_call_id"]: call for call in document["calls"]}
            assert set(calls) == set(intents)
            assert all(
                c["row_seq"] is not None and c["intent_seq"] is not None for c in calls.values()
            )
            assert {mid for mid, c in calls.items() if c["capture_seq"] is not None} == captured
            # Named: every lost call missing, none misnamed; every other call captured, matched.
            assert {mid for mid, c in calls.items() if c["finding"] is not None} == lost
            if lost:
                assert document["findings"] == {"model_call_capture_missing": ANY}
                assert set(document["findings"]["model_call_capture_missing"]) == lost
            else:
                assert document["findings"] == {}
            assert document["coverage"] == {
                "rollouts": 1,
                "admitted": CALLS,
                "captured": CALLS - len(lost),
                "missing": len(lost),
                "pending": 0,
                "captures_without_row": 0,
            }
            check = ledger_check(evidence_run.ledger, rollout_id)
            assert check["findings"] == document["findings"]
            assert check["coverage"] == document["coverage"]


async def test_with_observability_off_every_admitted_call_has_its_row_and_intent(
    tmp_path: Path, database_url: str
) -> None:
    with run(tmp_path, database_url, observability=False) as evidence_run:
        intents, captured = dispatch_and_stop(evidence_run, "8-0")
        assert len(intents) == len(set(intents)) == CALLS
        assert captured == set()
        assert await lineage_rows(evidence_run.ledger, "8-0") == set(intents)

        document = settled_evidence(evidence_run.ledger, "8-0", 0)
        calls = {call["model_call_id"]: call for call in document["calls"]}
        assert set(calls) == set(intents)
        assert all(c["row_seq"] is not None and c["intent_seq"] is not None for c in calls.values())
        assert all(c["capture_seq"] is None for c in calls.values())
        # Nothing was to be captured: once the window has passed, every call is named missing
        # (docs/gym.md: expected with observability off, not a fault).
        assert document["coverage"]["admitted"] == CALLS
        assert document["coverage"]["captured"] == 0
        assert set(document["findings"]["model_call_capture_missing"]) == set(intents)
