"""Reading the identity of captured calls from ``ng_model_call_capture.calls`` dicts.

Calls arrive as plain mappings in Gym's ``ModelCallRecord`` dump shape, so this module does not
depend on the capture models; it reads only the identifiers the join and projection need and
treats anything of the wrong type as absent (a capture row is evidence, not a contract input).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ledger.gym.observations import ModelCallRef, ModelServerRef

MODEL_SERVER_TYPE = "responses_api_models"


def _string(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def model_ref_key(value: object) -> tuple[str, str] | None:
    """``{"type": "responses_api_models", "name": n}`` → ``(type, name)``; anything else → None."""
    if not isinstance(value, Mapping):
        return None
    ref_type, name = value.get("type"), value.get("name")
    if ref_type != MODEL_SERVER_TYPE or not isinstance(name, str):
        return None
    return (ref_type, name)


@dataclass(frozen=True)
class CapturedCall:
    """The identifiers of one captured call; ``position`` is its place in the calls list."""

    position: int
    model_call_id: str | None
    response_id: str | None
    client_session_id: str | None
    model_ref: tuple[str, str] | None
    call_index: int

    @classmethod
    def from_mapping(cls, position: int, call: Mapping[str, Any]) -> CapturedCall:
        call_index = call.get("call_index")
        return cls(
            position=position,
            model_call_id=_string(call.get("model_call_id")),
            response_id=_string(call.get("response_id")),
            client_session_id=_string(call.get("client_session_id")),
            model_ref=model_ref_key(call.get("model_ref")),
            call_index=(
                call_index
                if isinstance(call_index, int) and not isinstance(call_index, bool)
                else position
            ),
        )

    @property
    def label(self) -> str:
        """How gaps name the call: its id, else its response id."""
        return self.model_call_id or self.response_id or "unknown"

    def canonical_ref(self) -> ModelCallRef:
        model_ref = (
            None
            if self.model_ref is None
            else ModelServerRef(type="responses_api_models", name=self.model_ref[1])
        )
        return ModelCallRef(
            model_call_id=self.model_call_id, model_ref=model_ref, response_id=self.response_id
        )


def captured_calls(calls: Iterable[Mapping[str, Any]]) -> list[CapturedCall]:
    return [CapturedCall.from_mapping(position, call) for position, call in enumerate(calls)]
