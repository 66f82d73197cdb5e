"""Shared fixtures. Store-facing tests take ``database_url`` and run once per backend."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from ledger.app.areas import default_catalogue, write_side_projectors
from ledger.app.config import Settings
from ledger.app.http.app import create_app
from ledger.log.store import LedgerStore
from tests.support import socket_origins
from tests.support.databases import (
    fresh_postgres_database,
    require_postgres,
    sqlite_url,
)
from tests.support.health_rules import watch_rules
from tests.support.templates import (
    PostgresCopies,
    copy_sqlite_template,
    migrated_postgres_template,
    migrated_sqlite_template,
)
from tests.support.views import views_caught_up


def pytest_configure(config: pytest.Config) -> None:
    """The `ledger serve` processes the suite starts run the views' follower in-server: a
    projector process per server costs a second of imports each, hundreds of times. The suite
    about the process itself (tests/process/test_projector_process.py) asks for the product's
    default, the process, with LEDGER_PROJECTOR=process."""
    os.environ.setdefault("LEDGER_PROJECTOR", "in-server")


@pytest.fixture(autouse=True)
def _health_rules_do_not_raise(request: pytest.FixtureRequest) -> Iterator[None]:
    """A health check that raises fails the test (tests/support/health_rules.py) unless the
    test is marked ``health_check_errors(check, ...)`` with that check."""
    with watch_rules() as raised:
        yield
    marker = request.node.get_closest_marker("health_check_errors")
    expected = set(marker.args) if marker is not None else set()
    unexpected = [line for line in raised if line.split(":", 1)[0] not in expected]
    if unexpected:
        pytest.fail("a health check raised:\n" + "\n".join(unexpected[:10]), pytrace=False)


@pytest.fixture(scope="session", autouse=True)
def _socket_origins() -> Iterator[None]:
    """A socket left unclosed fails whatever test the garbage collector interrupts: its
    failure names where the socket was opened (tests/support/socket_origins.py)."""
    undo = socket_origins.install()
    yield
    undo()


# scripts/test runs the suite on two pytest-xdist workers (--dist loadgroup). The slow tests,
# which start server processes, go first, so that the longest ones never make the tail of the
# run; each hostile suite of tests/suites stays on one worker per backend (they load both cores
# on their own and would otherwise meet on the same moments), the rest is spread as it comes.
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.parent.name == "suites" and item.get_closest_marker("slow") is not None:
            backend = "postgres" if item.get_closest_marker("postgres") else "sqlite"
            item.add_marker(pytest.mark.xdist_group(f"hostile-suites-{backend}"))
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]


@pytest.fixture(params=BACKENDS)
async def empty_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A fresh, empty database on each backend (no schema yet)."""
    if request.param == "sqlite":
        yield sqlite_url(tmp_path)
        return
    require_postgres()
    async with fresh_postgres_database() as url:
        yield url


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return migrated_sqlite_template(tmp_path_factory.mktemp("sqlite-template"))


@pytest.fixture(scope="session")
def postgres_copies() -> Iterator[PostgresCopies]:
    """Copies of one PostgreSQL database migrated per session, made ahead while tests run."""
    require_postgres()
    with migrated_postgres_template() as name, PostgresCopies(name) as copies:
        yield copies


@pytest.fixture(params=BACKENDS)
async def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A fresh database on each backend, at head: a copy of one migrated per session (the
    migration chain itself is tested from empty databases in tests/migrations)."""
    if request.param == "sqlite":
        yield copy_sqlite_template(request.getfixturevalue("sqlite_template"), tmp_path)
        return
    require_postgres()
    copies: PostgresCopies = request.getfixturevalue("postgres_copies")
    async with copies.url() as url:
        yield url


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[LedgerStore]:
    opened = LedgerStore(database_url, default_catalogue(), write_side_projectors())
    await opened.open()
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Settings:
    return Settings(
        data_dir=tmp_path / "data",
        database_url=database_url,
        control_token="control-secret",
        # The in-process apps keep their views with a follower task; the tests that start
        # `ledger serve` run the projector process, the default.
        projector="in-server",
    )


@pytest.fixture
async def app(settings: Settings) -> AsyncIterator[FastAPI]:
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """The app over ASGI. Before a read that follows writes, the client waits for the views to
    catch up, so a test's run-level reads (summaries, SQL views, export) see what it wrote:
    they answer from the views as they are, by design (tests/api/test_freshness.py pins that
    rule itself). The wait comes before the read, not after each write, so that the views
    apply a test's writes a batch at a time, as they do in production. A test that reads by
    another way (SQL, the command line, the app's own objects) after writing waits itself:
    ``await views_caught_up(app)``."""
    written = False

    async def after_writes(response: httpx.Response) -> None:
        nonlocal written
        if response.request.method not in ("GET", "HEAD"):
            written = True

    async def before_reads(request: httpx.Request) -> None:
        nonlocal written
        if written and request.method in ("GET", "HEAD"):
            written = False
            await views_caught_up(app)

    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(
        transport=transport,
        base_url="http://localhost",
        event_hooks={"request": [before_reads], "response": [after_writes]},
    ) as http:
        yield http


CONTROL_HEADERS = {"Authorization": "Bearer control-secret"}
