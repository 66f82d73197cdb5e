"""Why the views stopped: the event a view could not apply, and the error it raised.

A view that raises on an event (a damaged row, a bug of its code) cannot pass it: its follower
retries, and the view stays at the event before it while the log grows. Its follower writes the
event's seq and the error here, in a transaction of its own (the failed step's rolled back),
and the step that finally passes it deletes the row in the transaction that moves the view's
checkpoint. So a row here says, in the database, what every reader of the views needs to know:
``/readyz``, ``/metrics``, the 503 of a rollout read past the freshness bound and the
``projection_status`` SQL view (docs/operations.md, "A view that cannot apply an event").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import (
    BigInteger,
    BindParameter,
    Column,
    Connection,
    DateTime,
    Integer,
    String,
    Table,
    bindparam,
    delete,
    select,
    update,
)

from ledger.log.metadata import metadata

# What of an error is kept: enough for its type and message, bounded whatever it holds.
MAX_ERROR_CHARS = 500

view_failures = Table(
    "view_failures",
    metadata,
    Column("projection", String(100), primary_key=True),
    Column("seq", BigInteger, nullable=False),
    Column("error", String(MAX_ERROR_CHARS), nullable=False),
    Column("failures", Integer, nullable=False),
    Column("first_failed_at", DateTime(timezone=True), nullable=False),
    Column("failed_at", DateTime(timezone=True), nullable=False),
)

_NAMES: BindParameter[str] = bindparam("names", expanding=True)


@dataclass(frozen=True)
class ViewFailure:
    seq: int
    error: str
    failures: int
    first_failed_at: datetime

    def describe(self) -> str:
        return f"a view cannot apply the event at seq {self.seq} ({self.error})"


def describe_error(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 3] + "..."


def record_failure(conn: Connection, names: Sequence[str], seq: int, error: str) -> None:
    """The views of ``names`` could not apply the event at ``seq``: counted per view, the
    first time kept while the same event keeps failing."""
    now = datetime.now(UTC)
    for name in names:
        where = view_failures.c.projection == name
        known = conn.execute(select(view_failures.c.seq).where(where)).scalar()
        if known is None:
            conn.execute(
                view_failures.insert().values(
                    projection=name,
                    seq=seq,
                    error=error,
                    failures=1,
                    first_failed_at=now,
                    failed_at=now,
                )
            )
            continue
        values: dict[str, object] = {"error": error, "failed_at": now}
        if known == seq:
            values["failures"] = view_failures.c.failures + 1
        else:
            values.update(seq=seq, failures=1, first_failed_at=now)
        conn.execute(update(view_failures).where(where).values(**values))


def clear_failures(conn: Connection, names: Sequence[str]) -> None:
    """The views of ``names`` have moved: whatever stopped them is behind them."""
    conn.execute(
        delete(view_failures).where(view_failures.c.projection.in_(_NAMES)), {"names": list(names)}
    )


def read_failure(conn: Connection, names: Sequence[str]) -> ViewFailure | None:
    """The earliest event one of the views of ``names`` cannot apply, if any."""
    row = conn.execute(
        select(
            view_failures.c.seq,
            view_failures.c.error,
            view_failures.c.failures,
            view_failures.c.first_failed_at,
        )
        .where(view_failures.c.projection.in_(_NAMES))
        .order_by(view_failures.c.seq)
        .limit(1),
        {"names": list(names)},
    ).first()
    if row is None:
        return None
    return ViewFailure(int(row.seq), row.error, int(row.failures), row.first_failed_at)
