"""``LedgerCaptureLedger``: Gym's ``CaptureLedger`` protocol over the ledger's HTTP API.

Gym loads it from its config (``token_id_capture.lineage_store`` and ``lineage_store_kwargs``)
and calls it from every model-server worker. The ledger is the one shared copy, so a row is
visible to every worker as soon as ``record`` returns (the ledger answers after its commit), and
parent resolution runs Gym's own ``RolloutLineage`` matcher over the rows the ledger keeps.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import httpx
from nemo_gym.token_id_capture.fingerprint import assistant_fingerprint
from nemo_gym.token_id_capture.protocols import LineageResolution
from nemo_gym.token_id_capture.records import ParentResolutionStatus
from nemo_gym.token_id_capture.store import validate_rollout_id

from ledger.client_connections import client_limits
from ledger.gym_plugin.rows import commit_row, lineage_of

log = logging.getLogger(__name__)

CONTROL_ROUTE_PREFIX = "/training-token-capture/control"
DEFAULT_CONTROL_TOKEN_ENV = "NEMO_GYM_TOKEN_CAPTURE_CONTROL_TOKEN"
# Bounds what one error reply can put into an exception message.
_MAX_DETAIL = 500


class RolloutRetiredError(ValueError):
    """The rollout is fenced (retired): its manifest is gone, not empty.

    A ``ValueError`` so that Gym 0.7.0's own manifest route, which maps only ValueError, answers
    400 with this message instead of 500 (the ledger's own route answers 410)."""

    def __init__(self, rollout_id: str) -> None:
        super().__init__(f"rollout {rollout_id} is retired")
        self.rollout_id = rollout_id


class LedgerUnavailable(RuntimeError):
    """The ledger did not answer, or answered with a server error."""


def _detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:_MAX_DETAIL]
    detail = body.get("detail") if isinstance(body, dict) else body
    return str(detail)[:_MAX_DETAIL]


def _token_from(env: str | None, what: str) -> str | None:
    if env is None:
        return None
    token = os.environ.get(env)
    if not token:
        raise ValueError(f"{what} token environment variable {env} is not set")
    return token


