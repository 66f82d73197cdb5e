"""Our Responses input-item union accepts and refuses what Gym 0.7.0's does (the verdicts in
response_item_cases.py were read off Gym; the Gym leg re-checks them with Gym's own model)."""

from __future__ import annotations

from typing import Any

import pytest

from ledger.gym.response_items import MEMBER_TAGS, checked_conversation_item, item_error, item_tag
from tests.gym.response_item_cases import CASES, TOKENS


@pytest.mark.parametrize(("item", "accepted"), [pytest.param(i, a, id=n) for n, i, a in CASES])
def test_verdicts_are_gyms(item: Any, accepted: bool) -> None:
    assert (item_error(item) is None) is accepted, item_error(item)


def test_routing_names_the_member() -> None:
    assert item_tag({"role": "user", "content": "x"}) == "easy_message"
    assert item_tag({"type": "message", "role": "assistant", "id": "m", "content": []}) == (
        "output_message"
    )
    assert item_tag({"role": "assistant", "content": [{"type": "output_text"}]}) == (
        "mcp_list_tools"
    )
    assert item_tag({"call_id": "c", "output": "x"}) == "function_call_output"
    training = {"type": "message", "role": "user", "content": "x", **TOKENS}
    assert item_tag(training) == "easy_message__training"
    assert item_tag({"type": 5}) is None and item_tag([]) is None
    assert len(MEMBER_TAGS) == 34


def test_error_names_the_member_and_field_and_is_bounded() -> None:
    bad = {"type": "message", "role": "assistant", "content": [{"type": "output_text"}] * 500}
    reason = item_error(bad)
    assert reason is not None
    assert reason.startswith("not a Responses input item (read as output_message): id:")
    assert "more)" in reason and len(reason) <= 600


def test_checked_item_is_returned_unchanged() -> None:
    item = {"role": "user", "content": "hi", "custom": {"kept": True}}
    assert checked_conversation_item(item) is item
    with pytest.raises(ValueError, match="read as function_call"):
        checked_conversation_item({"type": "function_call", "name": "f"})
