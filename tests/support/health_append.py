"""Appending a generated run through the store's own path (no HTTP), for benchmarks and
storage tests that need volume."""

from __future__ import annotations

import uuid

from ledger.areas.captures.events import MODEL_CALL_CAPTURED, ModelCallCaptured
from ledger.areas.observations.events import (
    OBSERVATIONS_RECORDED,
    RESULT_RECORDED,
    ObservationsRecorded,
)
from ledger.gym.capture_lines import CaptureExchange
from ledger.gym.observations import AgentObservationBundle
from ledger.gym.result import RolloutResult
from ledger.log.transaction import WriteTransaction
from tests.support.health_run import PlannedRollout


def append_posts(tx: WriteTransaction, planned: PlannedRollout) -> int:
    """Append the rollout's posts as events in one write transaction (the store's own path,
    no HTTP): what a bench or a storage test needs at volume."""
    for path, body in planned.posts:
        what = path.rsplit("/", 1)[1]
        if what == "model-calls":
            model = CaptureExchange.model_validate(body)
            exchange = {key: body.get(key) for key in model.to_line()}
            exchange["model_call_id"] = exchange.get("model_call_id") or uuid.uuid4().hex
            captured = ModelCallCaptured(model_call_id=exchange["model_call_id"], exchange=exchange)
            tx.append(MODEL_CALL_CAPTURED, captured, rollout_id=planned.rollout_id)
        elif what == "observations":
            bundle = AgentObservationBundle.model_validate(body)
            tx.append(
                OBSERVATIONS_RECORDED,
                ObservationsRecorded(bundle=bundle),
                rollout_id=planned.rollout_id,
            )
        else:
            tx.append(
                RESULT_RECORDED, RolloutResult.model_validate(body), rollout_id=planned.rollout_id
            )
    return len(planned.posts)
