"""Event types and the catalogue that validates new payloads and upcasts stored ones.

Stored events are never rewritten. When a payload format changes, the kind's version goes up
and an upcaster (version n -> n+1) is registered; reads apply the chain of upcasters.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from ledger.log.errors import InvalidPayload, UnknownEventKind

JsonObject = dict[str, Any]
Upcaster = Callable[[JsonObject], JsonObject]
# What an area derives from a payload for its projectors, needing no ledger state.
Derivation = Callable[[JsonObject], object]


@dataclass(frozen=True)
class EventType:
    """One kind of fact. ``version`` is the version new events are written with."""

    kind: str
    payload_model: type[BaseModel]
    version: int = 1
    # upcasters[n] turns a version-n payload into a version-(n+1) payload.
    upcasters: Mapping[int, Upcaster] = field(default_factory=dict)
    # What the kind's area derives from a (current-version) payload for its views, handed to
    # them as ``StoredEvent.derived``: a page of the log is decoded once (the projection
    # follower, a replay), so the views that share it (a capture's record, used by two areas)
    # get it from one computation.
    derive: Derivation | None = None

    def __post_init__(self) -> None:
        missing = [n for n in range(1, self.version) if n not in self.upcasters]
        if missing:
            raise ValueError(f"event kind {self.kind!r} lacks upcasters from versions {missing}")


class Catalogue:
    """The set of event kinds a ledger accepts."""

    def __init__(self, types: Iterable[EventType]) -> None:
        self._types: dict[str, EventType] = {}
        for event_type in types:
            if event_type.kind in self._types:
                raise ValueError(f"event kind {event_type.kind!r} registered twice")
            self._types[event_type.kind] = event_type

    def __contains__(self, kind: object) -> bool:
        return kind in self._types

    @property
    def kinds(self) -> list[str]:
        return sorted(self._types)

    def get(self, kind: str) -> EventType:
        try:
            return self._types[kind]
        except KeyError:
            raise UnknownEventKind(f"unknown event kind {kind!r}") from None

    def encode(self, kind: str, payload: BaseModel | Mapping[str, Any]) -> tuple[int, JsonObject]:
        """Validate a new payload; return (schema_version, JSON-ready dict)."""
        event_type = self.get(kind)
        if isinstance(payload, BaseModel):
            if not isinstance(payload, event_type.payload_model):
                raise InvalidPayload(
                    f"payload for {kind!r} must be {event_type.payload_model.__name__}, "
                    f"not {type(payload).__name__}"
                )
            model = payload
        else:
            try:
                model = event_type.payload_model.model_validate(dict(payload))
            except ValidationError as exc:
                raise InvalidPayload(f"invalid payload for {kind!r}: {exc}") from exc
        return event_type.version, model.model_dump(mode="json")

    def upcast(self, kind: str, schema_version: int, payload: JsonObject) -> JsonObject:
        """Bring a stored payload up to the kind's current version."""
        event_type = self.get(kind)
        if schema_version > event_type.version:
            raise InvalidPayload(
                f"stored {kind!r} event has schema_version {schema_version}, newer than "
                f"this ledger's {event_type.version}; upgrade the ledger"
            )
        for version in range(schema_version, event_type.version):
            payload = event_type.upcasters[version](payload)
        return payload

    def decode(self, kind: str, schema_version: int, payload: JsonObject) -> BaseModel:
        return self.get(kind).payload_model.model_validate(
            self.upcast(kind, schema_version, payload)
        )
