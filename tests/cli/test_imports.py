"""The ``ledger`` command and the projector process start without the web framework.

``ledger serve`` starts a projector beside itself and starts it again after a crash; the
projector's start is mostly imports, and FastAPI and its OpenAPI models were a large share of
them. Only the app (``ledger serve``'s server) imports the framework.
"""

from __future__ import annotations

import subprocess
import sys

WEB_MODULES = ("fastapi", "starlette", "uvicorn")


def modules_after_importing(module: str, among: tuple[str, ...] = WEB_MODULES) -> set[str]:
    """Those of ``among`` a fresh interpreter holds after importing ``module``."""
    probe = f"import sys, {module}\nprint(' '.join(m for m in {among!r} if m in sys.modules))\n"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    return set(done.stdout.split())


def test_the_command_line_and_the_projector_import_no_web_framework() -> None:
    assert modules_after_importing("ledger.app.cli.main") == set()
    assert modules_after_importing("ledger.app.projector_child") == set()


def test_the_projector_the_server_starts_imports_no_command() -> None:
    commands = ("ledger.app.cli.main", "ledger.app.cli.core", "ledger.app.cli.backup")
    assert modules_after_importing("ledger.app.projector_child", commands) == set()


def test_the_app_does_import_it() -> None:
    # The probe itself sees the framework where it is imported.
    assert "fastapi" in modules_after_importing("ledger.app.http.app")
