"""Verdicts on the pages are the health rules' (``ledger/gym/health``) over the record a reader
gets. Runs once the health rules are in the tree (they come from the health branch)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import httpx
import pytest

from ledger.log import migrate
from tests.support import viewer_data as data
from tests.support.databases import sqlite_url
from tests.support.server import ServerProcess

evaluate = pytest.importorskip("ledger.gym.health.evaluate", reason="the health rules").evaluate
record_facts = pytest.importorskip(
    "ledger.gym.health.facts", reason="the health rules"
).record_facts

pytestmark = pytest.mark.slow


def _rows(text: str) -> dict[str, str]:
    return dict(
        re.findall(
            r'<tr data-rollout="([^"]+)">.*?<td class="verdict" data-col="verdict">'
            r'<span class="[^"]*" data-verdict="([^"]+)">',
            text,
        )
    )


def test_verdicts_shown_filtered_and_explained_are_the_rules(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    asyncio.run(migrate.upgrade(url))
    (tmp_path / "data").mkdir()
    server = ServerProcess(data_dir=tmp_path / "data", database_url=url)
    with server, httpx.Client(base_url=server.base_url) as http:
        data.write_rich(http, data.RichRollout())
        for i in range(12):
            data.write_small(http, f"small-{i:02d}", i % 3 + 1)
        http.post(
            "/v1/rollouts/small-03/result", json={"task_id": "t", "resolved": False}
        ).raise_for_status()
        expected = {}
        for rollout_id in ["rich-0", *(f"small-{i:02d}" for i in range(12))]:
            record = http.get(f"/v1/rollouts/{rollout_id}/record").json()
            expected[rollout_id] = evaluate(record_facts(record, 0)).verdict
        shown = _rows(http.get("/ui/?limit=50").text)
        assert shown == expected
        for verdict in set(expected.values()):
            # Pages of 25 through the verdict filter: exactly the rollouts with it.
            got = _rows(http.get(f"/ui/?verdict={verdict}&limit=25").text)
            assert sorted(got) == sorted(k for k, v in expected.items() if v == verdict)
        page = http.get("/ui/rollouts/rich-0").text
        assert f'id="verdict" data-verdict="{expected["rich-0"]}">' in page
        assert http.get("/ui/?verdict=bogus").status_code == 400
        assert len(set(expected.values())) >= 2, expected
