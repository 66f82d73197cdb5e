"""``ledger_mirror_lag_events`` tells the truth while the follower recovers (issue 31, defect 2).

The follower is held back deterministically: its mirror directory lies under a regular file, so
every recovery fails until the test turns that file into a directory. Before, the gauge was set
only by the follower once it tailed, and read 0 all the while."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

import httpx

from ledger.app.areas import default_catalogue, write_side_projectors
from ledger.app.config import Settings
from ledger.app.http.app import create_app
from ledger.areas.captures.service import CaptureService
from ledger.log.store import LedgerStore
from tests.support.exchanges import chat_exchange

UNMIRRORED_CAPTURES = 200


def gauge(metrics_text: str, name: str) -> float:
    found = re.search(rf"^{name} (\S+)$", metrics_text, re.MULTILINE)
    assert found is not None, name
    return float(found.group(1))


async def test_the_lag_is_reported_before_the_follower_catches_up(
    database_url: str, tmp_path: Path
) -> None:
    store = LedgerStore(database_url, default_catalogue(), write_side_projectors())
    await store.open()
    try:
        captures = CaptureService(store)
        for n in range(UNMIRRORED_CAPTURES):
            await captures.append(f"r{n % 7}", chat_exchange(model_call_id=f"c{n}"))
        head = await store.head_seq()
    finally:
        await store.close()

    blocker = tmp_path / "blocked"
    blocker.write_text("a file where the mirror's parent directory should be")
    settings = Settings(
        data_dir=tmp_path / "data",
        database_url=database_url,
        mirror_dir=blocker / "mirror",
        control_token="control-secret",
    )
    app = create_app(settings)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://localhost"
        ) as http,
    ):
        text = (await http.get("/metrics")).text
        assert gauge(text, "ledger_mirror_lag_events") == head
        assert gauge(text, "ledger_mirror_lag_seconds") > 0

        # Let the follower through: the lag falls to 0 as soon as it has caught up.
        blocker.unlink()
        blocker.mkdir()
        deadline = time.monotonic() + 120
        while gauge((await http.get("/metrics")).text, "ledger_mirror_lag_events") != 0:
            assert time.monotonic() < deadline, "the mirror never caught up"
            await asyncio.sleep(0.05)  # poll
        assert gauge((await http.get("/metrics")).text, "ledger_mirror_lag_seconds") == 0
        assert len(list((blocker / "mirror" / "model-calls").glob("*.capture.jsonl"))) == 7
