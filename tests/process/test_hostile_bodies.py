"""Hostile bodies against a real ``ledger serve`` process (issue 14): 1 MiB of ``{}`` items
answered 422 with a few KiB, the server's memory growing by a small multiple of the body at
most, and the server still answering afterwards.

Two shapes per route: ``{}`` items as tight as JSON spells them (refused before parsing:
their parsed form would cost 25 times the body), and the same items spaced out to the densest
body the parser accepts (parsed and validated, every item wrong)."""

from __future__ import annotations

import socket
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from ledger.app.http.json_body import BYTES_PER_CONTAINER
from tests.support.server import ServerProcess

MIB = 1024 * 1024
# An error body is "a few KiB": the first errors, each cut short.
MAX_ERROR_BODY = 8 * 1024
# Peak RSS may grow by at most this many times the body (issue 14 saw 1,100 times).
MAX_RSS_GROWTH_FACTOR = 10

ROUTES = {
    "lineage row": ("/v1/rollouts/r1/ledger/rows", b"[", b"]"),
    "row staging chain": (
        "/v1/rollouts/r1/ledger/rows",
        b'{"model_call_id": "c", "staging_chain": [',
        b"]}",
    ),
    "retire": ("/training-token-capture/control/rollouts/retire", b'{"rollout_ids": [', b"]}"),
    "capture batch": ("/v1/model-calls/batch", b'{"items": [', b"]}"),
    "capture": ("/v1/rollouts/r1/model-calls", b'{"dialect": [', b"]}"),
    "observations": ("/v1/rollouts/r1/observations", b'{"source": "a", "records": [', b"]}"),
    "result gaps": ("/v1/rollouts/r1/result", b'{"gaps": [', b"]}"),
}


def empty_items(prefix: bytes, suffix: bytes, item: bytes) -> bytes:
    count = (MIB - len(prefix) - len(suffix)) // (len(item) + 1)
    return prefix + b",".join([item] * count) + suffix


def hostile_bodies() -> list[tuple[str, str, bytes]]:
    spaced = b"{}".ljust(BYTES_PER_CONTAINER)
    return [
        (f"{name} ({shape})", url, empty_items(prefix, suffix, item))
        for name, (url, prefix, suffix) in ROUTES.items()
        for shape, item in (("tight", b"{}"), ("spaced", spaced))
    ]


