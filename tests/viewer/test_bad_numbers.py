"""A number parameter of a viewer page written with a digit that is not ASCII ("²" passes
``str.isdigit`` and fails ``int``) is a 400 naming the parameter, never a 500."""

from __future__ import annotations

import httpx
import pytest


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("/ui/rollouts/x?calls_from=%C2%B2", "calls_from: expected a call index"),
        ("/ui/?limit=%C2%B2", "limit"),
        ("/ui/rollouts/x/calls/%C2%B2/payload", "call index: expected a non-negative integer"),
        ("/ui/events/stream?after=%C2%B2", "after: expected a seq"),
        ("/ui/compare?a=x&b=y&calls_from=%C2%B2", "calls_from: expected a call index"),
        ("/ui/compare?a=x&b=y&calls_from=%EF%BC%91", "calls_from: expected a call index"),
    ],
)
async def test_a_digit_that_is_not_ascii_is_a_400(
    client: httpx.AsyncClient, path: str, says: str
) -> None:
    reply = await client.get(path)
    assert reply.status_code == 400
    assert says in reply.text
