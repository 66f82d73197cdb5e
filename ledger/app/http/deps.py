"""Dependencies shared by the route modules (Annotated aliases, FastAPI style)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Request

from ledger.app.bootstrap import Ledger
from ledger.gym.ids import ROLLOUT_ID_SCHEMA, validate_rollout_id


def get_ledger(request: Request) -> Ledger:
    ledger: Ledger = request.app.state.ledger
    return ledger


async def ledger_dependency(request: Request) -> Ledger:
    # async def: FastAPI would run a plain def dependency in a worker thread (see api/auth.py).
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
