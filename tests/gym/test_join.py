"""§5.2 ``join_model_call_observations``, step by step, with concrete bundles and captures."""

from __future__ import annotations

from typing import Any

from ledger.gym.join import join_model_call_observations
from ledger.gym.observations import AgentObservationBundle
from tests.support.observations import capture_call, model_ref


def bundle(
    *records: dict[str, Any], gaps: list[dict[str, Any]] | None = None
) -> AgentObservationBundle:
    return AgentObservationBundle.model_validate(
        {"source": "agent", "records": list(records), "gaps": gaps or []}
    )


def invocation(invocation_id: str, *refs: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "agent_invocation", "invocation_id": invocation_id, "model_calls": list(refs)}


def joined(source: AgentObservationBundle, calls: list[dict[str, Any]]) -> dict[str, Any]:
    return join_model_call_observations(source, calls).model_dump(mode="json", exclude_none=True)


def refs_of(result: dict[str, Any], position: int = 0) -> list[dict[str, Any]]:
    refs: list[dict[str, Any]] = result["records"][position]["model_calls"]
    return refs


POLICY = model_ref("policy")
JUDGE = model_ref("judge")


# --- step 3/5: exact matching and ownership -----------------------------------------------


def test_id_reference_is_replaced_by_the_canonical_ref() -> None:
    calls = [capture_call(model_call_id="c1", model_ref=POLICY, response_id="resp-1")]
    result = joined(bundle(invocation("root", {"model_call_id": "c1"})), calls)
    assert refs_of(result) == [
        {"model_call_id": "c1", "model_ref": POLICY, "response_id": "resp-1"}
    ]
    assert result["gaps"] == []


def test_pair_reference_matches_the_exact_model_ref_and_response_id() -> None:
    calls = [
        capture_call(model_call_id="c1", model_ref=JUDGE, response_id="resp-1", call_index=0),
        capture_call(model_call_id="c2", model_ref=POLICY, response_id="resp-1", call_index=1),
    ]
    result = joined(
        bundle(invocation("root", {"model_ref": POLICY, "response_id": "resp-1"})), calls
    )
    assert refs_of(result) == [
        {"model_call_id": "c2", "model_ref": POLICY, "response_id": "resp-1"}
    ]
    assert result["gaps"] == [
        {"code": "model_call_ownership_unavailable", "detail": "capture:c1:call_index=0"}
    ]


def test_id_reference_must_agree_with_every_identifier_it_sets() -> None:
    calls = [capture_call(model_call_id="c1", model_ref=POLICY, response_id="resp-1")]
    wrong_ref = {"model_call_id": "c1", "model_ref": JUDGE}
    wrong_response = {"model_call_id": "c1", "response_id": "resp-2"}
    result = joined(bundle(invocation("a", wrong_ref), invocation("b", wrong_response)), calls)
    assert refs_of(result, 0) == [wrong_ref]
    assert refs_of(result, 1) == [wrong_response]
    assert result["gaps"] == [
        {"code": "model_call_reference_unmatched", "invocation_id": "a", "detail": "c1"},
        {"code": "model_call_reference_unmatched", "invocation_id": "b", "detail": "c1"},
        {"code": "model_call_ownership_unavailable", "detail": "capture:c1:call_index=0"},
    ]


def test_timestamps_and_order_never_establish_ownership() -> None:
    # One invocation, one call at the same moment: without an exact key there is no match.
    calls = [
        capture_call(model_call_id="c1", model_ref=POLICY, response_id="resp-9", started_at=1.0)
    ]
    ref = {"model_ref": POLICY, "response_id": "resp-1"}
    result = joined(bundle(invocation("root", ref)), calls)
    assert refs_of(result) == [ref]
    assert [gap["code"] for gap in result["gaps"]] == [
        "model_call_reference_unmatched",
        "model_call_ownership_unavailable",
    ]
    assert result["gaps"][0] == {
        "code": "model_call_reference_unmatched",
        "invocation_id": "root",
        "detail": "resp-1",
    }


