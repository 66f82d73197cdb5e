"""The event catalogue: kinds, typed payloads, schema versions and upcasters."""

from ledger.events.base import Catalogue, EventType, Upcaster
from ledger.events.catalogue import default_catalogue

__all__ = ["Catalogue", "EventType", "Upcaster", "default_catalogue"]
