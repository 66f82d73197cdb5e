"""Is this store fit to serve? What ``ledger serve`` and ``ledger db check`` ask before they
start: SQLite's own page check, the head against the latest signed checkpoint, the chain's tail
after it, and the fences the events set. Each problem is one FAIL line; nothing raises."""

from __future__ import annotations

from collections.abc import Sequence

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from sqlalchemy import Connection
from sqlalchemy.exc import DBAPIError

from ledger.log.head_check import compare_with_checkpoints, fence_problems, verify_tail
from ledger.log.witness import WitnessedCheckpoint

# quick_check reports at most this many problems: enough to name the damage.
_QUICK_CHECK_ROWS = 5


def quick_check_problems(conn: Connection) -> list[str]:
    """SQLite's ``PRAGMA quick_check`` (every page and its structure; not index contents): the
    problems it reports, as FAIL lines."""
    try:
        rows = [
            str(row[0])
            for row in conn.exec_driver_sql(f"PRAGMA quick_check({_QUICK_CHECK_ROWS})").all()
        ]
    except DBAPIError as exc:  # pages too damaged for the check itself to walk
        rows = [str(exc.orig).splitlines()[0][:300]]
    if rows == ["ok"]:
        return []
    return [f"the database file is damaged (PRAGMA quick_check): {'; '.join(rows)}"]


def store_problems(
    conn: Connection,
    *,
    quick_check: bool,
    latest: Sequence[WitnessedCheckpoint],
    public_key: Ed25519PublicKey | None,
) -> list[str]:
    """The start-up check of one store. ``latest``: the newest checkpoint of each witness the
    server writes to (the full comparison with every checkpoint is ``ledger verify``'s)."""
    try:
        if quick_check and conn.dialect.name == "sqlite":
            damaged = quick_check_problems(conn)
            if damaged:
                return damaged  # what follows would read the damaged pages
        problems = []
        agreed = None
        if latest and public_key is not None:
            report = compare_with_checkpoints(conn, latest, public_key)
            problems.extend(report.problems)
            agreed = report.latest
        if agreed is not None:
            tail = verify_tail(conn, agreed)
            if tail is not None:
                problems.append(f"after the checkpoint at seq {agreed.seq}: {tail}")
        problems.extend(fence_problems(conn))
    except DBAPIError as exc:
        return [f"the database cannot be read: {str(exc.orig).splitlines()[0][:300]}"]
    return problems
