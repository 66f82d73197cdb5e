"""Event kinds of the observations area: agent observation bundles and collector results.

Both supersede: the latest event of a kind for a rollout generation is the one the views use;
earlier ones stay in the log.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from ledger.gym.observations import AgentObservationBundle
from ledger.gym.result import RolloutResult
from ledger.log.events import EventType

OBSERVATIONS_RECORDED = "observations.recorded"
RESULT_RECORDED = "rollout.result_recorded"


class ObservationsRecorded(BaseModel):
    """An agent's ``AgentObservationBundle`` for the rollout, as posted (before the join)."""

    model_config = ConfigDict(extra="forbid")

    bundle: AgentObservationBundle


EVENT_TYPES: list[EventType] = [
    EventType(OBSERVATIONS_RECORDED, ObservationsRecorded),
    # The payload is the collector's result itself (``_ng_*`` keys spelled as in Gym).
    EventType(RESULT_RECORDED, RolloutResult),
]