def test_ambiguous_reference_keeps_the_ref_and_leaves_calls_unowned() -> None:
    calls = [
        capture_call(model_call_id="dup", call_index=0),
        capture_call(model_call_id="dup", call_index=1),
        capture_call(model_ref=POLICY, response_id="r", call_index=2),
        capture_call(model_ref=POLICY, response_id="r", call_index=3),
    ]
    by_pair = {"model_ref": POLICY, "response_id": "r"}
    result = joined(bundle(invocation("root", {"model_call_id": "dup"}, by_pair)), calls)
    assert refs_of(result) == [{"model_call_id": "dup"}, by_pair]
    assert result["gaps"] == [
        {"code": "model_call_reference_ambiguous", "invocation_id": "root", "detail": "dup"},
        {"code": "model_call_reference_ambiguous", "invocation_id": "root", "detail": "r"},
        {"code": "model_call_ownership_unavailable", "detail": "capture:dup:call_index=0"},
        {"code": "model_call_ownership_unavailable", "detail": "capture:dup:call_index=1"},
        {"code": "model_call_ownership_unavailable", "detail": "capture:r:call_index=2"},
        {"code": "model_call_ownership_unavailable", "detail": "capture:r:call_index=3"},
    ]


def test_a_call_already_owned_by_an_earlier_ref_is_a_conflict() -> None:
    calls = [capture_call(model_call_id="c1", model_ref=POLICY, response_id="resp-1")]
    by_pair = {"model_ref": POLICY, "response_id": "resp-1"}
    result = joined(
        bundle(invocation("root", {"model_call_id": "c1"}), invocation("child", by_pair)), calls
    )
    assert refs_of(result, 0)[0]["model_call_id"] == "c1"
    assert refs_of(result, 1) == [by_pair]
    assert result["gaps"] == [
        {"code": "model_call_reference_conflict", "invocation_id": "child", "detail": "c1"}
    ]


def test_unowned_calls_are_named_by_id_then_response_then_unknown() -> None:
    calls = [
        capture_call(model_call_id="c1", response_id="resp-1", call_index=4),
        capture_call(response_id="resp-2", call_index=5),
        capture_call(call_index=6),
    ]
    result = joined(bundle(), calls)
    assert result["gaps"] == [
        {"code": "model_call_ownership_unavailable", "detail": "capture:c1:call_index=4"},
        {"code": "model_call_ownership_unavailable", "detail": "capture:resp-2:call_index=5"},
        {"code": "model_call_ownership_unavailable", "detail": "capture:unknown:call_index=6"},
    ]


# --- step 1: session auto-attach ----------------------------------------------------------


def test_session_id_naming_an_invocation_attaches_the_call() -> None:
    calls = [
        capture_call(
            model_call_id="c1", client_session_id="sub-1", model_ref=POLICY, response_id="r1"
        ),
        capture_call(model_call_id="c2", client_session_id="nobody", call_index=1),
        capture_call(client_session_id="sub-1", response_id="r3", call_index=2),
    ]
    result = joined(bundle(invocation("root"), invocation("sub-1")), calls)
    assert refs_of(result, 0) == []
    assert refs_of(result, 1) == [{"model_call_id": "c1", "model_ref": POLICY, "response_id": "r1"}]
    assert result["gaps"] == [
        {"code": "model_call_ownership_unavailable", "detail": "capture:c2:call_index=1"},
        {"code": "model_call_ownership_unavailable", "detail": "capture:r3:call_index=2"},
    ]


def test_session_auto_attach_does_not_duplicate_a_ref_that_already_denotes_the_call() -> None:
    call = capture_call(
        model_call_id="c1", client_session_id="root", model_ref=POLICY, response_id="r1"
    )
    for ref in (
        {"model_call_id": "c1"},
        {"model_call_id": "c1", "model_ref": POLICY},
        {"model_call_id": "c1", "response_id": "r1"},
        {"model_call_id": "c1", "model_ref": POLICY, "response_id": "r1"},
        {"model_ref": POLICY, "response_id": "r1"},
    ):
        result = joined(bundle(invocation("root", ref)), [call])
        assert refs_of(result) == [
            {"model_call_id": "c1", "model_ref": POLICY, "response_id": "r1"}
        ]
        assert result["gaps"] == []


