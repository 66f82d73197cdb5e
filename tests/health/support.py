"""Writing generated runs into an in-process app, and what the pure rules say about them."""

from __future__ import annotations

import json

import httpx

from ledger.gym.health.run import HealthReport, check_records
from tests.support.health_run import PlannedRollout, interleaved_posts


async def write_run(client: httpx.AsyncClient, planned: list[PlannedRollout]) -> None:
    for path, body in interleaved_posts(planned, seed=3):
        answer = await client.post(path, json=body)
        assert answer.status_code in (200, 201), f"{path}: {answer.text}"


async def exported(client: httpx.AsyncClient) -> list[str]:
    answer = await client.get("/v1/export")
    assert answer.status_code == 200, answer.text
    return answer.text.splitlines()


def expected_report(lines: list[str], ignored: list[str] | None = None) -> HealthReport:
    """The pure rules over exported lines (what Gym reads), in export order."""
    return check_records([json.loads(line) for line in lines], ignored or [])
