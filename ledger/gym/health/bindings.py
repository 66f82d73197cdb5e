"""Which captured calls the agent's turns (and invocations) own.

A reference names a call by ``model_call_id`` (checked against its model_ref and response_id
when given) or by ``(model_ref, response_id)``. Each reference resolves to its candidate calls:
none (missing), several (duplicated) or exactly one (matched).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ledger.gym.health.facts import Call

Signature = tuple[str, str, str, str]


def reference_key(ref: object) -> str | None:
    if not isinstance(ref, dict):
        return None
    if ref.get("model_call_id"):
        return f"call:{ref['model_call_id']}"
    model_ref = ref.get("model_ref")
    response_id = ref.get("response_id")
    if isinstance(model_ref, dict) and response_id:
        return f"response:{model_ref.get('type')}:{model_ref.get('name')}:{response_id}"
    return None


def key_locator(key: str) -> dict[str, Any]:
    return {"call_id": key.split(":")[-1]}


def _signature(ref: Mapping[str, Any]) -> Signature:
    model_ref = ref.get("model_ref")
    parts = model_ref if isinstance(model_ref, dict) else {}
    return (
        str(ref.get("model_call_id") or ""),
        str(parts.get("type") or ""),
        str(parts.get("name") or ""),
        str(ref.get("response_id") or ""),
    )


def _refs_of(items: object) -> list[tuple[str, dict[str, Any]]]:
    found: list[tuple[str, dict[str, Any]]] = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        for ref in item.get("model_calls") or []:
            key = reference_key(ref)
            if key is not None:
                found.append((key, ref))
    return found


def _unique(refs: Iterable[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    seen: set[Signature] = set()
    kept = []
    for key, ref in refs:
        signature = _signature(ref)
        if signature not in seen:
            seen.add(signature)
            kept.append((key, ref))
    return kept


@dataclass(frozen=True)
class Binding:
    references: tuple[str, ...]
    matched: tuple[Call, ...]
    missing: tuple[str, ...]
    duplicated: tuple[tuple[str, int], ...]

    @property
    def observed(self) -> bool:
        return bool(self.references)

    @property
    def complete(self) -> bool:
        return self.observed and not self.missing and not self.duplicated


def _candidates(ref: Mapping[str, Any], calls: list[Call]) -> list[Call]:
    call_id = ref.get("model_call_id")
    model_ref = ref.get("model_ref")
    response_id = ref.get("response_id")
    if call_id:
        return [
            call
            for call in calls
            if call.model_call_id
            and str(call.model_call_id) == str(call_id)
            and (model_ref is None or model_ref == call.model_ref)
            and (response_id is None or response_id == call.response_id)
        ]
    assert isinstance(model_ref, dict) and response_id  # reference_key admitted it
    wanted = (str(model_ref.get("type")), str(model_ref.get("name")), str(response_id))
    return [
        call
        for call in calls
        if isinstance(call.model_ref, dict)
        and call.response_id
        and (
            str(call.model_ref.get("type")),
            str(call.model_ref.get("name")),
            str(call.response_id),
        )
        == wanted
    ]


def _bind(refs: list[tuple[str, dict[str, Any]]], calls: list[Call]) -> Binding:
    matched: dict[int, Call] = {}
    missing: list[str] = []
    duplicated: list[tuple[str, int]] = []
    for key, ref in refs:
        candidates = _candidates(ref, calls)
        if not candidates:
            missing.append(key)
        elif len(candidates) > 1:
            duplicated.append((key, len(candidates)))
        else:
            matched.setdefault(candidates[0].call_index, candidates[0])
    return Binding(
        references=tuple(key for key, _ in refs),
        matched=tuple(matched[index] for index in sorted(matched)),
        missing=tuple(missing),
        duplicated=tuple(duplicated),
    )


def bind(trajectory: Mapping[str, Any] | None, calls: list[Call]) -> tuple[Binding, Binding]:
    """(turn bindings, owned bindings): turns' references alone, then turns' and invocations'."""
    source = trajectory or {}
    turn_refs = _unique(_refs_of(source.get("turns")))
    owned_refs = _unique([*turn_refs, *_refs_of(source.get("invocations"))])
    return _bind(turn_refs, calls), _bind(owned_refs, calls)
