"""Gym's export view (§6.2, last bullet): what goes to experiment trackers.

No ``ng_trajectory``, and no payload keys in the captured calls. The stored record is unchanged:
this returns a new dict.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ledger.gym.capture_attachment import strip_payloads


def export_view(record: Mapping[str, Any]) -> dict[str, Any]:
    view = {key: value for key, value in record.items() if key != "ng_trajectory"}
    capture = view.get("ng_model_call_capture")
    if "ng_model_call_capture" in view and not isinstance(capture, Mapping):
        del view["ng_model_call_capture"]
    elif isinstance(capture, Mapping):
        exported = dict(capture)
        calls = exported.get("calls")
        if isinstance(calls, list):
            exported["calls"] = [
                strip_payloads(call) for call in calls if isinstance(call, Mapping)
            ]
        else:
            exported.pop("calls", None)
        view["ng_model_call_capture"] = exported
    return view
