"""The server's entry points freeze what their start made and set the switch interval
(log/collection.py), each in its own process: ``ledger serve`` before uvicorn runs the app, and
the app factory of its workers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

# What the process's collector and interpreter show, printed as one JSON line.
REPORT = """json.dumps({"frozen": gc.get_freeze_count(), "tracked": len(gc.get_objects()),
            "switch_ms": sys.getswitchinterval() * 1000})"""
# uvicorn.run replaced by a probe: the process reports, then exits.
SERVE = f"""
import gc, json, sys
import uvicorn
def probe(app, **options):
    print({REPORT})
uvicorn.run = probe
from ledger.app.cli.main import main
main(["serve", "--upgrade", "--port", "0"], standalone_mode=False)
"""
FACTORY = f"""
import gc, json, sys
from ledger.app.http.app import create_app_from_environment
create_app_from_environment()
print({REPORT})
"""


def _report(script: str, data_dir: Path, **settings: str) -> dict[str, float]:
    env = {**os.environ, "LEDGER_DATA_DIR": str(data_dir), **settings}
    env.pop("LEDGER_DATABASE_URL", None)
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def test_serve_freezes_its_start_before_running_the_app(tmp_path: Path) -> None:
    report = _report(SERVE, tmp_path)
    assert report["switch_ms"] == 1.0  # the setting's default, not Python's 5 ms
    # The imports and the app: tens of thousands of objects out of the collector's sight,
    # and next to nothing left for a full collection to traverse.
    assert report["frozen"] > 50_000
    assert report["tracked"] < report["frozen"] // 10


def test_each_workers_app_factory_freezes_its_start(tmp_path: Path) -> None:
    report = _report(FACTORY, tmp_path, LEDGER_SWITCH_INTERVAL_MS="2.5")
    assert report["switch_ms"] == 2.5
    assert report["frozen"] > 50_000
    assert report["tracked"] < report["frozen"] // 10
