"""Gym 0.7.0's own ``vllm_model`` server, started the way Gym's launcher starts it, and the fake
upstream it talks to, each a real process on loopback.

Gym's launcher (``nemo_gym/cli/env.py``, ``RunHelper._start``) resolves the global config with
``GlobalConfigDictParser`` (the server's own ``configs/*.yaml`` from ``config_paths``, host and a
free port filled in), serialises it to YAML and runs the server's entrypoint (``app.py``) in the
server's folder, with ``NEMO_GYM_CONFIG_DICT`` (the YAML), ``NEMO_GYM_CONFIG_PATH`` (the server's
top-level key) and that folder on ``PYTHONPATH`` (``run_command``). This module does the same,
with two differences that change nothing of the server: the interpreter is the Gym leg's
(.gym-venv, where the launcher would first build a per-server uv venv), and the entrypoint runs
through gym_tests.py311_shim (Gym 0.7.0 on Python 3.11). No head server runs: the model server
reads its config from the environment and never calls it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.readiness import answers
from tests.support.server import free_port

READY_TIMEOUT_S = 180.0
SERVER_KEY = "policy_model"
CONFIG_PATH = "responses_api_models/vllm_model/configs/vllm_model.yaml"
PLUGIN = "ledger.gym_plugin:LedgerCaptureLedger"
CONTROL_ENV = "NEMO_GYM_TOKEN_CAPTURE_CONTROL_TOKEN"


@dataclass
class LoopbackProcess:
    """A child process serving HTTP on a loopback port, up once ``ready_path`` answers 200."""

    argv: list[str]
    port: int
    log_path: Path
    ready_path: str
    cwd: Path | None = None
    env: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> LoopbackProcess:
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.argv,
                cwd=self.cwd,
                env={**os.environ, **self.env},
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        if answers(
            self.process,
            self.base_url + self.ready_path,
            timeout=READY_TIMEOUT_S,
            log_path=self.log_path,
            name=str(self.argv),
        ):
            return self
        self.stop()
        raise RuntimeError(f"{self.argv} did not come up:\n{self.log_path.read_text()}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)


def fake_worker(log_dir: Path) -> LoopbackProcess:
    """gym_tests/fake_worker.py: the upstream OpenAI-compatible worker."""
    port = free_port()
    return LoopbackProcess(
        argv=[sys.executable, "-m", "gym_tests.fake_worker", "--port", str(port)],
        port=port,
        log_path=log_dir / "fake-worker.log",
        ready_path="/v1/models",
    )


def global_config(
    *, upstream_url: str, ledger_url: str, capture_dir: Path, observability: bool
) -> Any:
    """The global config Gym's launcher would resolve for ``vllm_model`` with the ledger's
    plug-in as its lineage store and external (worker) staging: a DictConfig."""
    from nemo_gym.global_config import GlobalConfigDictParser, GlobalConfigDictParserConfig
    from omegaconf import DictConfig

    overrides = DictConfig(
        {
            "config_paths": [CONFIG_PATH],
            "policy_base_url": f"{upstream_url}/v1",
            "policy_api_key": "fake-key",
            "policy_model_name": "fake-model",
            "observability_enabled": observability,
            # Off or on, Gym's token store writes its intents here (token_id_capture.dir unset).
            "model_call_capture_dir": str(capture_dir),
            "token_id_capture": {
                "enabled": True,
                "external_staging": True,
                "rebuild_response": False,
                "lineage_store": PLUGIN,
                "lineage_store_kwargs": {"base_url": ledger_url, "request_timeout_s": 30},
            },
        }
    )
    parser_config = GlobalConfigDictParserConfig(
        initial_global_config_dict=overrides, skip_load_from_cli=True, skip_load_from_dotenv=True
    )
    return GlobalConfigDictParser().parse(parser_config)


def vllm_model_server(
    *,
    upstream_url: str,
    ledger_url: str,
    control_token: str,
    capture_dir: Path,
    observability: bool,
    log_dir: Path,
) -> LoopbackProcess:
    """Gym's ``vllm_model`` as its launcher runs it (see the module's docstring)."""
    import responses_api_models.vllm_model as vllm_model
    from omegaconf import OmegaConf

    config = global_config(
        upstream_url=upstream_url,
        ledger_url=ledger_url,
        capture_dir=capture_dir,
        observability=observability,
    )
    server_config = config[SERVER_KEY]["responses_api_models"]["vllm_model"]
    server_dir = Path(vllm_model.__file__).parent
    python_path = [str(server_dir), os.environ.get("PYTHONPATH", "")]
    return LoopbackProcess(
        argv=[sys.executable, "-m", "gym_tests.py311_shim", server_config["entrypoint"]],
        port=int(server_config["port"]),
        log_path=log_dir / "gym-vllm-model.log",
        ready_path="/health",
        cwd=server_dir,
        env={
            "NEMO_GYM_CONFIG_DICT": OmegaConf.to_yaml(config),
            "NEMO_GYM_CONFIG_PATH": SERVER_KEY,
            "PYTHONPATH": ":".join(part for part in python_path if part),
            CONTROL_ENV: control_token,
        },
    )
