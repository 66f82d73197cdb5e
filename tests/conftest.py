"""Shared fixtures. Store-facing tests take ``database_url`` and run once per backend."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from ledger.app.areas import default_catalogue, default_projectors
from ledger.app.config import Settings
from ledger.app.http.app import create_app
from ledger.log.store import LedgerStore
from tests.support.databases import (
    fresh_postgres_database,
    require_postgres,
    sqlite_url,
)
from tests.support.templates import (
    PostgresCopies,
    copy_sqlite_template,
    migrated_postgres_template,
    migrated_sqlite_template,
)


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
    opened = LedgerStore(database_url, default_catalogue(), default_projectors())
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
    )


@pytest.fixture
async def app(settings: Settings) -> AsyncIterator[FastAPI]:
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
        yield http


CONTROL_HEADERS = {"Authorization": "Bearer control-secret"}