def test_session_auto_attach_adds_the_canonical_ref_next_to_a_ref_naming_something_else() -> None:
    call = capture_call(model_call_id="c1", client_session_id="root", response_id="r1")
    result = joined(
        bundle(invocation("root", {"model_call_id": "c1", "response_id": "r2"})), [call]
    )
    assert refs_of(result) == [
        {"model_call_id": "c1", "response_id": "r2"},
        {"model_call_id": "c1", "response_id": "r1"},
    ]
    assert result["gaps"] == [
        {"code": "model_call_reference_unmatched", "invocation_id": "root", "detail": "c1"}
    ]


# --- step 6: compactions ------------------------------------------------------------------


def compaction(invocation_id: str, **fields: Any) -> dict[str, Any]:
    return {"kind": "context_compaction", "invocation_id": invocation_id, **fields}


COMPACTION_CALLS = [
    capture_call(model_call_id="own", model_ref=POLICY, response_id="r-own", call_index=0),
    capture_call(model_call_id="other", call_index=1),
    capture_call(model_call_id="free", call_index=2),
]


def test_compaction_model_calls_must_be_owned_by_its_own_invocation() -> None:
    source = bundle(
        invocation("root", {"model_call_id": "own"}),
        invocation("sub", {"model_call_id": "other"}),
        compaction(
            "root",
            model_calls=[
                {"model_call_id": "own"},
                {"model_call_id": "other"},
                {"model_call_id": "free"},
                {"model_call_id": "ghost"},
            ],
        ),
    )
    result = joined(source, COMPACTION_CALLS)
    assert result["records"][2]["model_calls"] == [
        {"model_call_id": "own", "model_ref": POLICY, "response_id": "r-own"},
        {"model_call_id": "other"},
        {"model_call_id": "free"},
        {"model_call_id": "ghost"},
    ]
    assert result["gaps"] == [
        {
            "code": "model_call_reference_conflict",
            "invocation_id": "root",
            "detail": "model_calls:other",
        },
        {
            "code": "model_call_ownership_unavailable",
            "invocation_id": "root",
            "detail": "model_calls:free",
        },
        {
            "code": "model_call_reference_unmatched",
            "invocation_id": "root",
            "detail": "model_calls:ghost",
        },
        {"code": "model_call_ownership_unavailable", "detail": "capture:free:call_index=2"},
    ]


def test_compaction_boundaries_name_calls_without_owning_them() -> None:
    source = bundle(
        invocation("root", {"model_call_id": "own"}),
        invocation("sub", {"model_call_id": "other"}),
        compaction(
            "root",
            before_model_call={"model_call_id": "own"},
            after_model_call={"model_call_id": "free"},
        ),
        compaction(
            "root",
            before_model_call={"model_call_id": "other"},
            after_model_call={"model_call_id": "nope"},
        ),
    )
    result = joined(source, COMPACTION_CALLS)
    first, second = result["records"][2], result["records"][3]
    assert first["before_model_call"] == {
        "model_call_id": "own",
        "model_ref": POLICY,
        "response_id": "r-own",
    }
    assert first["after_model_call"] == {"model_call_id": "free"}
    assert second["before_model_call"] == {"model_call_id": "other"}
    assert second["after_model_call"] == {"model_call_id": "nope"}
    assert result["gaps"] == [
        {
            "code": "model_call_reference_conflict",
            "invocation_id": "root",
            "detail": "before_model_call:other",
        },
        {
            "code": "model_call_reference_unmatched",
            "invocation_id": "root",
            "detail": "after_model_call:nope",
        },
        # A boundary does not own: the call stays unowned.
        {"code": "model_call_ownership_unavailable", "detail": "capture:free:call_index=2"},
    ]


