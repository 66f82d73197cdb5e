"""The ledger as Gym's capture ledger: the plug-in loaded by Gym's own config loader, used by
two "model-server workers" against one real ``ledger serve``, with Gym's reference stores run
side by side on the same commits as the expected answer."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from nemo_gym.token_id_capture import CaptureLedgerCommit
from nemo_gym.token_id_capture.config import TokenIdCaptureConfig
from nemo_gym.token_id_capture.lineage import FileLineageStore, InMemoryLineageStore
from nemo_gym.token_id_capture.protocols import CaptureLedger, LineageResolver
from nemo_gym.token_id_capture.records import ParentResolutionStatus
from nemo_gym.token_id_capture.staging.records import RolloutManifest

from gym_tests.commits import assistant, commit, conversation_after, user
from gym_tests.support import ledger_serve_process
from ledger.gym_plugin import LedgerCaptureLedger, RolloutRetiredError
from tests.support.server import ServerProcess

PLUGIN = "ledger.gym_plugin:LedgerCaptureLedger"
CONTROL_ENV = "NEMO_GYM_TOKEN_CAPTURE_CONTROL_TOKEN"


def gym_config(server: ServerProcess, token_dir: Path) -> dict[str, Any]:
    """The ``token_id_capture`` block a Gym run points at the ledger (docs/gym.md)."""
    return {
        "token_id_capture": {
            "enabled": True,
            "dir": str(token_dir),
            "external_staging": True,
            "rebuild_response": False,
            "lineage_store": PLUGIN,
            "lineage_store_kwargs": {"base_url": server.base_url, "request_timeout_s": 10},
        }
    }


def worker(server: ServerProcess, tmp_path: Path) -> LedgerCaptureLedger:
    """One model-server worker's store, built the way Gym builds it."""
    store = TokenIdCaptureConfig.model_validate(
        gym_config(server, tmp_path / "tokens")
    ).build_lineage_store()
    assert isinstance(store, LedgerCaptureLedger)
    return store


