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


class PayloadTooLarge(LedgerError):
    status_code = 413


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
