"""Settings and bootstrap security defaults: safe binds, the control token file, empty tokens."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger.app.bootstrap import CONTROL_TOKEN_FILE, open_ledger
from ledger.app.cli.main import main
from ledger.app.config import Settings, is_loopback_host
from ledger.client_connections import IDLE_CONNECTION_EXPIRY_S, client_limits
from ledger.log import migrate
from ledger.log.errors import UnsafeConfiguration
from tests.support.databases import sqlite_url


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.9.10", "localhost", "::1", "[::1]"])
def test_loopback_hosts(host: str) -> None:
    assert is_loopback_host(host)
    Settings(host=host).check_bind_is_safe()


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.7", "ledger.example", ""])
def test_a_non_loopback_bind_without_tokens_is_refused(host: str) -> None:
    assert not is_loopback_host(host)
    with pytest.raises(UnsafeConfiguration) as refused:
        Settings(host=host).check_bind_is_safe()
    message = refused.value.message
    assert repr(host) in message
    assert "LEDGER_INGEST_TOKEN and LEDGER_READ_TOKEN" in message
    assert "--insecure" in message


def test_the_refusal_names_only_the_missing_token() -> None:
    with pytest.raises(UnsafeConfiguration, match=r"without LEDGER_READ_TOKEN; set them"):
        Settings(host="0.0.0.0", ingest_token="i").check_bind_is_safe()
    with pytest.raises(UnsafeConfiguration, match=r"without LEDGER_INGEST_TOKEN; set them"):
        Settings(host="0.0.0.0", read_token="r").check_bind_is_safe()


def test_a_non_loopback_bind_with_both_tokens_or_insecure_is_allowed() -> None:
    Settings(host="0.0.0.0", ingest_token="i", read_token="r").check_bind_is_safe()
    Settings(host="0.0.0.0", insecure=True).check_bind_is_safe()


def test_serve_refuses_the_unsafe_bind_before_touching_anything(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    result = CliRunner().invoke(
        main, ["--data-dir", str(data_dir), "serve", "--host", "0.0.0.0"], catch_exceptions=False
    )
    assert result.exit_code == 2
    assert "refusing to bind non-loopback host '0.0.0.0'" in result.output
    assert "--insecure" in result.output
    assert not data_dir.exists(), "nothing is created for a refused start"


@pytest.mark.parametrize("name", ["CONTROL_TOKEN", "INGEST_TOKEN", "READ_TOKEN"])
def test_empty_env_tokens_mean_unset(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setenv(f"LEDGER_{name}", "")
    assert getattr(Settings(), name.lower()) is None
    monkeypatch.setenv(f"LEDGER_{name}", "set")
    token = getattr(Settings(), name.lower())
    assert token is not None and token.get_secret_value() == "set"


def test_empty_tokens_do_not_make_a_bind_safe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEDGER_INGEST_TOKEN", "")
    monkeypatch.setenv("LEDGER_READ_TOKEN", "")
    with pytest.raises(UnsafeConfiguration):
        Settings(host="0.0.0.0").check_bind_is_safe()


async def start_and_stop(settings: Settings) -> str:
    running = await open_ledger(settings)
    try:
        return running.control_token
    finally:
        await running.close()


@pytest.fixture
async def migrated_sqlite(tmp_path: Path) -> str:
    url = sqlite_url(tmp_path)
    await migrate.upgrade(url)
    return url


async def test_the_control_token_file_is_created_0600_and_reused(
    migrated_sqlite: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings(data_dir=tmp_path / "data", database_url=migrated_sqlite)
    token_file = tmp_path / "data" / CONTROL_TOKEN_FILE
    previous_umask = os.umask(0)  # the mode must not depend on the caller's umask
    try:
        with caplog.at_level(logging.DEBUG):
            first = await start_and_stop(settings)
    finally:
        os.umask(previous_umask)
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert token_file.read_text().strip() == first
    assert len(first) >= 32
    assert str(token_file) in caplog.text
    assert first not in caplog.text

    caplog.clear()
    with caplog.at_level(logging.DEBUG):
        second = await start_and_stop(settings)
    assert second == first
    assert first not in caplog.text
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600


async def test_an_explicit_control_token_creates_no_file(
    migrated_sqlite: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings(
        data_dir=tmp_path / "data", database_url=migrated_sqlite, control_token="explicit-one"
    )
    with caplog.at_level(logging.DEBUG):
        assert await start_and_stop(settings) == "explicit-one"
    assert not (tmp_path / "data" / CONTROL_TOKEN_FILE).exists()
    assert "explicit-one" not in caplog.text


async def test_an_empty_control_token_file_is_a_clear_error(
    migrated_sqlite: str, tmp_path: Path
) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / CONTROL_TOKEN_FILE).write_text("\n")
    settings = Settings(data_dir=tmp_path / "data", database_url=migrated_sqlite)
    with pytest.raises(UnsafeConfiguration, match="is empty; delete it to regenerate"):
        await open_ledger(settings)


def test_the_ledgers_clients_drop_idle_connections_before_the_server_does() -> None:
    # ledger.client_connections: a request sent on a connection the server is closing is lost.
    defaults = Settings()
    assert defaults.keep_alive_timeout_s > IDLE_CONNECTION_EXPIRY_S
    assert defaults.header_timeout_s > IDLE_CONNECTION_EXPIRY_S
    assert client_limits().keepalive_expiry == IDLE_CONNECTION_EXPIRY_S
