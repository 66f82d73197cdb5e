"""Large request bodies take turns (app/http/large_bodies.py): the byte budget in order, with
cancellation, and the middleware in front of an ASGI app."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ledger.app.http.large_bodies import LARGE_BODY_BYTES, ByteBudget, LargeBodyBudget

MIB = 1024 * 1024


async def test_the_budget_grants_in_arrival_order_and_never_over_its_capacity() -> None:
    budget = ByteBudget(10)
    granted: list[str] = []

    async def take(name: str, amount: int, hold: asyncio.Event) -> None:
        await budget.acquire(amount)
        granted.append(name)
        assert budget.in_use <= budget.capacity
        await hold.wait()
        budget.release(amount)

    holds = {name: asyncio.Event() for name in "abcd"}
    tasks = [asyncio.create_task(take("a", 6, holds["a"]))]
    await asyncio.sleep(0)
    # b does not fit beside a; c would, but arrived after b and waits its turn.
    tasks += [asyncio.create_task(take("b", 8, holds["b"]))]
    await asyncio.sleep(0)
    tasks += [asyncio.create_task(take("c", 2, holds["c"]))]
    await asyncio.sleep(0)
    assert granted == ["a"]
    holds["a"].set()
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert granted == ["a", "b", "c"]  # 8 + 2 fit together once a is gone
    holds["b"].set()
    holds["c"].set()
    await asyncio.gather(*tasks)
    assert budget.in_use == 0


async def test_a_wait_given_up_leaves_the_budget_whole_and_lets_the_next_in() -> None:
    budget = ByteBudget(10)
    await budget.acquire(10)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(budget.acquire(5), 0.01)
    nxt = asyncio.create_task(budget.acquire(5))
    await asyncio.sleep(0)
    assert not nxt.done()
    budget.release(10)
    await nxt
    assert budget.in_use == 5


async def test_more_than_the_capacity_is_taken_as_the_whole_capacity() -> None:
    budget = ByteBudget(10)
    await budget.acquire(50)
    assert budget.in_use == 10
    budget.release(50)
    assert budget.in_use == 0


def http_scope(method: str, headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    return {"type": "http", "method": method, "path": "/x", "headers": headers}


async def test_large_bodies_run_one_at_a_time_and_small_ones_never_wait() -> None:
    order: list[str] = []
    release = asyncio.Event()
    first_inside = asyncio.Event()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        order.append(f"start {scope['path']}")
        first_inside.set()
        if scope["path"] == "/first":
            await release.wait()
        order.append(f"end {scope['path']}")

    middleware = LargeBodyBudget(app, max_body_bytes=16 * MIB, budget_bytes=16 * MIB)

    def request(path: str, headers: list[tuple[bytes, bytes]]) -> Any:
        scope = {**http_scope("POST", headers), "path": path}
        return asyncio.create_task(middleware(scope, None, None))  # type: ignore[arg-type]

    big = [(b"content-length", str(10 * MIB).encode())]
    first = request("/first", big)
    await first_inside.wait()
    second = request("/second", big)
    chunked = request("/chunked", [(b"transfer-encoding", b"chunked")])
    small = request("/small", [(b"content-length", str(LARGE_BODY_BYTES).encode())])
    await small
    assert order == ["start /first", "start /small", "end /small"]
    release.set()
    await asyncio.gather(first, second, chunked)
    assert order[3:] == [
        "end /first",
        "start /second",
        "end /second",
        "start /chunked",
        "end /chunked",
    ]


async def test_a_body_that_waited_too_long_is_answered_503_with_retry_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("ledger.app.http.large_bodies.MAX_WAIT_S", 0.01)
    called: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        called.append(scope["path"])

    middleware = LargeBodyBudget(app, max_body_bytes=16 * MIB, budget_bytes=16 * MIB)
    await middleware.budget.acquire(16 * MIB)  # a body at the limit is in flight
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = http_scope("PUT", [(b"content-length", str(2 * MIB).encode())])
    await middleware(scope, None, send)  # type: ignore[arg-type]
    assert called == []
    assert sent[0]["status"] == 503
    assert (b"retry-after", b"5") in sent[0]["headers"]
    assert b"too many large request bodies in flight" in sent[1]["body"]
    assert middleware.budget.in_use == 16 * MIB  # the refused request took nothing
