"""The capture process (ledger/areas/proxy/capture_process.py): by default the proxy's
captures are appended, and the health follower runs, in a niced process beside ``ledger
serve``. Killed mid-run it is started again and no capture is lost or stored twice; it ends
with the server; switched off, the server appends them itself."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from ledger.gym.dialects import MODEL_CALL_ID_HEADER
from tests.proxy.support import Proxy, captured_ids, metric, sqlite_proxy_server, wait_for_calls
from tests.support.fake_upstream import FakeUpstreamProcess
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow  # every test here starts ledger serve

WORKER = "ledger.areas.proxy.capture_worker"


def capture_processes(pid: int) -> list[int]:
    """The capture processes among ``pid``'s children."""
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        for child in (task / "children").read_text().split():
            try:
                command = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
            except FileNotFoundError:
                continue  # ended meanwhile
            if WORKER.encode() in command:
                found.append(int(child))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def _wait_until(predicate: object, what: str, timeout: float = 30.0) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)  # poll


def _as_proxy(server: ServerProcess, upstream: FakeUpstreamProcess, directory: Path) -> Proxy:
    return Proxy(server=server, upstream=upstream, mirror_dir=directory / "data" / "mirror")


@contextmanager
def _served(directory: Path, upstream: FakeUpstreamProcess) -> Iterator[tuple[Proxy, int]]:
    """A server of its own, once its capture process runs: the proxy and the server's pid."""
    with sqlite_proxy_server(directory, upstream) as server:
        assert server.process is not None
        pid = server.process.pid
        _wait_until(lambda: capture_processes(pid), "the capture process")
        yield _as_proxy(server, upstream, directory), pid


def _captured(proxy: Proxy, answered: list[str]) -> Counter[str]:
    """How many capture events each answered call has."""
    wanted = set(answered)
    return Counter(i for i in captured_ids(proxy) if i in wanted)


async def _calls(
    base_url: str, rollouts: list[str], per_rollout: int, until: threading.Event | None = None
) -> list[str]:
    """At least ``per_rollout`` calls into each rollout (and on until ``until`` is set), the
    rollouts' calls concurrent, each taking about 20 ms upstream; every answer's model_call_id."""

    async def rollout(client: httpx.AsyncClient, rollout_id: str) -> list[str]:
        ids: list[str] = []
        while len(ids) < per_rollout or (until is not None and not until.is_set()):
            response = await client.post(
                f"/ng-rollout/{rollout_id}/v1/chat/completions",
                json={"model": "plain", "messages": [{"role": "user", "content": str(len(ids))}]},
                headers={"x-fake-delay-ms": "20"},
            )
            assert response.status_code == 200
            ids.append(response.headers[MODEL_CALL_ID_HEADER])
        return ids

    async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:
        answered = await asyncio.gather(*(rollout(client, r) for r in rollouts))
    return [model_call_id for ids in answered for model_call_id in ids]


def _pending_is_zero(proxy: Proxy) -> bool:
    return metric(proxy, "ledger_proxy_captures_pending") == 0


def test_the_server_appends_its_captures_through_one_capture_process(proxy: Proxy) -> None:
    assert proxy.server.process is not None
    children = capture_processes(proxy.server.process.pid)
    assert len(children) == 1
    rollout_id = f"child-{uuid.uuid4().hex[:8]}"
    answered = asyncio.run(_calls(proxy.url, [rollout_id], 3))
    wait_for_calls(proxy, rollout_id, 3)
    assert _captured(proxy, answered) == Counter(answered)
    assert capture_processes(proxy.server.process.pid) == children  # the same one throughout
    assert metric(proxy, "ledger_proxy_capture_process_starts_total") == 1
    # The health follower runs in the capture process: the server only reads the gauges.
    # Findings rows current with every record are its work alone.
    _wait_until(
        lambda: (
            metric(proxy, "ledger_health_findings_behind_rollouts") == 0
            and metric(proxy, "ledger_rollouts_by_verdict") > 0
        ),
        "the health follower's rows in the verdict gauges",
    )


def test_a_capture_process_killed_mid_run_is_replaced_and_loses_no_capture(
    tmp_path: Path, upstream: FakeUpstreamProcess
) -> None:
    with _served(tmp_path, upstream) as (proxy, pid):
        killed: list[int] = []
        done = threading.Event()

        def killer() -> None:
            # Three kills while the calls run, each of a process that has taken batches.
            try:
                while len(killed) < 3:
                    _wait_until(
                        lambda: [p for p in capture_processes(pid) if p not in killed],
                        "a new capture process",
                    )
                    time.sleep(0.3)  # poll: a deliberate pause, its batches meanwhile
                    (current,) = capture_processes(pid)
                    os.kill(current, signal.SIGKILL)
                    killed.append(current)
                time.sleep(0.3)  # poll: a deliberate pause, calls after the last kill too
            finally:
                done.set()

        thread = threading.Thread(target=killer)
        thread.start()
        rollouts = [f"kill-{uuid.uuid4().hex[:6]}-{n}" for n in range(16)]
        try:
            answered = asyncio.run(_calls(proxy.url, rollouts, 10, until=done))
        finally:
            done.set()
            thread.join()
        _wait_until(lambda: _pending_is_zero(proxy), "the queued captures")
        stored = _captured(proxy, answered)
        assert len(killed) == 3
        assert sorted(stored) == sorted(answered)
        assert set(stored.values()) == {1}  # none stored twice, although batches were resent
        assert metric(proxy, "ledger_proxy_capture_failures_total") == 0
        assert metric(proxy, "ledger_proxy_capture_process_starts_total") == len(killed) + 1


def test_a_capture_process_that_dies_between_calls_is_replaced(
    tmp_path: Path, upstream: FakeUpstreamProcess
) -> None:
    # No call comes to notice it: the server starts another itself (the health follower runs
    # there, and must run on between calls).
    with _served(tmp_path, upstream) as (proxy, pid):
        (first,) = capture_processes(pid)
        os.kill(first, signal.SIGKILL)
        _wait_until(lambda: [p for p in capture_processes(pid) if p != first], "another")
        assert metric(proxy, "ledger_proxy_capture_process_starts_total") == 2
        rollout_id = f"after-{uuid.uuid4().hex[:8]}"
        answered = asyncio.run(_calls(proxy.url, [rollout_id], 2))
        wait_for_calls(proxy, rollout_id, 2)
        assert _captured(proxy, answered) == Counter(answered)


def test_the_capture_process_ends_with_the_server(
    tmp_path: Path, upstream: FakeUpstreamProcess
) -> None:
    with _served(tmp_path, upstream) as (proxy, pid):
        (child,) = capture_processes(pid)
        proxy.server.kill()  # SIGKILL: no shutdown handler closes its pipe; the kernel does
        _wait_until(lambda: not _alive(child), "the capture process to end", timeout=30)


def test_switched_off_the_server_appends_the_captures_itself(
    tmp_path: Path, upstream: FakeUpstreamProcess
) -> None:
    with sqlite_proxy_server(tmp_path, upstream, LEDGER_PROXY_CAPTURE_PROCESS="false") as server:
        assert server.process is not None
        proxy = _as_proxy(server, upstream, tmp_path)
        rollout_id = f"inproc-{uuid.uuid4().hex[:8]}"
        answered = asyncio.run(_calls(server.base_url, [rollout_id], 3))
        wait_for_calls(proxy, rollout_id, 3)
        assert sorted(answered) == sorted(captured_ids(proxy))
        assert capture_processes(server.process.pid) == []
        assert metric(proxy, "ledger_proxy_capture_process_starts_total") == 0