@pytest.fixture
def control_env(ledger_server: ServerProcess, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(CONTROL_ENV, ledger_server.control_token)
    return ledger_server.control_token


async def retire(server: ServerProcess, rollout_id: str) -> None:
    async with httpx.AsyncClient(base_url=server.base_url) as http:
        reply = await http.post(
            "/training-token-capture/control/rollouts/retire",
            json={"rollout_ids": [rollout_id]},
            headers={"Authorization": f"Bearer {server.control_token}"},
        )
        assert reply.status_code == 200, reply.text


def test_gym_config_loader_builds_the_plugin(ledger_server: ServerProcess, tmp_path: Path) -> None:
    store = worker(ledger_server, tmp_path)
    assert isinstance(store, LineageResolver) and isinstance(store, CaptureLedger)
    assert store.is_process_shared() is True
    assert store.base_url == ledger_server.base_url


def test_gym_config_loader_reports_bad_kwargs(ledger_server: ServerProcess, tmp_path: Path) -> None:
    config = gym_config(ledger_server, tmp_path)
    config["token_id_capture"]["lineage_store_kwargs"] = {"url": ledger_server.base_url}
    with pytest.raises(ValueError, match=r"could not construct token_id_capture\.lineage_store"):
        TokenIdCaptureConfig.model_validate(config).build_lineage_store()


async def test_two_workers_resolve_like_gyms_own_stores(
    ledger_server: ServerProcess, tmp_path: Path, control_env: str
) -> None:
    one, two = worker(ledger_server, tmp_path), worker(ledger_server, tmp_path)
    file_store = FileLineageStore(tmp_path / "gym-file")
    memory_store = InMemoryLineageStore()
    stores = [one, file_store, memory_store]
    rid = "7-0"

    async def everyone_resolves(items: list[dict[str, Any]]) -> Any:
        # The other worker answers; Gym's stores (same commits) give the expected answer.
        mine = await two.resolve(rid, items)
        assert mine == await file_store.resolve(rid, items)
        assert mine == await memory_store.resolve(rid, items)
        return mine

    first = [user("2+2?")]
    assert (await everyone_resolves(first)).status == ParentResolutionStatus.ROOT
    assert await two.has_rows(rid) is False

    root = commit(rid, "c1", first, "4")
    for store in stores:
        await store.record(root)
    # Read-after-write across workers: worker two sees worker one's row at once.
    second = conversation_after(root, "and 3+3?")
    resolved = await everyone_resolves(second)
    assert resolved.status == ParentResolutionStatus.RESOLVED
    assert resolved.match.model_call_id == "c1"
    assert resolved.match.prev_len == root.record.cum_len
    assert resolved.match.chain_hash == root.record.chain_hash
    assert resolved.match.staging_chain == ("7-0/c1",)
    assert resolved.match.cumulative_token_ids == ()
    assert await two.has_rows(rid) is True

    child = commit(rid, "c2", second, "6", parent=root)
    for store in (two, file_store, memory_store):
        await store.record(child)
    third = conversation_after(child, "and 4+4?")
    grandchild = await everyone_resolves(third)
    assert grandchild.match.model_call_id == "c2"
    assert grandchild.match.staging_chain == ("7-0/c1", "7-0/c2")

    # Never a guess: history nobody recorded, and a rewritten context, stay unresolved.
    stranger = [user("2+2?"), assistant("5", "msg-x"), user("sure?")]
    assert (await everyone_resolves(stranger)).reason == "no_match"
    rewritten = [user("what is 2+2?"), *root.response_items, user("and 3+3?")]
    assert (await everyone_resolves(rewritten)).status == ParentResolutionStatus.UNRESOLVED

    # The manifest is Gym's: it validates as its wire model and gives back the records.
    manifest = RolloutManifest.model_validate(await two.manifest(rid))
    assert manifest.records == [root.record, child.record]
    assert manifest.model_dump(mode="json") == await file_store.manifest(rid)
    for store in (one, two, file_store):
        await store.close()


async def test_ambiguous_siblings_resolve_as_gyms_matcher(
    ledger_server: ServerProcess, tmp_path: Path
) -> None:
    one, two = worker(ledger_server, tmp_path), worker(ledger_server, tmp_path)
    memory_store = InMemoryLineageStore()
    rid = "8-0"
    first = [user("pick")]
    # Two calls with the same answer to the same context but different token sequences.
    left = commit(rid, "c1", first, "x")
    right = commit(rid, "c2", first, "x", delta_len=4)
    for store in (one, memory_store):
        await store.record(left)
    await two.record(right)
    await memory_store.record(right)
    items = conversation_after(left, "next")
    mine = await two.resolve(rid, items)
    assert mine == await memory_store.resolve(rid, items)
    assert (mine.status, mine.reason) == (ParentResolutionStatus.UNRESOLVED, "ambiguous")
    await one.close()
    await two.close()


async def test_conflicting_rerecord_fails_identical_is_a_no_op(
    ledger_server: ServerProcess, tmp_path: Path, control_env: str
) -> None:
    one, two = worker(ledger_server, tmp_path), worker(ledger_server, tmp_path)
    file_store = FileLineageStore(tmp_path / "gym-file")
    rid = "9-0"
    root = commit(rid, "c1", [user("hi")], "hello")
    other = commit(rid, "c1", [user("hi")], "hello", response_id="resp-other")
    await one.record(root)
    await file_store.record(root)
    await two.record(root)  # identical, from the other worker: a no-op
    await file_store.record(root)
    for store in (two, file_store):
        with pytest.raises(ValueError, match="conflicting lineage record for model call c1"):
            await store.record(other)
    manifest = await one.manifest(rid)
    assert manifest == await file_store.manifest(rid)
    assert [r["response_id"] for r in manifest["records"]] == ["resp-c1"]

    await two.record_failure(rid, "c2", "worker_capture_failed")
    await one.record_failure(rid, "c2", "worker_capture_failed")  # deduplicated
    failures = RolloutManifest.model_validate(await one.manifest(rid)).failures
    assert [(f.model_call_id, f.reason) for f in failures] == [("c2", "worker_capture_failed")]
    await one.close()
    await two.close()


async def test_fenced_rollout_discards_rows_without_failing(
    ledger_server: ServerProcess, tmp_path: Path, control_env: str
) -> None:
    one = worker(ledger_server, tmp_path)
    rid = "10-0"
    root = commit(rid, "c1", [user("hi")], "hello")
    await one.record(root)
    await retire(ledger_server, rid)

    late = commit(rid, "c2", conversation_after(root, "more"), "ok", parent=root)
    await one.record(late)  # discarded by the fence: logged, never raised
    await one.record_failure(rid, "c3", "unresolved_parent")
    resolution = await one.resolve(rid, conversation_after(root, "more"))
    assert (resolution.status, resolution.reason) == (
        ParentResolutionStatus.UNRESOLVED,
        "no_match",
    )
    assert await one.has_rows(rid) is True  # a late continuation is poisoned, not a new root
    with pytest.raises(RolloutRetiredError, match="rollout 10-0 is retired"):
        await one.manifest(rid)
    async with httpx.AsyncClient(base_url=ledger_server.base_url) as http:
        keys = (await http.get("/v1/orphaned-staging-keys")).json()["keys"]
    assert [k["staging_key"] for k in keys] == ["10-0/c2"]
    await one.close()


async def test_bad_rollout_id_is_gyms_value_error(
    ledger_server: ServerProcess, tmp_path: Path
) -> None:
    one = worker(ledger_server, tmp_path)
    with pytest.raises(ValueError, match="Invalid rollout id"):
        await one.resolve("bad id", [user("x")])
    with pytest.raises(ValueError, match="Invalid rollout id"):
        await one.has_rows("../x")
    await one.close()


def test_importing_the_plugin_pulls_in_no_server_stack() -> None:
    probe = "import json, sys\nimport ledger.gym_plugin\nprint(json.dumps(sorted(sys.modules)))\n"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    loaded = set(json.loads(out.stdout))
    assert "ledger.gym_plugin" in loaded and "nemo_gym.token_id_capture" in loaded
    forbidden = ("sqlalchemy", "alembic", "aiosqlite", "asyncpg", "fastapi", "uvicorn")
    assert not {m for m in loaded if m.split(".")[0] in forbidden}
    ours = {m for m in loaded if m.startswith("ledger.")}
    assert ours <= {
        "ledger.client_connections",  # httpx's pool limits only
        "ledger.gym_plugin",
        "ledger.gym_plugin.capture_ledger",
        "ledger.gym_plugin.rows",
    }


def test_commit_type_is_gyms() -> None:
    # The helper builds Gym's own value, so every test above records through Gym's type.
    assert isinstance(commit("1-0", "c1", [user("x")], "y"), CaptureLedgerCommit)


async def test_ingest_and_read_tokens_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data_dir = tmp_path / "ledger-data"
    server = ledger_serve_process(
        data_dir=data_dir,
        database_url=f"sqlite+aiosqlite:///{data_dir / 'ledger.db'}",
        env={"LEDGER_INGEST_TOKEN": "ingest-secret", "LEDGER_READ_TOKEN": "read-secret"},
    ).start()
    try:
        monkeypatch.setenv("LEDGER_INGEST", "ingest-secret")
        monkeypatch.setenv("LEDGER_READ", "read-secret")
        config = gym_config(server, tmp_path / "tokens")
        config["token_id_capture"]["lineage_store_kwargs"].update(
            token_env="LEDGER_INGEST", read_token_env="LEDGER_READ"
        )
        store = TokenIdCaptureConfig.model_validate(config).build_lineage_store()
        root = commit("11-0", "c1", [user("hi")], "hello")
        await store.record(root)
        resolved = await store.resolve("11-0", conversation_after(root, "more"))
        assert resolved.match.model_call_id == "c1"
        assert await store.has_rows("11-0") is True
        await store.close()

        anonymous = LedgerCaptureLedger(server.base_url)
        with pytest.raises(ValueError, match="HTTP 401 missing or invalid ingest bearer token"):
            await anonymous.record(root)
        with pytest.raises(ValueError, match="HTTP 401 missing or invalid read bearer token"):
            await anonymous.has_rows("11-0")
        await anonymous.close()
        monkeypatch.delenv("LEDGER_READ")
        with pytest.raises(ValueError, match="LEDGER_READ is not set"):
            LedgerCaptureLedger(server.base_url, read_token_env="LEDGER_READ")
    finally:
        server.stop()


async def test_gyms_own_wiring_serves_the_manifest_from_the_plugin(
    ledger_server: ServerProcess, tmp_path: Path, control_env: str
) -> None:
    """Gym's model-server wiring accepts the plug-in with external staging and two workers
    (a process-shared CaptureLedger), and its own control route serves the ledger's manifest."""
    from fastapi import FastAPI
    from nemo_gym.base_responses_api_model import (
        ModelCallCaptureConfig,
        install_model_call_capture,
    )

    app = FastAPI()
    install_model_call_capture(
        app,
        ModelCallCaptureConfig(),
        global_config_dict=gym_config(ledger_server, tmp_path / "tokens"),
        num_workers=2,
    )
    rid = "12-0"
    one = worker(ledger_server, tmp_path)
    root = commit(rid, "c1", [user("hi")], "hello")
    await one.record(root)
    route = f"/training-token-capture/control/rollouts/{rid}/manifest"
    headers = {"Authorization": f"Bearer {control_env}"}
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gym-model-server") as gym:
        served = await gym.get(route, headers=headers)
        assert served.status_code == 200, served.text
        assert RolloutManifest.model_validate(served.json()).records == [root.record]
        assert served.json() == await one.manifest(rid)
        assert (await gym.get(route)).status_code == 401
        await retire(ledger_server, rid)
        gone = await gym.get(route, headers=headers)
    assert (gone.status_code, gone.json()) == (400, {"detail": "rollout 12-0 is retired"})
    await one.close()
