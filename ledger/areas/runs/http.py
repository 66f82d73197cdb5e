"""The ``run`` query parameter, as the ingest routes and the health selections declare it:
FastAPI answers 422 naming ``run`` for a label outside the charset or the bound."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

from ledger.areas.runs.labels import MAX_RUN_LABEL_LENGTH, RUN_LABEL_DESCRIPTION, RUN_LABEL_PATTERN

RunLabelQuery = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=MAX_RUN_LABEL_LENGTH,
        pattern=RUN_LABEL_PATTERN,
        description=RUN_LABEL_DESCRIPTION
        + "; labels the rollout's current generation (409 if it holds another label)",
    ),
]

RunSelectionQuery = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=MAX_RUN_LABEL_LENGTH,
        pattern=RUN_LABEL_PATTERN,
        description="Only rollouts labelled with this run (given as ?run= on their ingest)",
    ),
]
