"""Async client for the model-call capture routes, named after Gym's CaptureStore functions.

async with CaptureClient("http://127.0.0.1:8420") as captures:
    await captures.append_model_call("r1", exchange)
    attachment = await captures.ng_model_call_capture("r1")
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any

import httpx

from ledger.client_connections import client_limits
from ledger.gym.ids import validate_rollout_id
from ledger.gym.model_calls import ModelCallRecord, aggregate_model_call_records


class CaptureClientError(Exception):
    """The ledger refused a request; ``status_code`` and the server's ``detail`` say why."""

    def __init__(self, status_code: int, detail: Any) -> None:
        super().__init__(f"{status_code}: {detail}")
        self.status_code = status_code
        self.detail = detail


def _run_params(run: str | None) -> dict[str, str]:
    return {} if run is None else {"run": run}


class CaptureClient:
    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.AsyncClient(
            base_url=base_url,
            headers=headers,
            timeout=timeout,
            transport=transport,
            limits=client_limits(),
        )

    async def __aenter__(self) -> CaptureClient:
        return self

    async def __aexit__(
        self,
        _type: type[BaseException] | None,
        _value: BaseException | None,
        _traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        response = await self._http.request(method, url, **kwargs)
        if response.status_code >= 400:
            try:
                detail = response.json().get("detail")
            except ValueError:
                detail = response.text
            raise CaptureClientError(response.status_code, detail)
        return response

    @staticmethod
    def _path(rollout_id: str, suffix: str = "") -> str:
        return f"/v1/rollouts/{validate_rollout_id(rollout_id)}{suffix}"

    async def append_model_call(
        self, rollout_id: str, exchange: Mapping[str, Any], *, run: str | None = None
    ) -> dict[str, Any]:
        """Append one raw exchange; returns ``{rollout_id, model_call_id, call_index, seq}``
        once durable (the same reply again for an identical repeat). ``run`` labels the
        rollout with its run (409 if it holds another label)."""
        response = await self._request(
            "POST",
            self._path(rollout_id, "/model-calls"),
            json=dict(exchange),
            params=_run_params(run),
        )
        reply: dict[str, Any] = response.json()
        return reply

    async def append_model_calls(
        self, items: Iterable[tuple[str, Mapping[str, Any]]], *, run: str | None = None
    ) -> list[dict[str, Any]]:
        """Append many (rollout_id, exchange) pairs in one request; one result per item,
        each with ``status`` (201/200, or 400/409/422 with ``detail``). ``run`` labels every
        item's rollout."""
        body = {
            "items": [
                {"rollout_id": rollout_id, "exchange": dict(exchange)}
                for rollout_id, exchange in items
            ]
        }
        response = await self._request(
            "POST", "/v1/model-calls/batch", json=body, params=_run_params(run)
        )
        results: list[dict[str, Any]] = response.json()["results"]
        return results

    async def mark_capture_incomplete(self, rollout_id: str) -> None:
        await self._request("POST", self._path(rollout_id, "/model-calls/incomplete"))

    async def clear_model_calls(self, rollout_id: str) -> bool:
        """The pre-dispatch clear of exactly this rollout-attempt id; True if anything was there."""
        response = await self._request("DELETE", self._path(rollout_id, "/model-calls"))
        cleared: bool = response.json()["cleared"]
        return cleared

    async def announce_pending_model_call(self, rollout_id: str, model_call_id: str) -> None:
        await self._request(
            "POST",
            self._path(rollout_id, "/model-calls/pending"),
            json={"model_call_id": model_call_id},
        )

    async def withdraw_pending_model_call(self, rollout_id: str, model_call_id: str) -> None:
        await self._request(
            "DELETE",
            self._path(rollout_id, "/model-calls/pending"),
            params={"model_call_id": model_call_id},
        )

    async def read_model_call_records(
        self, rollout_id: str, *, payloads: bool = True
    ) -> list[ModelCallRecord]:
        """The rollout's records in call_index order (Gym's tolerant read of the capture file)."""
        response = await self._request(
            "GET",
            self._path(rollout_id, "/model-calls"),
            params={"payloads": "true" if payloads else "false"},
        )
        return [ModelCallRecord.model_validate(call) for call in response.json()["calls"]]

    async def aggregate_model_call_metrics(self, rollout_id: str) -> dict[str, int | float | None]:
        """Gym's null-aware sums over the rollout's records (§2.10)."""
        records = await self.read_model_call_records(rollout_id, payloads=False)
        return aggregate_model_call_records(records)

    async def ng_model_call_capture(
        self, rollout_id: str, *, payloads: bool = False
    ) -> dict[str, Any]:
        """Exactly Gym's ``ng_model_call_capture`` attachment for the rollout."""
        response = await self._request(
            "GET",
            self._path(rollout_id, "/ng_model_call_capture"),
            params={"payloads": "true" if payloads else "false"},
        )
        attachment: dict[str, Any] = response.json()
        return attachment
