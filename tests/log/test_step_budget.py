"""A follower's write step takes on what fits its time budget (log/step_budget.py): fewer
items after a slow step, more again after quick ones, within its bounds; and the views'
follower sizes its pages by it, applying every event once whatever the size."""

from __future__ import annotations

from ledger.app.areas import views_follower
from ledger.log.projection_follower import PAGE_EVENTS_LEAST
from ledger.log.step_budget import StepBudget
from ledger.log.store import LedgerStore
from tests.log.test_projection_follower_turns import _capture, _verified


def test_a_slow_step_makes_the_next_one_fit_the_budget() -> None:
    budget = StepBudget(500, least=20, budget_s=0.1)
    assert budget.size == 500
    budget.observe(500, 0.4)  # 1,250 items a second: 125 fit in 0.1 s
    assert budget.size == 125
    budget.observe(125, 10.0)
    assert budget.size == 20  # never below the least


def test_quick_steps_grow_it_back_at_most_twice_a_step_up_to_the_most() -> None:
    budget = StepBudget(500, least=20, budget_s=0.1)
    budget.observe(500, 5.0)
    assert budget.size == 20
    sizes = []
    for _ in range(6):
        budget.observe(budget.size, 0.001)
        sizes.append(budget.size)
    assert sizes == [40, 80, 160, 320, 500, 500]


def test_a_step_with_nothing_done_changes_nothing() -> None:
    budget = StepBudget(500, least=20, budget_s=0.1)
    budget.observe(0, 1.0)
    budget.observe(10, 0.0)
    assert budget.size == 500
    # The least is never above the most.
    assert StepBudget(5, least=20).size == 5


async def test_the_views_follower_pages_shrink_to_the_budget_and_apply_every_event(
    store: LedgerStore, database_url: str
) -> None:
    await _capture(store, rollouts=3, calls=30)
    # No step fits a budget of nothing: after the first page, each is the least.
    follower = views_follower(store, page_events=50, step_budget_s=1e-9)
    progress = await follower.progress()
    steps = []
    while applied := await follower.step():
        steps.append(applied)
    assert steps[0] == 50
    assert set(steps[1:-1]) == {PAGE_EVENTS_LEAST}
    assert sum(steps) == progress.behind
    await _verified(database_url, store)
