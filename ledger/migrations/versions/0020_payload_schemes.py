"""Event payloads written by orjson from here on: ``log_identity`` records where the events whose
payload is ``orjson.dumps(value, option=OPT_SORT_KEYS)`` begin (log/canonical.py, scheme 2);
the events before keep the standard library's bytes (scheme 1), which their hashes cover.

The two spell some floats differently (``1e-05`` and ``0.00001``), so ``ledger verify`` needs to
know which wrote an event (log/payload_schemes.py). Nothing is rewritten. Upgrading opens a
range of scheme 2 at the head plus one; downgrading closes it at the head, since the code of
revision 0019 writes scheme 1 again (and never re-encodes a stored payload).

Revision ID: 0020_payload_schemes
Revises: 0019_view_status
Create Date: 2026-12-05
"""

from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision: str = "0020_payload_schemes"
down_revision: str | None = "0019_view_status"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Named here, not imported (ledger/log/payload_schemes.py reads them).
RANGE_PREFIX = "orjson_payloads_from:"
OPEN = "open"

log_identity = sa.table(
    "log_identity",
    sa.column("name", sa.String),
    sa.column("value", sa.String),
    sa.column("updated_at", sa.DateTime(timezone=True)),
)


def _head() -> int:
    return int(op.get_bind().execute(sa.text("SELECT COALESCE(MAX(seq), 0) FROM events")).scalar())


def upgrade() -> None:
    op.execute(
        log_identity.insert().values(
            name=f"{RANGE_PREFIX}{_head() + 1}", value=OPEN, updated_at=datetime.now(UTC)
        )
    )


def downgrade() -> None:
    opened = sa.and_(log_identity.c.name.startswith(RANGE_PREFIX), log_identity.c.value == OPEN)
    first = op.get_bind().execute(sa.select(log_identity.c.name).where(opened)).scalar()
    if first is None:
        return
    head = _head()
    if head < int(first.removeprefix(RANGE_PREFIX)):  # nothing was written by scheme 2
        op.execute(log_identity.delete().where(opened))
    else:
        op.execute(
            log_identity.update()
            .where(opened)
            .values(value=str(head), updated_at=datetime.now(UTC))
        )
