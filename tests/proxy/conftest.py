"""One fake upstream and one real ``ledger serve`` per backend for the module that asks.

The server proxies to the fake upstream as ``fake`` (with an API key from the environment) and
to a closed port as ``dead``; its read timeout is short, so the fake's slow scenario times out.
"""

from __future__ import annotations

import asyncio
import json
import queue
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.proxy.support import (
    MAX_REQUEST_BYTES,
    MAX_RESPONSE_BYTES,
    READ_TIMEOUT_S,
    UPSTREAM_KEY,
    Proxy,
)
from tests.support.databases import fresh_postgres_database, require_postgres, sqlite_url
from tests.support.fake_upstream import FakeUpstreamProcess
from tests.support.server import ServerProcess, free_port


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeUpstreamProcess]:
    process = FakeUpstreamProcess(tmp_path_factory.mktemp("upstream")).start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(
    scope="module",
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ],
)
def proxy(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    upstream: FakeUpstreamProcess,
) -> Iterator[Proxy]:
    directory: Path = tmp_path_factory.mktemp(f"proxy-{request.param}")
    release_database: Callable[[], None] | None = None
    if request.param == "sqlite":
        url = sqlite_url(directory)
    else:
        require_postgres()
        url, release_database = _postgres_database_in_thread()
    env = {
        "LEDGER_UPSTREAMS": json.dumps(
            {"fake": upstream.url + "/v1", "dead": f"http://127.0.0.1:{free_port()}"}
        ),
        "LEDGER_UPSTREAM_KEY_ENVS": json.dumps({"fake": "FAKE_UPSTREAM_KEY"}),
        "FAKE_UPSTREAM_KEY": UPSTREAM_KEY,
        "LEDGER_PROXY_READ_TIMEOUT_S": str(READ_TIMEOUT_S),
        "LEDGER_PROXY_MAX_REQUEST_BYTES": str(MAX_REQUEST_BYTES),
        "LEDGER_PROXY_MAX_RESPONSE_BYTES": str(MAX_RESPONSE_BYTES),
        "LEDGER_CONTROL_TOKEN": "control-secret",
    }
    server = ServerProcess(
        data_dir=directory / "data",
        database_url=url,
        env=env,
        argv=("ledger", "serve", "--upgrade"),
    )
    (directory / "data").mkdir()
    server.start(timeout=60)
    try:
        yield Proxy(server=server, upstream=upstream, mirror_dir=directory / "data" / "mirror")
    finally:
        server.stop()
        if release_database is not None:
            release_database()


def _postgres_database_in_thread() -> tuple[str, Callable[[], None]]:
    """A fresh PostgreSQL database held open by a thread's event loop until the event is set
    (the fixture is module-scoped and synchronous; the helper is an async context manager)."""
    ready: queue.Queue[str | BaseException] = queue.Queue()
    stop = threading.Event()

    async def hold() -> None:
        try:
            async with fresh_postgres_database() as url:
                ready.put(url)
                await asyncio.to_thread(stop.wait)
        except BaseException as exc:
            ready.put(exc)

    thread = threading.Thread(target=asyncio.run, args=(hold(),), daemon=True)
    thread.start()
    outcome = ready.get(timeout=60)
    if isinstance(outcome, BaseException):
        raise outcome

    def release() -> None:
        stop.set()
        thread.join(timeout=60)

    return outcome, release
