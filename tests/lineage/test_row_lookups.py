"""The lookups on every record and resolve: by the index of the column looked up, answered in
seq order.

A record looks up its model_call_id (idempotency), a resolve its fingerprint, once per model
call. With ``ORDER BY seq`` SQLite walked the rollout's primary key instead of the index and
read every row of the generation, so each call of a long rollout cost more than the one before.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import Select
from sqlalchemy.dialects import sqlite as sqlite_dialect

from ledger.areas.lineage import queries
from tests.lineage.rows import committed_row


def query_plan(database: Path, statement: Select[Any]) -> str:
    sql = str(
        statement.compile(dialect=sqlite_dialect.dialect(), compile_kwargs={"literal_binds": True})
    )
    with sqlite3.connect(database) as conn:
        return " ".join(str(row[-1]) for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}"))


def test_each_lookup_searches_the_index_of_its_column(sqlite_template: Path) -> None:
    bound = {"rid": "r1", "gen": 0, "mcid": "c1", "fp": "f"}
    by_model_call = queries._SAME_CALL.params(bound)
    assert "ix_lineage_rows_model_call" in query_plan(sqlite_template, by_model_call)
    for (by_fingerprint, by_id), statement in queries._FIND_ROWS.items():
        plan = query_plan(sqlite_template, statement.params(bound))
        if by_id:
            expected = "ix_lineage_rows_model_call"
        elif by_fingerprint:
            expected = "ix_lineage_rows_fingerprint"
        else:  # every committed row of the generation, by either index
            expected = "(rollout_id=? AND generation=?)"
        assert plan.startswith("SEARCH") and expected in plan, (by_fingerprint, by_id, plan)


async def test_rows_sharing_a_fingerprint_come_in_seq_order(client: httpx.AsyncClient) -> None:
    """Gym's matcher sees candidates in ledger order; the order is Python's sort now."""
    shared = "f" * 64
    seqs = []
    # Recorded out of model_call_id order, so neither the id nor insertion by id gives seq order.
    for model_call_id in ("c3", "c1", "c2"):
        row = committed_row("r1", model_call_id, fingerprint=shared)
        reply = await client.post("/v1/rollouts/r1/ledger/rows", json=row)
        assert reply.status_code == 200, reply.text
        seqs.append(reply.json()["seq"])
    found = await client.get("/v1/rollouts/r1/ledger/rows", params={"fingerprint": shared})
    assert found.status_code == 200, found.text
    rows = found.json()["rows"]
    assert [r["seq"] for r in rows] == sorted(seqs)
    assert [r["row"]["model_call_id"] for r in rows] == ["c3", "c1", "c2"]
    # A repeat of the first call is still a duplicate of its own row.
    again = await client.post(
        "/v1/rollouts/r1/ledger/rows", json=committed_row("r1", "c3", fingerprint=shared)
    )
    assert again.json() == {"outcome": "duplicate", "seq": seqs[0]}
