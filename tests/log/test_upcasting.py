"""Stored events are never rewritten; a format change is upcast on read."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from ledger.app.areas import default_catalogue, write_side_projectors
from ledger.log.events import EventType
from ledger.log.records import NewEvent
from ledger.log.store import LedgerStore


class GreetingV1(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str


class GreetingV2(BaseModel):
    model_config = ConfigDict(extra="forbid")
    first_name: str
    polite: bool


def v1_to_v2(payload: dict[str, object]) -> dict[str, object]:
    return {"first_name": payload["name"], "polite": True}


async def test_v1_payload_is_read_back_as_v2(database_url: str) -> None:
    v1 = LedgerStore(
        database_url,
        default_catalogue([EventType("test.greeting", GreetingV1)]),
        write_side_projectors(),
    )
    await v1.open()
    try:
        stored = await v1.append(NewEvent("test.greeting", {"name": "Ada"}, "r1"))
        assert stored.event.schema_version == 1
    finally:
        await v1.close()

    v2 = LedgerStore(
        database_url,
        default_catalogue(
            [EventType("test.greeting", GreetingV2, version=2, upcasters={1: v1_to_v2})]
        ),
        write_side_projectors(),
    )
    await v2.open()
    try:
        (event,) = await v2.events()
        assert event.schema_version == 2
        assert event.payload == {"first_name": "Ada", "polite": True}
        assert v2.catalogue.decode("test.greeting", 1, {"name": "Bo"}) == GreetingV2(
            first_name="Bo", polite=True
        )
        new = await v2.append(NewEvent("test.greeting", {"first_name": "Cy", "polite": False}))
        assert new.event.schema_version == 2
    finally:
        await v2.close()
