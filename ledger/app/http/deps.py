"""Dependencies shared by the route modules (Annotated aliases, FastAPI style)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Query, Request

from ledger.app.bootstrap import Ledger
from ledger.gym.ids import ROLLOUT_ID_SCHEMA, validate_rollout_id


def get_ledger(request: Request) -> Ledger:
    ledger: Ledger = request.app.state.ledger
    return ledger


async def ledger_dependency(request: Request) -> Ledger:
    # async def: FastAPI would run a plain def dependency in a worker thread (see auth.py).
    return get_ledger(request)


async def valid_rollout_id(
    rollout_id: Annotated[str, Path(json_schema_extra=ROLLOUT_ID_SCHEMA)],
) -> str:
    """400 ``Invalid rollout id: '<id>'`` for ids outside Gym's charset (they become file names)."""
    return validate_rollout_id(rollout_id)


# seq is a signed 64-bit integer on both backends; a larger cursor would overflow the driver.
MAX_SEQ = 2**63 - 1

LedgerDep = Annotated[Ledger, Depends(ledger_dependency)]
RolloutIdDep = Annotated[str, Depends(valid_rollout_id)]


async def fresh_rollout_id(ledger: LedgerDep, rollout_id: RolloutIdDep) -> str:
    """The rollout id of a read of its derived documents, once the views reflect every event
    of the rollout acknowledged before the read (503 with ``Retry-After`` past the wait's
    bound: log/freshness.py)."""
    await ledger.freshness.wait_for_rollout(rollout_id)
    return rollout_id


FreshRolloutIdDep = Annotated[str, Depends(fresh_rollout_id)]

# Where a run-level read leaves the seq the views had reached; projected_seq.py writes it into
# the answer's header.
PROJECTED_SEQ_STATE = "projected_seq"


async def projected_views(
    request: Request,
    ledger: LedgerDep,
    min_seq: Annotated[
        int | None,
        Query(
            ge=0,
            le=MAX_SEQ,
            description="wait until the views have reached this seq (e.g. an append's) first",
        ),
    ] = None,
) -> int:
    """A run-level read answers from what the views hold: the seq they reached goes into the
    ``Ledger-Projected-Seq`` header; with ``min_seq`` the read first waits for it."""
    freshness = ledger.freshness
    reached = await (freshness.projected() if min_seq is None else freshness.wait_for_seq(min_seq))
    setattr(request.state, PROJECTED_SEQ_STATE, reached)
    return reached


ProjectedViewsDep = Annotated[int, Depends(projected_views)]