class LedgerCaptureLedger:
    """A process-shared ``CaptureLedger`` (and ``LineageResolver``) backed by a ledger server.

    ``base_url``: the ledger, e.g. ``http://ledger:8000``. ``token_env``: the environment
    variable holding the bearer for the ingest routes, and for the read routes too unless
    ``read_token_env`` names another (None when the ledger has no such tokens).
    ``control_token_env``: the variable holding the ledger's control token, used for
    ``manifest`` (by default the one Gym reads for its own control route).
    """

    def __init__(
        self,
        base_url: str,
        *,
        token_env: str | None = None,
        read_token_env: str | None = None,
        control_token_env: str = DEFAULT_CONTROL_TOKEN_ENV,
        request_timeout_s: float = 30.0,
    ) -> None:
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http(s) URL (got {base_url!r})")
        if isinstance(request_timeout_s, bool) or not request_timeout_s > 0:
            raise ValueError("request_timeout_s must be a positive number")
        self.base_url = base_url.rstrip("/")
        self._token = _token_from(token_env, "ledger")
        read_token = _token_from(read_token_env, "ledger read")
        self._read_headers = {"Authorization": f"Bearer {read_token}"} if read_token else {}
        self._control_token_env = control_token_env
        self._timeout = float(request_timeout_s)
        # Made on first use, inside the event loop of the worker that uses it.
        self._http: httpx.AsyncClient | None = None

    # --- HTTP --------------------------------------------------------------------------

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            headers = {"Authorization": f"Bearer {self._token}"} if self._token else {}
            self._http = httpx.AsyncClient(
                base_url=self.base_url,
                headers=headers,
                timeout=self._timeout,
                limits=client_limits(),
            )
        return self._http

    async def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = await self._client().request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise LedgerUnavailable(f"ledger request {method} {path} failed: {exc!r}") from exc
        if response.status_code >= 500:
            raise LedgerUnavailable(
                f"ledger request {method} {path} failed: HTTP {response.status_code} "
                f"{_detail(response)}"
            )
        return response

    @staticmethod
    def _refused(response: httpx.Response, what: str) -> ValueError:
        return ValueError(f"ledger refused {what}: HTTP {response.status_code} {_detail(response)}")

    # --- LineageResolver ----------------------------------------------------------------

    async def resolve(self, rollout_id: str, request_items: list[dict[str, Any]]) -> Any:
        """Gym's decision for this request: ROOT without assistant history, RESOLVED with the
        single verified parent, else UNRESOLVED (never a guess). A fenced rollout resolves to
        no match, as Gym's stores answer for a retired one."""
        validate_rollout_id(rollout_id)
        fingerprint = assistant_fingerprint(request_items)
        if not fingerprint:
            return LineageResolution(ParentResolutionStatus.ROOT)
        response = await self._send(
            "GET",
            f"/v1/rollouts/{rollout_id}/ledger/rows",
            params={"fingerprint": fingerprint},
            headers=self._read_headers,
        )
        if response.status_code == 410:
            return LineageResolution(ParentResolutionStatus.UNRESOLVED, reason="no_match")
        if response.status_code != 200:
            raise self._refused(response, f"the parent lookup for rollout {rollout_id}")
        rows = [entry["row"] for entry in response.json()["rows"]]
        return lineage_of(rows).resolve(list(request_items))

    def is_process_shared(self) -> bool:
        return True

    async def close(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    # --- CaptureLedger ------------------------------------------------------------------

    async def record(self, commit: Any) -> None:
        """Record one committed call. An identical re-record is a no-op; a different row under
        the same ``model_call_id`` raises Gym's ValueError. A row for a fenced rollout is
        discarded by the ledger (logged, its staging key listed as orphaned), not an error."""
        rollout_id = validate_rollout_id(commit.rollout_id)
        model_call_id = commit.record.model_call_id
        response = await self._send(
            "POST", f"/v1/rollouts/{rollout_id}/ledger/rows", json=commit_row(commit)
        )
        if response.status_code == 409:
            raise ValueError(f"conflicting lineage record for model call {model_call_id}")
        if response.status_code not in (200, 201):
            raise self._refused(response, f"the row for model call {model_call_id}")
        if response.json().get("outcome") == "discarded":
            log.warning(
                "discarded a late lineage row for retired rollout %s (model call %s); staged "
                "tokens under staging key %s are referenced by no manifest",
                rollout_id,
                model_call_id,
                commit.record.staging_key,
            )

    async def record_failure(self, rollout_id: str, model_call_id: str, reason: str) -> None:
        """Record a failure row (identical ones are deduplicated by the ledger)."""
        validate_rollout_id(rollout_id)
        row = {"failure_reason": reason, "model_call_id": model_call_id}
        response = await self._send("POST", f"/v1/rollouts/{rollout_id}/ledger/rows", json=row)
        if response.status_code not in (200, 201):
            raise self._refused(response, f"the failure row for model call {model_call_id}")
        if response.json().get("outcome") == "discarded":
            log.warning(
                "discarded a late failure row for retired rollout %s (model call %s)",
                rollout_id,
                model_call_id,
            )

    async def manifest(self, rollout_id: str) -> dict[str, Any]:
        """The rollout's token-free manifest as plain JSON (Gym's ``RolloutManifest`` shape)."""
        validate_rollout_id(rollout_id)
        token = os.environ.get(self._control_token_env)
        if not token:
            raise RuntimeError(
                f"reading a manifest needs the ledger's control token in {self._control_token_env}"
            )
        response = await self._send(
            "GET",
            f"{CONTROL_ROUTE_PREFIX}/rollouts/{rollout_id}/manifest",
            headers={"Authorization": f"Bearer {token}"},
        )
        if response.status_code == 410:
            raise RolloutRetiredError(rollout_id)
        if response.status_code != 200:
            raise self._refused(response, f"the manifest of rollout {rollout_id}")
        manifest: dict[str, Any] = response.json()
        return manifest

    async def has_rows(self, rollout_id: str) -> bool:
        """Whether the rollout has any row, committed or failed. A fenced rollout answers True:
        Gym then poisons (rather than admits as a new root) a continuation that arrives after
        retirement, and the poison row is discarded, so nothing is written for it."""
        validate_rollout_id(rollout_id)
        response = await self._send(
            "GET", f"/v1/rollouts/{rollout_id}/ledger/has-rows", headers=self._read_headers
        )
        if response.status_code == 410:
            return True
        if response.status_code != 200:
            raise self._refused(response, f"the row check of rollout {rollout_id}")
        return bool(response.json()["has_rows"])
