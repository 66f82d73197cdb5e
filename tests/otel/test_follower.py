"""The continuous export on both backends, in its own process and in the server's, against a
collector on loopback: every rollout sent with the collector's headers from
LEDGER_OTLP_HEADERS, the checkpoint and /metrics; a collector that answers 503 holds the
export back without losing anything; a record still changing waits; a batch the collector
refuses is counted and not sent again; a follower started again resumes from the saved
checkpoint."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from ledger.app.bootstrap import Ledger
from ledger.app.config import Settings
from ledger.app.http.app import create_app
from ledger.areas.otel.export_process import OtlpExportProcess
from ledger.areas.otel.follower import OtlpFollower
from ledger.areas.otel.ids import span_id
from ledger.areas.otel.sender import OtlpSender
from ledger.areas.otel.source import read_export_lag, saved_checkpoint_seq
from tests.otel.collector import Collector, running_collector
from tests.support.exchanges import chat_exchange
from tests.support.views import views_caught_up


async def capture(client: httpx.AsyncClient, rollout_id: str, model_call_id: str) -> None:
    body = chat_exchange(model_call_id=model_call_id)
    answer = await client.post(f"/v1/rollouts/{rollout_id}/model-calls", json=body)
    assert answer.status_code in (200, 201), answer.text


async def until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    deadline = time.monotonic() + 60
    while not await check():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        await asyncio.sleep(0.05)  # poll


async def metric(client: httpx.AsyncClient, name: str) -> float:
    text = (await client.get("/metrics")).text
    for line in text.splitlines():
        if line.startswith((name + " ", name + "{")):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def root(rollout_id: str) -> bytes:
    return span_id(rollout_id, 0, "rollout", "")


@pytest.mark.slow
@pytest.mark.parametrize("in_process", [False, True], ids=["export-process", "in-process"])
async def test_serve_exports_every_rollout_and_waits_out_an_absent_collector(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, in_process: bool
) -> None:
    monkeypatch.setenv("LEDGER_OTLP_HEADERS", "authorization=Bearer%20s3cret, x-team=rl")
    with running_collector() as collector:
        settings = Settings(
            data_dir=tmp_path / "data",
            database_url=database_url,
            otlp_endpoint=collector.url,
            otlp_settle_s=0,
            otlp_process=not in_process,
        )
        app = create_app(settings)
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://localhost"
            ) as client,
        ):
            ledger: Ledger = app.state.ledger
            for n in range(3):
                await capture(client, f"r{n}", f"r{n}-c0")
                await capture(client, f"r{n}", f"r{n}-c1")

            # A rollout span and two call spans each.
            async def all_taken() -> bool:
                return len(collector.taken()) == 9

            await until(all_taken, "the three rollouts")
            assert {root(f"r{n}") for n in range(3)} <= collector.taken()
            assert collector.headers[0]["authorization"] == "Bearer s3cret"
            assert collector.headers[0]["x-team"] == "rl"
            assert collector.headers[0]["content-type"] == "application/x-protobuf"

            async def caught_up() -> bool:
                # The lag is read from the checkpoint, which is saved once the follower idles.
                return await metric(client, "ledger_otlp_lag_rollouts") == 0

            await until(caught_up, "the checkpoint")

            async def counted() -> bool:
                # The export process reports its tally to the server as it moves.
                return await metric(client, 'ledger_otlp_spans_total{outcome="sent"}') >= 9

            await until(counted, "the spans sent in /metrics")
            head = await ledger.store.read_sync(saved_checkpoint_seq)
            assert head is not None and head > 0

            # The collector goes away: the new rollout waits, counted in the lag.
            collector.answer = 503
            await capture(client, "r3", "r3-c0")

            async def failed() -> bool:
                return await metric(client, "ledger_otlp_requests_failed_total") > 0

            await until(failed, "a failed request")
            assert await metric(client, "ledger_otlp_lag_rollouts") == 1
            assert root("r3") not in collector.taken()
            assert await ledger.store.read_sync(saved_checkpoint_seq) == head

            collector.answer = 200

            async def back() -> bool:
                return root("r3") in collector.taken()

            await until(back, "r3 once the collector is back")
            await until(caught_up, "the checkpoint")
            assert len(collector.taken()) == 11
            assert collector.refused_requests > 0


async def test_a_changing_record_waits_and_a_refused_batch_is_not_sent_again(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    ledger: Ledger = app.state.ledger
    await capture(client, "w0", "w0-c0")
    await views_caught_up(app)  # the followers below read the views
    collector: Collector
    with running_collector() as collector:
        async with OtlpSender(collector.url) as sender:
            young = OtlpFollower(ledger.store, sender, settle_seconds=3600)
            assert await young.step() == 0
            assert collector.headers == []

            collector.answer = 400
            refusing = OtlpFollower(ledger.store, sender, settle_seconds=0)
            assert await refusing.catch_up() == 1
            assert (sender.tally.refused, sender.tally.sent) == (2, 0)
            assert collector.refused_requests == 1
            saved = await ledger.store.read_sync(saved_checkpoint_seq)
            assert saved is not None

            # Started again, it resumes from the checkpoint: nothing to send until a change.
            collector.answer = 200
            again = OtlpFollower(ledger.store, sender, settle_seconds=0)
            assert await again.catch_up() == 0
            await capture(client, "w0", "w0-c1")
            await views_caught_up(app)
            assert await again.catch_up() == 1
            assert collector.taken() == {
                root("w0"),
                span_id("w0", 0, "call", "0"),
                span_id("w0", 0, "call", "1"),
            }
            later = await ledger.store.read_sync(saved_checkpoint_seq)
            assert later is not None and later > saved


@pytest.mark.slow
async def test_a_killed_export_process_is_replaced_and_resumes(
    database_url: str, tmp_path: Path
) -> None:
    with running_collector() as collector:
        settings = Settings(
            data_dir=tmp_path / "data",
            database_url=database_url,
            otlp_endpoint=collector.url,
            otlp_settle_s=0,
        )
        app = create_app(settings)
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://localhost"
            ) as client,
        ):
            ledger: Ledger = app.state.ledger
            export = ledger.otlp
            assert isinstance(export, OtlpExportProcess)
            await capture(client, "k0", "k0-c0")

            async def first() -> bool:
                return root("k0") in collector.taken()

            await until(first, "the first rollout")
            assert export.pid is not None and export.starts == 1
            os.kill(export.pid, signal.SIGKILL)
            await capture(client, "k1", "k1-c0")

            async def second() -> bool:
                return root("k1") in collector.taken()

            await until(second, "the rollout written after the kill, by another process")
            assert export.starts == 2

            async def saved() -> bool:
                # The checkpoints the process sends are written by the server.
                lag = await ledger.store.read_sync(read_export_lag)
                return lag.rollouts == 0

            await until(saved, "the checkpoint past both rollouts")
