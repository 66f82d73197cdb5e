"""``ledger compact``: payloads of deleted generations become NULL, hashes and the chain stay;
verify, the projections, the reads and the mirror are unchanged; a ``ledger.compacted`` event
records each page; ``--dry-run`` changes nothing and prints what would go."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
from click.testing import Result
from fastapi import FastAPI

from ledger.app.bootstrap import Ledger
from ledger.app.config import Settings
from tests.cli.support import invoke, query
from tests.conftest import CONTROL_HEADERS
from tests.lineage.rows import committed_row, failure_row
from tests.observations.support import EXAMPLE_OBSERVATIONS, EXAMPLE_RESULT, post_ok
from tests.support.exchanges import chat_exchange, failed_exchange
from tests.support.mirror import wait_for_mirror

CONTROL = "/training-token-capture/control"


async def _cli(settings: Settings, *args: str) -> Result:
    return await asyncio.to_thread(
        invoke,
        settings.resolved_database_url,
        "--data-dir",
        str(settings.data_dir),
        *args,
    )


async def _every_kind_of_event(client: httpx.AsyncClient, rollout_id: str) -> None:
    await post_ok(client, f"/v1/rollouts/{rollout_id}/model-calls", chat_exchange())
    await post_ok(client, f"/v1/rollouts/{rollout_id}/model-calls", failed_exchange())
    await post_ok(client, f"/v1/rollouts/{rollout_id}/model-calls/pending", {"model_call_id": "p"})
    await post_ok(client, f"/v1/rollouts/{rollout_id}/model-calls/incomplete", {})
    root = committed_row(rollout_id, "c1")
    await post_ok(client, f"/v1/rollouts/{rollout_id}/ledger/rows", root)
    await post_ok(
        client,
        f"/v1/rollouts/{rollout_id}/ledger/rows",
        committed_row(rollout_id, "c2", parent=root),
    )
    await post_ok(client, f"/v1/rollouts/{rollout_id}/ledger/rows", failure_row("c3"))
    await post_ok(client, f"/v1/rollouts/{rollout_id}/observations", EXAMPLE_OBSERVATIONS)
    await post_ok(client, f"/v1/rollouts/{rollout_id}/result", EXAMPLE_RESULT)


async def _reads(client: httpx.AsyncClient, rollout_id: str) -> list[Any]:
    paths = ["model-calls", "ledger/rows", "record", "trajectory", "ng_model_call_capture"]
    replies = [await client.get(f"/v1/rollouts/{rollout_id}/{path}") for path in paths]
    return [(reply.status_code, reply.text) for reply in replies]


async def test_compact_redacts_deleted_generations_and_changes_no_read(
    app: FastAPI, client: httpx.AsyncClient, settings: Settings
) -> None:
    url = settings.resolved_database_url
    for rollout_id in ("gone", "kept"):
        await _every_kind_of_event(client, rollout_id)
    deleted = await client.post(
        f"{CONTROL}/rollouts/delete", json={"rollout_ids": ["gone"]}, headers=CONTROL_HEADERS
    )
    assert deleted.status_code == 200, deleted.text
    # The id's next generation: live, never compacted.
    await post_ok(client, "/v1/rollouts/gone/model-calls", chat_exchange(model_call_id="new"))
    await post_ok(client, "/v1/rollouts/gone/ledger/rows", committed_row("gone", "n1"))
    ended = await asyncio.to_thread(
        query, url, "SELECT seq, payload FROM events WHERE rollout_id = 'gone' AND generation = 0"
    )
    ended_seqs = sorted(int(str(seq)) for seq, _ in ended)
    ended_bytes = sum(len(str(payload).encode()) for _, payload in ended)
    assert len(ended_seqs) >= 10
    before_reads = {r: await _reads(client, r) for r in ("gone", "kept")}
    before_chain = await asyncio.to_thread(
        query, url, "SELECT seq, hash, payload_sha256 FROM events ORDER BY seq"
    )

    dry = await _cli(settings, "compact", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert f"would redact {len(ended_seqs)} payloads" in dry.stdout
    assert f"{ended_bytes:,} bytes of payload" in dry.stdout
    assert "model_call.captured" in dry.stdout
    nulls = "SELECT count(*) FROM events WHERE payload IS NULL"
    assert await asyncio.to_thread(query, url, nulls) == [(0,)]

    done = await _cli(settings, "compact")
    assert done.exit_code == 0, done.output
    assert f"redacted {len(ended_seqs)} payloads" in done.stdout
    redacted = await asyncio.to_thread(
        query, url, "SELECT seq FROM events WHERE payload IS NULL ORDER BY seq"
    )
    assert [int(str(seq)) for (seq,) in redacted] == ended_seqs
    after_chain = await asyncio.to_thread(
        query, url, "SELECT seq, hash, payload_sha256 FROM events ORDER BY seq"
    )
    # Nothing but payloads changed; one event was appended to record the compaction.
    assert after_chain[: len(before_chain)] == before_chain
    recorded = await asyncio.to_thread(
        query, url, "SELECT payload, rollout_id FROM events WHERE kind = 'ledger.compacted'"
    )
    assert len(recorded) == 1 and recorded[0][1] is None
    assert json.loads(str(recorded[0][0])) == {
        "events": len(ended_seqs),
        "payload_bytes": ended_bytes,
        "first_seq": ended_seqs[0],
        "last_seq": ended_seqs[-1],
        "rollouts": 1,
    }
    assert {r: await _reads(client, r) for r in ("gone", "kept")} == before_reads

    verified = await _cli(settings, "verify")
    assert verified.exit_code == 0, verified.output
    assert "ok   projections" in verified.stdout
    ledger: Ledger = app.state.ledger
    await wait_for_mirror(ledger.store)
    mirror = await _cli(settings, "mirror", "verify")
    assert mirror.exit_code == 0, mirror.output

    again = await _cli(settings, "compact")
    assert "redacted 0 payloads" in again.stdout
    assert (
        len(
            await asyncio.to_thread(
                query, url, "SELECT seq FROM events WHERE kind = 'ledger.compacted'"
            )
        )
        == 1
    )
