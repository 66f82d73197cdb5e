"""Counting full builds of a rollout's record (the observations projection's ``project``)."""

from __future__ import annotations

from typing import Any

import pytest

import ledger.areas.observations.projection as observations_projection


def count_record_builds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """From now on, each full build of a record appends its rollout id to the returned list."""
    built: list[str] = []
    real_project = observations_projection.project

    def counting_project(rollout_id: str, *args: Any) -> Any:
        built.append(rollout_id)
        return real_project(rollout_id, *args)

    monkeypatch.setattr(observations_projection, "project", counting_project)
    return built