def rss_kib(pid: int) -> tuple[int, int]:
    """(current, peak) resident set size of ``pid`` in KiB, from /proc."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        fields[name] = value.strip()
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


def reset_peak_rss(pid: int) -> None:
    # Writing 5 to clear_refs resets VmHWM to the current RSS (Linux >= 4.0).
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def test_hostile_bodies_get_bounded_errors_in_bounded_memory(
    tmp_path: Path, database_url: str
) -> None:
    headers = {"content-type": "application/json", "authorization": "Bearer control-secret"}
    growth: dict[str, int] = {}
    with (
        ServerProcess(
            data_dir=tmp_path,
            database_url=database_url,
            env={"LEDGER_CONTROL_TOKEN": "control-secret"},
        ) as server,
        httpx.Client(base_url=server.base_url, timeout=120) as http,
    ):
        assert server.process is not None
        pid = server.process.pid
        # Every route once with a small bad body: imports and caches are not growth.
        for url, _, _ in ROUTES.values():
            http.post(url, content=b"[]", headers=headers)
        events_before = http.get("/v1/events").json()["events"]
        for name, url, body in hostile_bodies():
            reset_peak_rss(pid)
            before, _ = rss_kib(pid)
            reply = http.post(url, content=body, headers=headers)
            _, peak = rss_kib(pid)
            growth[name] = peak - before
            assert reply.status_code == 422, (name, reply.status_code, reply.text[:300])
            assert len(reply.content) <= MAX_ERROR_BODY, (name, len(reply.content))
            assert http.get("/healthz").status_code == 200
        assert http.get("/v1/events").json()["events"] == events_before
    worst = max(growth, key=lambda name: growth[name])
    print(f"\npeak RSS growth per 1 MiB hostile body (KiB): {growth}; worst: {worst}")
    assert growth[worst] * 1024 < MAX_RSS_GROWTH_FACTOR * MIB, growth


# The body limit of the server below (LEDGER_MAX_BODY_BYTES, its default).
BODY_LIMIT = 16 * MIB
CONCURRENT_BODIES = 4


def capture_holding(items: bytes) -> bytes:
    """A capture whose opaque request holds ``items``, the whole body just under the limit."""
    head = b'{"model_call_id": "c1", "dialect": "chat", "request": {"messages": ['
    tail = b"]}, " + b'"response": {}}'
    return head + items[: BODY_LIMIT - len(head) - len(tail) - 64].rpartition(b",")[0] + tail


def short_value_bodies() -> dict[str, bytes]:
    """Shapes of many short strings (issue 31, 5: ``"a"`` items grew RSS ~75 times the body),
    each as big as the limit allows."""
    count = BODY_LIMIT // 4
    return {
        "one-character strings": capture_holding(b'"a",' * count),
        "short keys and values": capture_holding(
            b"{" + b",".join(b'"%x":""' % n for n in range(count // 3)) + b"},"
        ),
        "escaped quotes": capture_holding(b'"\\"",' * (count // 2)),
    }


def test_four_bodies_of_short_strings_at_once_stay_within_ten_times_the_body_limit(
    tmp_path: Path, database_url: str
) -> None:
    headers = {"content-type": "application/json"}
    with (
        ServerProcess(data_dir=tmp_path, database_url=database_url) as server,
        httpx.Client(base_url=server.base_url, timeout=300) as http,
    ):
        assert server.process is not None
        pid = server.process.pid
        http.post("/v1/rollouts/r0/model-calls", content=b"[]", headers=headers)  # warm up
        for name, body in short_value_bodies().items():
            assert len(body) <= BODY_LIMIT
            reset_peak_rss(pid)
            before, _ = rss_kib(pid)
            with ThreadPoolExecutor(CONCURRENT_BODIES) as pool:
                sent = [
                    pool.submit(
                        http.post, f"/v1/rollouts/r{n}/model-calls", content=body, headers=headers
                    )
                    for n in range(CONCURRENT_BODIES)
                ]
                replies = [future.result() for future in sent]
            _, peak = rss_kib(pid)
            for reply in replies:
                assert reply.status_code == 422, (name, reply.status_code, reply.text[:300])
                assert "JSON strings (keys included)" in reply.json()["detail"], name
            growth = (peak - before) * 1024
            assert growth < MAX_RSS_GROWTH_FACTOR * BODY_LIMIT, (name, growth // MIB)
        assert http.get("/v1/events").json()["events"] == []


def raw_post(port: int, path: str, body: bytes, *, send_all: bool = True) -> socket.socket:
    """A POST on its own connection, the body sent whole or only its first half."""
    conn = socket.create_connection(("127.0.0.1", port), timeout=60)
    head = (
        f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    ).encode()
    conn.sendall(head + (body if send_all else body[: len(body) // 2]))
    return conn


def status_of(conn: socket.socket) -> int:
    reply = conn.recv(64)
    return int(reply.split(b" ", 2)[1])


def test_a_large_body_waits_for_the_one_in_flight_and_small_ones_pass(
    tmp_path: Path, database_url: str
) -> None:
    """Two 2 MiB captures with 3 MiB of budget for large bodies (and a 3 MiB body limit): while
    the first is still being sent, the second is not read (no answer), a small capture is
    answered; once the first is whole, both are stored."""
    big = [capture_of_size(n, 2 * MIB) for n in range(2)]
    env = {
        "LEDGER_LARGE_BODIES_IN_FLIGHT_BYTES": str(3 * MIB),
        "LEDGER_MAX_BODY_BYTES": str(3 * MIB),
    }
    with (
        ServerProcess(data_dir=tmp_path, database_url=database_url, env=env) as server,
        httpx.Client(base_url=server.base_url, timeout=60) as http,
    ):
        first = raw_post(server.port, "/v1/rollouts/big0/model-calls", big[0], send_all=False)
        # The first holds its share once its request line and headers are read: a small
        # request after it shows that they were.
        small = {"dialect": "chat", "request": {}, "response": {}}
        assert http.post("/v1/rollouts/small/model-calls", json=small).status_code == 201
        second = raw_post(server.port, "/v1/rollouts/big1/model-calls", big[1])
        assert http.post("/v1/rollouts/small/model-calls", json=small).status_code == 201
        second.settimeout(2)
        with pytest.raises(TimeoutError):
            second.recv(64)  # not answered: it waits for the first's bytes
        first.sendall(big[0][len(big[0]) // 2 :])
        second.settimeout(60)
        assert status_of(first) == 201
        assert status_of(second) == 201
        first.close()
        second.close()
        stored = http.get("/v1/events", params={"limit": 10}).json()["events"]
        assert sorted(e["rollout_id"] for e in stored if e["rollout_id"].startswith("big")) == [
            "big0",
            "big1",
        ]


def capture_of_size(n: int, size: int) -> bytes:
    head = b'{"model_call_id": "big%d", "dialect": "chat", "request": {"text": "' % n
    tail = b'"}, "response": {}}'
    return head + b"x" * (size - len(head) - len(tail)) + tail
