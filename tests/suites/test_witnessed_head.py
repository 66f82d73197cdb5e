"""A log that notices it lost or rewrote its tail (issue 31 §1): a real ``ledger serve``
publishes signed checkpoints; the store is then damaged the way a failing disk or a hand with
SQL would, and ``ledger verify``, ``ledger db check`` and the start of ``ledger serve`` must each
name the damage in a FAIL line (never a traceback), and ``serve`` must refuse to start."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import random
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ledger.log.checkpoints import sign_head
from tests.suites.cli import ledger_cli
from tests.support.databases import (
    postgres_unavailable_reason,
    postgres_url,
    sqlite_url,
)
from tests.support.server import ServerProcess, free_port

pytestmark = pytest.mark.slow

CONTROL_TOKEN = "head-control"
SERVER_ENV = {"LEDGER_CONTROL_TOKEN": CONTROL_TOKEN, "LEDGER_CHECKPOINT_INTERVAL_S": "0.05"}
CONTROL = "/training-token-capture/control"


@dataclass
class Store:
    data_dir: Path
    url: str

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return ledger_cli(self.url, self.data_dir, *args)

    def server(self) -> ServerProcess:
        return ServerProcess(data_dir=self.data_dir, database_url=self.url, env=SERVER_ENV)

    def serve_exit(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``ledger serve`` expected to refuse: what it printed and its exit status."""
        return subprocess.run(
            [sys.executable, "-m", "ledger", "serve", "--port", str(free_port()), *args],
            env={
                **os.environ,
                **SERVER_ENV,
                "LEDGER_DATA_DIR": str(self.data_dir),
                "LEDGER_DATABASE_URL": self.url,
            },
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )


