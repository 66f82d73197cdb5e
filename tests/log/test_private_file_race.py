"""Processes creating the same private files at once (``serve --workers 2`` starting): a file
appears whole or not at all (log/private_files.py, ``publish_private_file``), so each process
ends with the same signing key and the same control token, and none reads one half written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

DIRECTORIES = 50
PROCESSES = 3

_CREATE = """
import sys
from pathlib import Path
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from ledger.log.checkpoint_key import load_or_create_signing_key
from ledger.app.bootstrap import ensure_control_token
from ledger.app.config import Settings

root, count = Path(sys.argv[1]), int(sys.argv[2])
sys.stdin.readline()  # every process starts racing at once
for n in range(count):
    directory = root / f"d{n}"
    key = load_or_create_signing_key(directory / "checkpoint-key.pem")
    token = ensure_control_token(Settings(data_dir=directory, control_token=None))
    print(n, key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw).hex(), token)
"""


def test_processes_creating_the_key_and_token_at_once_agree(tmp_path: Path) -> None:
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", _CREATE, str(tmp_path), str(DIRECTORIES)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(PROCESSES)
    ]
    for process in processes:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    answers = [process.communicate(timeout=120) for process in processes]
    assert all(process.returncode == 0 for process in processes), answers
    outputs = [out.splitlines() for out, _ in answers]
    assert len(outputs[0]) == DIRECTORIES
    assert all(lines == outputs[0] for lines in outputs), answers
    for n in range(DIRECTORIES):
        directory = tmp_path / f"d{n}"
        assert sorted(path.name for path in directory.iterdir()) == [
            "checkpoint-key.pem",
            "control-token",
        ]
        assert (directory / "checkpoint-key.pem").stat().st_mode & 0o777 == 0o600
        assert (directory / "control-token").stat().st_mode & 0o777 == 0o600
