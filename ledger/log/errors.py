"""The ledger's exception tree. Driver errors are translated at the store boundary.

Each class carries the HTTP status the API answers with, so handlers never guess.
"""

from __future__ import annotations


class LedgerError(Exception):
    status_code = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UnsafeConfiguration(LedgerError):
    status_code = 500


class InvalidRolloutId(LedgerError, ValueError):
    status_code = 400

    def __init__(self, rollout_id: object) -> None:
        super().__init__(f"Invalid rollout id: {rollout_id!r}")
        self.rollout_id = rollout_id


class BadRequest(LedgerError):
    status_code = 400


class Unauthorized(LedgerError):
    status_code = 401


class NotFound(LedgerError):
    status_code = 404


class Conflict(LedgerError):
    status_code = 409


class IdempotencyConflict(Conflict):
    """The idempotency key was used before with a different event."""


class Gone(LedgerError):
    status_code = 410


class RolloutRetiredError(Gone):
    def __init__(self, rollout_id: str) -> None:
        super().__init__(f"rollout {rollout_id} is retired")
        self.rollout_id = rollout_id


class UnsupportedMediaType(LedgerError):
    status_code = 415


class InvalidPayload(LedgerError):
    status_code = 422


class UnknownEventKind(InvalidPayload):
    pass


class StorageUnavailable(LedgerError):
    status_code = 503


class DatabaseNotAtHead(LedgerError):
    status_code = 503


class ProjectionsStale(DatabaseNotAtHead):
    """At head, but a projection's rows were not written by the running code's version of it
    (log/projection_versions.py): ``ledger db upgrade`` rebuilds it from the log."""


class InvalidRevision(BadRequest):
    """A migration target alembic cannot reach (an unknown id, the wrong direction)."""


class ReadOnlyViolation(LedgerError):
    status_code = 400


class QueryTimeout(LedgerError):
    """An ad-hoc query ran longer than its statement timeout and was cancelled."""

    status_code = 408


class WriterStopped(StorageUnavailable):
    pass


class ViewsBehind(StorageUnavailable):
    """The views have not reached what a read must reflect within the wait's bound
    (log/freshness.py): the read may be tried again after ``retry_after_s``."""

    retry_after_s = 1


class ViewsStopped(LedgerError):
    """A view cannot apply the next event of the log (log/view_failures.py): its follower
    retries, and the views stay at the event before it."""


class LogDamaged(LedgerError):
    """The log lacks what a check needs (an event a projection points at): ``verify`` and
    ``mirror verify`` report it as a FAIL line."""


class StorageDamaged(StorageUnavailable):
    """The database reported damage (SQLite's "database disk image is malformed"): appends stop
    until the store is restored (docs/operations.md, "A damaged store")."""


# SQLite's result codes for a damaged file (SQLITE_CORRUPT, SQLITE_NOTADB) and PostgreSQL's
# SQLSTATEs for corrupted data and indexes.
_SQLITE_DAMAGE_CODES = frozenset({11, 26})
_POSTGRES_DAMAGE_STATES = frozenset({"XX001", "XX002"})


def damage_of(exc: BaseException) -> str | None:
    """The database's own words when ``exc`` (a driver error, wrapped or not) reports a damaged
    store; None for any other error."""
    orig = getattr(exc, "orig", exc)
    code = getattr(orig, "sqlite_errorcode", None)
    state = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    if code in _SQLITE_DAMAGE_CODES or state in _POSTGRES_DAMAGE_STATES:
        return str(orig).splitlines()[0][:300] if str(orig) else type(orig).__name__
    return None
