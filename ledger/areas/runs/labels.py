"""What a run label may be: printable ASCII without spaces, 1 to 200 characters.

Rollout ids carry no run id (Gym reuses ``<task>-<rollout>`` ids across runs), so a label is
the one way to name a run. It is written into query strings, shell arguments and SQL, hence
the tight charset; the bound keeps it indexable on every backend.
"""

from __future__ import annotations

import re

from ledger.log.errors import InvalidPayload

MAX_RUN_LABEL_LENGTH = 200
RUN_LABEL_PATTERN = r"^[\x21-\x7e]+$"
_RUN_LABEL = re.compile(RUN_LABEL_PATTERN)
RUN_LABEL_DESCRIPTION = (
    "A run label (printable ASCII without spaces, at most "
    f"{MAX_RUN_LABEL_LENGTH} characters): which run the rollout belongs to"
)


def check_run_label(value: object, *, name: str = "run") -> str:
    """The label, or 422 naming what is wrong with it."""
    if not isinstance(value, str):
        raise InvalidPayload(f"{name}: a run label must be a string; got {type(value).__name__}")
    if not 0 < len(value) <= MAX_RUN_LABEL_LENGTH:
        raise InvalidPayload(
            f"{name}: a run label of 1 to {MAX_RUN_LABEL_LENGTH} characters; got {len(value)}"
        )
    if _RUN_LABEL.fullmatch(value) is None:
        raise InvalidPayload(
            f"{name}: a run label of printable ASCII characters without spaces; got {value!r}"
        )
    return value
