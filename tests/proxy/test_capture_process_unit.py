"""``CaptureProcess`` driven directly: a real capture process on a real SQLite file appends a
batch and answers its outcomes (an idempotent repeat is a 200); a process that cannot start is
tried again, then the batch goes to the fallback; a failed append comes back as AppendFailed.
And the frames between the two."""

from __future__ import annotations

import io
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import cast

import pytest
from prometheus_client import CollectorRegistry

import ledger.areas.proxy.recorder as recorder_module
from ledger.areas.captures.service import CaptureService
from ledger.areas.proxy.capture_process import CaptureProcess
from ledger.areas.proxy.capture_sink import AppendFailed, Observed, Outcome
from ledger.areas.proxy.capture_worker import WorkerOptions
from ledger.areas.proxy.frames import encode_frame, read_frame
from ledger.areas.proxy.metrics import ProxyMetrics
from ledger.areas.proxy.recorder import CaptureRecorder
from ledger.gym.observed_calls import ObservedCall
from ledger.log import migrate
from tests.support.databases import sqlite_url


def _options(url: str) -> WorkerOptions:
    return WorkerOptions(
        url=url,
        synchronous="FULL",
        busy_timeout_ms=30_000,
        max_batch=512,
        max_batch_bytes=8 * 1024 * 1024,
        nice=10,
        health_follower=False,
    )


def _call(model_call_id: str, body: bytes = b'{"model": "m", "messages": []}') -> ObservedCall:
    now = time.time()
    return ObservedCall(
        model_call_id=model_call_id,
        dialect="chat",
        model_server="fake",
        started_at=now,
        completed_at=now + 0.1,
        latency_ms=100.0,
        latency_ttft_ms=None,
        status_code=200,
        request_body=body,
        response_body=b'{"id": "r", "object": "chat.completion", "choices": []}',
        streaming=False,
    )


class RecordingSink:
    """The fallback: records what reached it and answers 201 for each call."""

    def __init__(self) -> None:
        self.batches: list[list[Observed]] = []

    async def append(self, calls: Sequence[Observed]) -> list[Outcome]:
        self.batches.append(list(calls))
        return [Outcome(201) for _ in calls]

    async def close(self, wait_s: float) -> None:
        return None


def _metrics() -> ProxyMetrics:
    return ProxyMetrics(CollectorRegistry())


async def test_a_capture_process_appends_a_batch_and_answers_each_outcome(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    await migrate.upgrade(url)
    fallback = RecordingSink()
    metrics = _metrics()
    process = CaptureProcess(_options(url), fallback, metrics)
    process.start()
    try:
        batch = [("r-1", _call("mc-a")), ("r-1", _call("mc-b")), ("r-2", _call("mc-c"))]
        assert await process.append(batch) == [Outcome(201), Outcome(201), Outcome(201)]
        # Resent (what happens after a process died before answering): stored once.
        again = await process.append(batch[:1])
        assert [outcome.status for outcome in again] == [200]
        # A call captured with a different exchange under the same id: refused, not stored.
        (conflict,) = await process.append([("r-1", _call("mc-a", b'{"model": "other"}'))])
        assert conflict.status == 409 and "different exchange" in conflict.detail
    finally:
        await process.close(30)
    assert fallback.batches == []
    assert metrics.capture_process_starts._value.get() == 1


async def test_a_capture_process_that_cannot_start_is_tried_again_then_the_fallback_appends(
    tmp_path: Path,
) -> None:
    fallback = RecordingSink()
    metrics = _metrics()
    dead = (sys.executable, "-c", "import sys; sys.exit(3)")
    # No background restart within the test: the count below is the start's and the batch's.
    process = CaptureProcess(
        _options(sqlite_url(tmp_path)), fallback, metrics, command=dead, restart_delay_s=600
    )
    process.start()
    batch = [("r-1", _call("mc-a"))]
    try:
        assert await process.append(batch) == [Outcome(201)]
    finally:
        await process.close(5)
    assert fallback.batches == [batch]
    # The one started in the background, then the two tries of the batch.
    assert metrics.capture_process_starts._value.get() == 3


async def test_a_failed_append_comes_back_as_append_failed(tmp_path: Path) -> None:
    # No tables: the process starts (its store opens lazily) and the append raises in it.
    url = sqlite_url(tmp_path)
    process = CaptureProcess(_options(url), RecordingSink(), _metrics())
    try:
        with pytest.raises(AppendFailed) as failed:
            await process.append([("r-1", _call("mc-a"))])
    finally:
        await process.close(30)
    assert failed.value.reason == "StorageUnavailable"
    assert "no such table" in failed.value.detail


def test_frames_round_trip_and_a_cut_stream_is_an_error() -> None:
    value = [("r-1", _call("mc-a"))]
    stream = io.BytesIO(encode_frame(value) + encode_frame(("ready",)))
    assert read_frame(stream) == value
    assert read_frame(stream) == ("ready",)
    assert read_frame(stream) is None  # a clean end
    cut = encode_frame(value)
    with pytest.raises(EOFError):
        read_frame(io.BytesIO(cut[:-1]))
    with pytest.raises(EOFError):
        read_frame(io.BytesIO(cut[:2]))
    with pytest.raises(ValueError, match="over"):
        read_frame(io.BytesIO(b"\xff\xff\xff\xff"))


async def test_the_recorder_bounds_a_batch_by_its_bodies(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recorder_module, "MAX_BATCH_BYTES", 1000)
    sink = RecordingSink()
    # No call fails here, so no rollout is marked and the captures service is never used.
    recorder = CaptureRecorder(cast(CaptureService, None), _metrics(), sink)
    sizes = [400, 400, 400, 400, 2000, 400]  # request bodies; each answer adds 55 bytes
    for n, size in enumerate(sizes):
        recorder.submit("r-1", _call(f"mc-{n}", b"x" * size))
    recorder.start()  # after the submits: the first batch finds all of them queued
    await recorder.drain(5)
    assert [[call.model_call_id for _, call in batch] for batch in sink.batches] == [
        ["mc-0", "mc-1"],
        ["mc-2", "mc-3"],
        ["mc-4"],  # over the bound alone: a batch of its own
        ["mc-5"],
    ]
