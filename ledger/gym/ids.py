"""Gym's rollout-id rules (contract §4): the charset, and the ``-a<n>`` attempt suffix."""

from __future__ import annotations

import re
from collections.abc import Iterable

from pydantic.config import JsonDict

from ledger.log.errors import InvalidRolloutId

# Visible ASCII (no space, no control character): an identifier is an idempotency key and
# appears in logs and file lines, where CR/LF could forge a line.
PRINTABLE_ID_PATTERN = r"^[\x21-\x7e]+$"
ROLLOUT_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_ATTEMPT_SUFFIX = re.compile(r"^(.+)-a(\d+)$")
# Ids become file names in the mirror; the length bound keeps them below NAME_MAX with suffixes.
MAX_ROLLOUT_ID_LENGTH = 200
# The rule above as JSON Schema keywords, for the OpenAPI document only (``json_schema_extra``):
# the routes check ids with ``validate_rollout_id`` and answer 400, not a validator's 422.
ROLLOUT_ID_SCHEMA: JsonDict = {
    "minLength": 1,
    "maxLength": MAX_ROLLOUT_ID_LENGTH,
    "pattern": ROLLOUT_ID_PATTERN.pattern,
}


def is_valid_rollout_id(value: object) -> bool:
    return (
        isinstance(value, str)
        and len(value) <= MAX_ROLLOUT_ID_LENGTH
        and ROLLOUT_ID_PATTERN.fullmatch(value) is not None
    )


def validate_rollout_id(value: object) -> str:
    """Return the id unchanged, or raise ``InvalidRolloutId`` ("Invalid rollout id: '<id>'")."""
    if not is_valid_rollout_id(value):
        raise InvalidRolloutId(value)
    assert isinstance(value, str)
    return value


def validate_rollout_ids(values: Iterable[object]) -> list[str]:
    """Validate a whole batch first, then de-duplicate keeping the first occurrence."""
    if isinstance(values, str | bytes):
        raise TypeError("expected a sequence of rollout ids, not a single string")
    checked = [validate_rollout_id(value) for value in values]
    return list(dict.fromkeys(checked))


def split_transport_rollout_id(value: str | None) -> tuple[str | None, int]:
    """``"r1-a2"`` → ``("r1", 2)``; an id without a suffix is attempt 0."""
    if value is None:
        return None, 0
    match = _ATTEMPT_SUFFIX.fullmatch(value)
    if match is None:
        return value, 0
    return match.group(1), int(match.group(2))


# A task id in a query: any text but control characters (PostgreSQL refuses NUL in a string,
# and a refusal in the middle of a streamed export could only cut the stream short).
TASK_ID_PATTERN = r"^[^\x00-\x1f\x7f]*$"
