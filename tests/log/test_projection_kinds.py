"""The two kinds of projection stay where they run: a store refuses a view (its rows are
written by ``flush``, which the append never calls, so they would silently never be written),
and a follower refuses a projection of the write side (the append applies it already)."""

from __future__ import annotations

import pytest

from ledger.app.areas import default_catalogue, view_projectors, write_side_projectors
from ledger.log.projection_follower import ProjectionFollower
from ledger.log.store import LedgerStore


def test_every_projection_says_which_kind_it_is() -> None:
    assert {p.name for p in view_projectors()} == {"capture_calls", "observations"}
    assert all(p.follows_log for p in view_projectors())
    assert not any(p.follows_log for p in write_side_projectors())


def test_a_store_refuses_a_view(database_url: str) -> None:
    with pytest.raises(ValueError, match="views follow the log, not the append: observations"):
        LedgerStore(
            database_url,
            default_catalogue(),
            [*write_side_projectors(), *[v for v in view_projectors() if v.name == "observations"]],
        )


def test_a_follower_refuses_the_write_side(database_url: str) -> None:
    store = LedgerStore(database_url, default_catalogue(), write_side_projectors())
    with pytest.raises(ValueError, match="run in the append, not behind it: rollouts"):
        ProjectionFollower(
            store, lambda build: [*view_projectors(build), write_side_projectors()[0]]
        )
