"""``HistoryParser`` gives exactly what ``parse_json`` gives for every payload, reusing the
items a request shares with an earlier one only when the text says they are the same."""

from __future__ import annotations

from typing import Any

from ledger.areas.viewer.shared_history import HistoryParser
from ledger.log.canonical import canonical_bytes, parse_json


def _payload(request: Any, call: int, **extra: Any) -> str:
    exchange = {
        "completed_at": 10.0 + call,
        "dialect": "chat",
        "model_call_id": f"c{call}",
        "request": request,
        "response": {"choices": [{"message": {"role": "assistant", "content": f"r{call}"}}]},
        **extra,
    }
    return canonical_bytes({"exchange": exchange, "model_call_id": f"c{call}"}).decode()


def _thread(name: str, calls: int) -> list[list[dict[str, Any]]]:
    history: list[dict[str, Any]] = [{"role": "system", "content": f"{name} system"}]
    requests = []
    for i in range(calls):
        history.append({"role": "user", "content": f'{name} {i} "messages":[ \\ ]}} ✓'})
        requests.append(list(history))
        history.append({"role": "assistant", "content": f"{name} reply {i}"})
    return requests


def test_a_continued_thread_reuses_its_history_and_equals_parse_json() -> None:
    parser = HistoryParser()
    texts = [_payload({"messages": m, "model": "p"}, i) for i, m in enumerate(_thread("a", 30))]
    for text in texts:
        assert parser.parse(text) == parse_json(text)
    # Call n (2n + 2 items) reuses the 2n items of call n - 1; the first has nothing to reuse.
    assert parser.reused_items == sum(2 * n for n in range(1, 30))


def test_interleaved_threads_each_find_their_own_history() -> None:
    parser = HistoryParser()
    a, b, c = _thread("a", 12), _thread("b", 12), _thread("c", 12)
    texts = [
        _payload({"messages": thread[i]}, 3 * i + k)
        for i in range(12)
        for k, thread in enumerate((a, b, c))
    ]
    for text in texts:
        assert parser.parse(text) == parse_json(text)
    assert parser.reused_items == 3 * sum(2 * n for n in range(1, 12))


def test_edited_history_and_other_shapes_are_parsed_whole() -> None:
    parser = HistoryParser()
    first = _thread("a", 3)[2]
    edited = [dict(first[0], content="changed system"), *first[1:]]
    responses = {"input": [{"type": "message", "role": "user", "content": "hi"}], "model": "m"}
    texts = [
        _payload({"messages": first}, 0),
        _payload({"messages": [*edited, {"role": "user", "content": "more"}]}, 1),
        _payload({"input": "a plain string input", "model": "m"}, 2),
        _payload(responses, 3),
        _payload({"instructions": "be brief", **responses}, 4),
        _payload({"max_tokens": 5, "messages": [], "system": "s"}, 5),
        _payload(None, 6),
        _payload({"model": "m"}, 7),
        canonical_bytes({"line": "damaged", "exchange": None}).decode(),
        '{"exchange": {"request": {"messages": [1, 2]}}}',  # not canonical: spaces
        "[1,2,3]",
    ]
    for text in texts:
        assert parser.parse(text) == parse_json(text), text
    # Only the Responses request with instructions continues one (the one before it).
    assert parser.reused_items == 1


def test_a_shorter_prefix_is_not_taken_for_the_history() -> None:
    """Text that starts like a kept list but continues inside its last item is not reuse."""
    parser = HistoryParser()
    one = [{"role": "user", "content": "ab"}]
    longer = [{"role": "user", "content": "ab"}, {"role": "user", "content": "abc"}]
    for text in (
        _payload({"messages": one}, 0),
        _payload({"messages": [{"role": "user", "content": "abc"}]}, 1),
        _payload({"messages": longer}, 2),
    ):
        assert parser.parse(text) == parse_json(text)
    assert parser.reused_items == 1
