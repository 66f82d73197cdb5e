"""Table definitions. ``events`` holds every fact; every other table is a projection of it.

Each area keeps its tables in its own module; importing this package registers all of them on
``metadata`` (which alembic compares against the migrated schema).
"""

from ledger.store.schema import captures, lineage, mirror, observations
from ledger.store.schema.base import NAMING_CONVENTION, metadata
from ledger.store.schema.core import events, rollouts

__all__ = [
    "NAMING_CONVENTION",
    "captures",
    "events",
    "lineage",
    "metadata",
    "mirror",
    "observations",
    "rollouts",
]