def _upgrade(store: Store) -> None:
    store.data_dir.mkdir(mode=0o700, exist_ok=True)
    upgraded = store.cli("db", "upgrade")
    assert upgraded.returncode == 0, upgraded.stderr


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    data_dir = tmp_path / "data"
    if request.param == "sqlite":
        made = Store(data_dir, sqlite_url(tmp_path))
        _upgrade(made)
        yield made
        return
    reason = postgres_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    name = f"ledger_head_{os.getpid()}_{time.monotonic_ns()}"
    _psql("postgres", f'CREATE DATABASE "{name}"')
    try:
        made = Store(data_dir, postgres_url(name))
        _upgrade(made)
        yield made
    finally:
        _psql("postgres", f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Store:
    made = Store(tmp_path / "data", sqlite_url(tmp_path))
    _upgrade(made)
    return made


def _psql(database: str, sql: str) -> None:
    url = postgres_url(database, driver="postgresql")
    subprocess.run(["psql", url, "-v", "ON_ERROR_STOP=1", "-q", "-c", sql], check=True)


def _raw_sql(store: Store, *statements: str) -> None:
    """SQL as an operator with a database shell would run it (triggers and all)."""
    if store.url.startswith("sqlite"):
        path = store.url.split("///", 1)[1]
        with sqlite3.connect(path) as conn:
            for statement in statements:
                conn.execute(statement)
        return
    for statement in statements:
        _psql(store.url.rsplit("/", 1)[1], statement)


def _append_rows(base_url: str, rollout_id: str, count: int) -> int:
    """``count`` failure rows of one rollout, acknowledged; the seq of the last."""
    seq = 0
    with httpx.Client(base_url=base_url, timeout=60) as http:
        for n in range(count):
            response = http.post(
                f"/v1/rollouts/{rollout_id}/ledger/rows",
                json={"failure_reason": "worker_capture_failed", "model_call_id": f"c{n}"},
            )
            assert response.status_code in (200, 201), response.text
            seq = int(response.json()["seq"])
    return seq


def _checkpoint_reaches(base_url: str, seq: int, within: float = 60.0) -> dict[str, Any]:
    """Poll until the published checkpoint names ``seq``; the route's body."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        response = httpx.get(f"{base_url}/v1/checkpoints/latest", timeout=10)
        if response.status_code == 200 and response.json()["checkpoint"]["seq"] >= seq:
            body: dict[str, Any] = response.json()
            return body
        time.sleep(0.05)  # poll
    raise AssertionError(f"no checkpoint reached seq {seq} in {within} s")


def _assert_refused(store: Store, named: str) -> None:
    """``verify``, ``db check`` and ``serve`` each fail with a FAIL line containing ``named``."""
    verified = store.cli("verify", "--skip-projections")
    assert verified.returncode == 1, verified.stdout + verified.stderr
    assert any(
        line.startswith("FAIL") and named in line for line in verified.stdout.splitlines()
    ), verified.stdout
    checked = store.cli("db", "check")
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert named in checked.stderr, checked.stderr
    served = store.serve_exit()
    assert served.returncode == 1, served.stdout + served.stderr
    assert f"FAIL {named}" in served.stderr or named in served.stderr, served.stderr
    for output in (verified.stdout + verified.stderr, checked.stderr, served.stderr):
        assert "Traceback" not in output, output


def test_a_deleted_last_event_is_a_lost_tail(store: Store) -> None:
    with store.server() as server:
        last = _append_rows(server.base_url, "tail-r0", 5)
        _checkpoint_reaches(server.base_url, last)
    if store.url.startswith("sqlite"):
        _raw_sql(
            store,
            "DROP TRIGGER events_refuse_delete",
            f"DELETE FROM events WHERE seq = {last}",
        )
    else:
        _raw_sql(
            store,
            "ALTER TABLE events DISABLE TRIGGER USER",
            f"DELETE FROM events WHERE seq = {last}",
        )
    _assert_refused(store, f"the log ends at seq {last - 1} but reached seq {last}")
    verified = store.cli("verify", "--skip-projections")
    assert f"event {last} is missing (lost tail)" in verified.stdout, verified.stdout


# A reader in a process of its own: its snapshot keeps every checkpoint from copying what was
# committed after it into the database file.
_READER = (
    "import sqlite3, sys, time\n"
    "conn = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
    "conn.execute('BEGIN')\n"
    "conn.execute('SELECT count(*) FROM events').fetchone()\n"
    "print('reading', flush=True)\n"
    "time.sleep(600)  # poll: held until the test kills it\n"
)


def test_a_truncated_wal_loses_acknowledged_events_and_is_refused(sqlite_store: Store) -> None:
    with sqlite_store.server() as server:
        first = _append_rows(server.base_url, "wal-r0", 20)
    database = Path(sqlite_store.url.split("///", 1)[1])
    # The clean stop checkpointed the WAL into the database file. What follows lives only in
    # the WAL when the server and the reader are killed: the writer checkpoints after its
    # batches, but not past the reader's snapshot.
    reader = subprocess.Popen(
        [sys.executable, "-c", _READER, str(database)], stdout=subprocess.PIPE, text=True
    )
    server = sqlite_store.server().start()
    try:
        assert reader.stdout is not None and reader.stdout.readline() == "reading\n"
        last = _append_rows(server.base_url, "wal-r1", 30)
        _checkpoint_reaches(server.base_url, last)
    finally:
        server.kill()
        reader.kill()
        reader.communicate()
    wal = database.with_name(database.name + "-wal")
    assert wal.stat().st_size > 0
    os.truncate(wal, 0)
    database.with_name(database.name + "-shm").unlink(missing_ok=True)
    with sqlite3.connect(database) as conn:
        left = conn.execute("SELECT max(seq) FROM events").fetchone()[0]
    assert left == first  # acknowledged events were lost: the test's premise
    _assert_refused(sqlite_store, f"the log ends at seq {first} but reached seq {last}")
    verified = sqlite_store.cli("verify", "--skip-projections")
    assert f"events {first + 1}..{last} are missing (lost tail)" in verified.stdout


def _pages_of(database: Path, name: str) -> tuple[list[int], int]:
    """The pages of a table or index (SQLite's ``dbstat``) and the file's page size."""
    with sqlite3.connect(database) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = [
            row[0] for row in conn.execute("SELECT pageno FROM dbstat WHERE name = ?", (name,))
        ]
        page_size = int(conn.execute("PRAGMA page_size").fetchone()[0])
    return sorted(pages), page_size


def _write_noise(database: Path, page: int, page_size: int, seed: int) -> None:
    with database.open("r+b") as handle:
        handle.seek((page - 1) * page_size)
        handle.write(random.Random(seed).randbytes(page_size))


def test_random_bytes_in_the_file_are_refused_with_a_fail_line(sqlite_store: Store) -> None:
    with sqlite_store.server() as server:
        _append_rows(server.base_url, "flip-r0", 300)
    database = Path(sqlite_store.url.split("///", 1)[1])
    # A page of the log's own rows (a free page's bytes are read by no check, rightly).
    pages, page_size = _pages_of(database, "events")
    assert len(pages) >= 8
    _write_noise(database, pages[len(pages) // 2], page_size, seed=31)
    checked = sqlite_store.cli("db", "check")
    assert checked.returncode == 1
    assert "FAIL the database file is damaged (PRAGMA quick_check)" in checked.stderr
    served = sqlite_store.serve_exit()
    assert served.returncode == 1
    assert "FAIL the database file is damaged" in served.stderr
    verified = sqlite_store.cli("verify")
    assert verified.returncode == 1
    assert any(line.startswith("FAIL") for line in verified.stdout.splitlines()), (
        verified.stdout + verified.stderr
    )
    for output in (checked.stderr, served.stderr, verified.stdout + verified.stderr):
        assert "Traceback" not in output, output


def test_random_bytes_over_the_schema_are_refused_with_a_fail_line(sqlite_store: Store) -> None:
    """Damage where SQLite keeps the schema fails the first statement of any connection: the
    commands still answer with a FAIL line, never a traceback."""
    with sqlite_store.server() as server:
        _append_rows(server.base_url, "schema-r0", 20)
    database = Path(sqlite_store.url.split("///", 1)[1])
    pages, page_size = _pages_of(database, "sqlite_schema")
    for page in pages:
        if page != 1:  # the file's header: then it is not taken for a database at all
            _write_noise(database, page, page_size, seed=page)
    if pages == [1]:
        _write_noise(database, 1, page_size, seed=1)
    for command in (("db", "check"), ("verify",)):
        done = sqlite_store.cli(*command)
        output = done.stdout + done.stderr
        assert done.returncode == 1, output
        assert any(line.startswith("FAIL") for line in output.splitlines()), output
        assert "Traceback" not in output, output
    served = sqlite_store.serve_exit()
    assert served.returncode == 1
    assert "FAIL" in served.stderr and "Traceback" not in served.stderr, served.stderr


def test_a_fence_undone_by_hand_is_refused(store: Store) -> None:
    with store.server() as server:
        _append_rows(server.base_url, "fence-r0", 2)
        retired = httpx.post(
            f"{server.base_url}{CONTROL}/rollouts/retire",
            json={"rollout_ids": ["fence-r0"]},
            headers={"Authorization": f"Bearer {CONTROL_TOKEN}"},
        )
        assert retired.json() == {"removed": ["fence-r0"], "absent": []}
    _raw_sql(store, "UPDATE rollouts SET state = 'live' WHERE rollout_id = 'fence-r0'")
    _assert_refused(store, "rollout 'fence-r0' was retired at seq 3")


def test_a_checkpoint_signed_with_another_key_is_refused(store: Store, tmp_path: Path) -> None:
    with store.server() as server:
        last = _append_rows(server.base_url, "key-r0", 3)
        published = _checkpoint_reaches(server.base_url, last)
    forged = sign_head(
        Ed25519PrivateKey.generate(),
        seq=last,
        chain_hash=published["checkpoint"]["hash"],
        log_epoch=published["checkpoint"]["log_epoch"],
        at=datetime.now(UTC),
    )
    copy = tmp_path / "forged.json"
    copy.write_text(json.dumps({"checkpoint": forged.as_dict(), "public_key": "ignored"}))
    verified = store.cli("verify", "--skip-projections", "--checkpoint", str(copy))
    assert verified.returncode == 1
    assert "is not signed by this ledger's key" in verified.stdout, verified.stdout
    # The trainer's genuine copy checks.
    genuine = tmp_path / "genuine.json"
    genuine.write_text(json.dumps(published))
    verified = store.cli("verify", "--skip-projections", "--checkpoint", str(genuine))
    assert verified.returncode == 0, verified.stdout
    # A forged line in the witness file itself keeps the server from starting.
    with (store.data_dir / "checkpoints.jsonl").open("ab") as witness:
        witness.write(forged.to_line())
    _assert_refused(store, "is not signed by this ledger's key")


def test_a_store_refused_at_start_can_be_served_read_only(sqlite_store: Store) -> None:
    with sqlite_store.server() as server:
        last = _append_rows(server.base_url, "ro-r0", 3)
        _checkpoint_reaches(server.base_url, last)
    _raw_sql(
        sqlite_store,
        "DROP TRIGGER events_refuse_delete",
        f"DELETE FROM events WHERE seq = {last}",
    )
    server = ServerProcess(
        data_dir=sqlite_store.data_dir,
        database_url=sqlite_store.url,
        env={**SERVER_ENV, "LEDGER_READ_ONLY": "true"},
    ).start()
    try:
        events = httpx.get(f"{server.base_url}/v1/events", params={"after": 0}).json()
        assert [event["seq"] for event in events["events"]] == list(range(1, last))
        refused = httpx.post(
            f"{server.base_url}/v1/rollouts/ro-r0/ledger/rows",
            json={"failure_reason": "worker_capture_failed", "model_call_id": "late"},
        )
        assert refused.status_code == 503
        assert "reads only" in refused.json()["detail"]
        ready = httpx.get(f"{server.base_url}/readyz").json()
        assert ready["mode"] == "read-only"
    finally:
        server.stop()
    # Nothing was published or written while it served read-only.
    again = ledger_cli(sqlite_store.url, sqlite_store.data_dir, "verify", "--skip-projections")
    assert f"the log ends at seq {last - 1} but reached seq {last}" in again.stdout


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def check_inclusion_proof(proof: dict[str, Any]) -> bool:
    """A third party's verifier, written from docs/operations.md ("Inclusion proofs") alone."""
    checkpoint = proof["checkpoint"]
    key_bytes = base64.b64decode(proof["public_key"])
    if hashlib.sha256(key_bytes).hexdigest() != checkpoint["key_id"]:
        return False
    message = _canonical({k: v for k, v in checkpoint.items() if k != "signature"})
    Ed25519PublicKey.from_public_bytes(key_bytes).verify(
        base64.b64decode(checkpoint["signature"]), message
    )
    if (
        hashlib.sha256(proof["payload"].encode()).hexdigest()
        != proof["events"][0]["payload_sha256"]
    ):
        return False
    chained = proof["prev_hash"]
    for event in proof["events"]:
        parts = bytes.fromhex(chained) + _canonical(event["header"])
        chained = hashlib.sha256(parts + bytes.fromhex(event["payload_sha256"])).hexdigest()
        if chained != event["hash"]:
            return False
    last = proof["events"][-1]["header"]["seq"]
    return bool(chained == checkpoint["hash"] and last == checkpoint["seq"])


def test_an_inclusion_proof_checks_with_a_small_verifier(sqlite_store: Store) -> None:
    with sqlite_store.server() as server:
        last = _append_rows(server.base_url, "proof-r0", 6)
        _checkpoint_reaches(server.base_url, last)
        proof = httpx.get(f"{server.base_url}/v1/events/2/proof").json()
        assert proof["events"][0]["header"]["seq"] == 2
        assert json.loads(proof["payload"])["model_call_id"] == "c1"
        assert check_inclusion_proof(proof)
        # Any change to what is proved breaks the proof.
        tampered = json.loads(json.dumps(proof))
        tampered["payload"] = proof["payload"].replace("c1", "c9")
        assert not check_inclusion_proof(tampered)
        tampered = json.loads(json.dumps(proof))
        tampered["events"][0]["header"]["rollout_id"] = "other"
        assert not check_inclusion_proof(tampered)
        # An event newer than every checkpoint is proved by one signed on demand.
        newest = _append_rows(server.base_url, "proof-r1", 1)
        fresh = httpx.get(f"{server.base_url}/v1/events/{newest}/proof").json()
        assert check_inclusion_proof(fresh)
        missing = httpx.get(f"{server.base_url}/v1/events/{newest + 100}/proof")
        assert missing.status_code == 404
