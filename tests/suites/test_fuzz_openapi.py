"""Fuzz every operation of the API from its own OpenAPI document (issue 14, standing suites).

A real ``ledger serve`` with all three tokens set; schemathesis generates requests from the
document the server publishes, valid ones (positive) and ones that break the schema
(negative), a bounded, derandomized number per operation. Run once with the bearer each
route wants and once with none. No answer is a 5xx, each conforms to the schema documented
for its status, its status is one the operation documents, and every valid request is
accepted (``positive_data_acceptance``: a 2xx, or an answer that depends on the state, 404,
409, 410, or 401 without a token). Afterwards ``ledger verify`` and ``ledger mirror verify``
pass on the data directory the fuzzing wrote into.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.config import SchemathesisConfig
from schemathesis.core.errors import InvalidSchema
from schemathesis.core.result import Err, Ok
from schemathesis.generation.case import Case
from schemathesis.schemas import APIOperation
from schemathesis.specs.openapi.checks import (
    positive_data_acceptance,
    response_schema_conformance,
    status_code_conformance,
)

from ledger.app.http.openapi import UNAUTHENTICATED_PATHS
from ledger.client_connections import client_limits
from tests.suites.cli import assert_ledger_verifies, mirror_caught_up
from tests.suites.documented_rules import follows_unwritten_rules, integers_spelled_whole
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow

TOKENS = {"control": "fuzz-control", "ingest": "fuzz-ingest", "read": "fuzz-read"}
# Examples per operation and generation mode: deterministic (derandomized), and small enough
# that the whole suite stays within CI's 25 minutes on a fresh machine. The generation is
# most of the time (hypothesis drawing from the document's schemas in the test's own process):
# 80 and 15 took 183 s a backend there, 40 and 10 104-163 s (docs/decisions.md, "CI time").
EXAMPLES_WITH_TOKENS = 25
EXAMPLES_WITHOUT_TOKENS = 6
CHECKS = [
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
    positive_data_acceptance,
]
# What a valid request may be answered: success, or what depends on the state the fuzzing
# built (an id never written: 404; the same id with other content: 409; a rollout an earlier
# case retired: 410), or 401 for the run without tokens.
ACCEPTED = ["2xx", "401", "404", "409", "410"]
CONFIG = SchemathesisConfig.from_dict(
    {"checks": {"positive_data_acceptance": {"expected-statuses": ACCEPTED}}}
)
CONTROL_PREFIX = "/training-token-capture/control"


def bearer_for(operation: APIOperation[Any, Any, Any, Any]) -> str:
    """The token a route wants: control routes the control token, reads the read token,
    every other write the ingest token (ledger/app/http/auth.py)."""
    if operation.path.startswith(CONTROL_PREFIX):
        return TOKENS["control"]
    if operation.method.upper() == "GET":
        return TOKENS["read"]
    return TOKENS["ingest"]


def operation_of(
    result: Ok[APIOperation[Any, Any, Any, Any]] | Err[InvalidSchema],
) -> APIOperation[Any, Any, Any, Any]:
    assert isinstance(result, Ok), f"the document has an unusable operation: {result.err()}"
    return result.ok()


@dataclass
class FuzzRun:
    cases: int = 0
    statuses: Counter[tuple[str, int]] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)


def fuzz_operation(
    base_url: str,
    operation: APIOperation[Any, Any, Any, Any],
    mode: GenerationMode,
    *,
    authorization: str | None,
    examples: int,
    run: FuzzRun,
) -> None:
    headers = {"Host": "127.0.0.1"}
    if authorization is not None:
        headers["Authorization"] = authorization

    cases = operation.as_strategy(mode)
    if mode is GenerationMode.POSITIVE:
        # Valid by the rules the document cannot state too (tests/suites/documented_rules.py).
        cases = cases.map(integers_spelled_whole).filter(follows_unwritten_rules)

    @given(case=cases)
    @settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    def one_case(case: Case[Any]) -> None:
        run.cases += 1
        response = case.call(base_url=base_url, headers=headers, timeout=30)
        run.statuses[(operation.label, response.status_code)] += 1
        try:
            case.validate_response(response, checks=CHECKS, headers=headers)
        except (AssertionError, BaseExceptionGroup) as failure:  # collected, all shown at the end
            run.failures.append(f"{operation.label} [{mode.value}]: {str(failure)[:2000]}")

    try:
        one_case()
    except Unsatisfiable:
        # An operation without parameters or body has nothing a negative case could break.
        assert mode is GenerationMode.NEGATIVE, operation.label


async def test_fuzz_every_operation_with_and_without_tokens(
    tmp_path: Path, database_url: str
) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    env = {
        "LEDGER_CONTROL_TOKEN": TOKENS["control"],
        "LEDGER_INGEST_TOKEN": TOKENS["ingest"],
        "LEDGER_READ_TOKEN": TOKENS["read"],
    }
    with_tokens, without_tokens = FuzzRun(), FuzzRun()
    with ServerProcess(data_dir=data_dir, database_url=database_url, env=env) as server:
        async with httpx.AsyncClient(
            base_url=server.base_url, timeout=30, limits=client_limits()
        ) as http:
            reader = {"Authorization": f"Bearer {TOKENS['read']}"}
            document = (await http.get("/openapi.json", headers=reader)).json()
        schema = schemathesis.openapi.from_dict(document, config=CONFIG)
        operations = [operation_of(result) for result in schema.get_all_operations()]
        assert len(operations) == sum(len(methods) for methods in document["paths"].values())
        for operation in operations:
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                fuzz_operation(
                    server.base_url,
                    operation,
                    mode,
                    authorization=f"Bearer {bearer_for(operation)}",
                    examples=EXAMPLES_WITH_TOKENS,
                    run=with_tokens,
                )
            fuzz_operation(
                server.base_url,
                operation,
                GenerationMode.POSITIVE,
                authorization=None,
                examples=EXAMPLES_WITHOUT_TOKENS,
                run=without_tokens,
            )
        await mirror_caught_up(database_url)
    print(
        f"fuzz: {len(operations)} operations, {with_tokens.cases} cases with tokens, "
        f"{without_tokens.cases} without"
    )
    assert with_tokens.failures == [], "\n\n".join(with_tokens.failures[:10])
    assert without_tokens.failures == [], "\n\n".join(without_tokens.failures[:10])
    # The right bearer is never refused, and no bearer never gets past a protected route.
    refused = {label for (label, status) in with_tokens.statuses if status == 401}
    assert refused == set(), refused
    admitted = {
        label
        for (label, status) in without_tokens.statuses
        if status < 400 and label.split(" ", 1)[1] not in UNAUTHENTICATED_PATHS
    }
    assert admitted == set(), admitted
    # Positive cases reach the routes: on every operation some succeed, or find nothing
    # under the id (a read before anything wrote it).
    succeeded = {label for (label, status) in with_tokens.statuses if status < 400 or status == 404}
    assert {operation.label for operation in operations} - succeeded == set()
    assert_ledger_verifies(database_url, data_dir)