# --- step 4 and 8: recomputed gaps, producer gaps, de-duplication -------------------------


def test_prior_join_gaps_are_recomputed_and_producer_gaps_kept() -> None:
    stale = [
        {"code": "model_call_reference_unmatched", "invocation_id": "root", "detail": "old"},
        {"code": "model_call_reference_ambiguous", "detail": "old"},
        {"code": "model_call_reference_conflict", "detail": "old"},
        {"code": "model_call_ownership_unavailable", "detail": "capture:old:call_index=9"},
    ]
    producer = [
        {"code": "agent_transcript_unavailable"},
        {"code": "model_call_ownership_unavailable", "detail": "direct-provider call"},
        {
            "code": "model_call_ownership_unavailable",
            "invocation_id": "root",
            "detail": "capture:x",
        },
        {"code": "agent_transcript_unavailable"},
    ]
    calls = [capture_call(model_call_id="c1")]
    result = joined(
        bundle(invocation("root", {"model_call_id": "c1"}), gaps=stale + producer), calls
    )
    assert result["gaps"] == producer[:3]


def test_join_is_idempotent() -> None:
    calls = [
        *COMPACTION_CALLS,
        capture_call(model_call_id="dup", call_index=3),
        capture_call(model_call_id="dup", call_index=4),
        capture_call(model_call_id="s1", client_session_id="sub", call_index=5),
        capture_call(response_id="loose", call_index=6),
    ]
    source = bundle(
        invocation(
            "root", {"model_call_id": "own"}, {"model_call_id": "dup"}, {"model_call_id": "ghost"}
        ),
        invocation("sub", {"model_call_id": "other"}, {"model_call_id": "own"}),
        compaction(
            "root",
            model_calls=[{"model_call_id": "free"}, {"model_call_id": "other"}],
            before_model_call={"model_call_id": "other"},
        ),
        {"kind": "tool_call", "invocation_id": "root", "tool_call_id": "t1"},
        gaps=[{"code": "agent_transcript_unavailable"}],
    )
    once = join_model_call_observations(source, calls)
    twice = join_model_call_observations(once, calls)
    assert twice == once
    assert once.model_dump() != source.model_dump()
    assert [(gap.code, gap.invocation_id, gap.detail) for gap in once.gaps] == [
        ("agent_transcript_unavailable", None, None),
        ("model_call_reference_ambiguous", "root", "dup"),
        ("model_call_reference_unmatched", "root", "ghost"),
        ("model_call_reference_conflict", "sub", "own"),
        ("model_call_ownership_unavailable", "root", "model_calls:free"),
        ("model_call_reference_conflict", "root", "model_calls:other"),
        ("model_call_reference_conflict", "root", "before_model_call:other"),
        ("model_call_ownership_unavailable", None, "capture:free:call_index=2"),
        ("model_call_ownership_unavailable", None, "capture:dup:call_index=3"),
        ("model_call_ownership_unavailable", None, "capture:dup:call_index=4"),
        ("model_call_ownership_unavailable", None, "capture:loose:call_index=6"),
    ]
    # The session call s1 was attached to "sub" on the first join, and only once.
    sub_refs = [ref.model_call_id for ref in twice.invocations[1].model_calls]
    assert sub_refs == ["other", "own", "s1"]


def test_join_does_not_modify_its_input() -> None:
    source = bundle(invocation("root", {"model_call_id": "c1"}))
    before = source.model_dump()
    join_model_call_observations(source, [capture_call(model_call_id="c1", response_id="r")])
    assert source.model_dump() == before


def test_other_records_pass_through_unchanged() -> None:
    sandbox = {"kind": "sandbox", "role": "agent", "outcome": "completed", "exit_code": 0}
    tool = {"kind": "tool_call", "invocation_id": "root", "tool_call_id": "t", "status": "failed"}
    result = joined(bundle(invocation("root"), tool, sandbox), [])
    assert result["records"][1] == {**tool}
    assert result["records"][2] == {**sandbox}
    assert result["gaps"] == []
