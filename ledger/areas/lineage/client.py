"""``RolloutControlClient``: Gym's control-plane client (contract §3.8), as a drop-in.

Same constructor, same methods, same errors and messages as Gym's: ids are validated and
de-duplicated as a whole before anything is sent, removals go in batches of at most 4096 in
order, 410 is ``RolloutRetiredError``, and replies are validated strictly (a server adding keys,
or answering with another rollout's manifest, is refused).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from typing import Any

import httpx

from ledger.gym.ids import validate_rollout_id, validate_rollout_ids
from ledger.gym.lineage import (
    CONTROL_ROUTE_PREFIX,
    MAX_LEDGER_BATCH,
    RolloutManifest,
    RolloutRemoval,
)
from ledger.log.errors import RolloutRetiredError


class RolloutControlClient:
    def __init__(
        self,
        base_url: str,
        auth_token: str,
        request_timeout_s: float = 30.0,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not isinstance(auth_token, str) or not auth_token:
            raise ValueError("auth_token must be a non-empty string")
        if (
            isinstance(request_timeout_s, bool)
            or not isinstance(request_timeout_s, int | float)
            or not math.isfinite(request_timeout_s)
            or request_timeout_s <= 0
        ):
            raise ValueError("request_timeout_s must be a positive number")
        self.base_url = base_url.rstrip("/")
        self._auth_token = auth_token
        self.request_timeout_s = request_timeout_s
        # Injected only by tests (an in-process ASGI app); normally httpx's own transport.
        self._transport = transport

    async def _request(
        self, method: str, path: str, body: dict[str, Any] | None = None
    ) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self._auth_token}"}
        try:
            async with (
                asyncio.timeout(self.request_timeout_s),
                httpx.AsyncClient(
                    base_url=self.base_url, transport=self._transport, timeout=None
                ) as http,
            ):
                return await http.request(method, path, json=body, headers=headers)
        except (TimeoutError, httpx.TimeoutException) as exc:
            raise RuntimeError(
                f"ledger control request {method} {path} exceeded {self.request_timeout_s}s"
            ) from exc

    async def manifest(self, rollout_id: str) -> RolloutManifest:
        """The rollout's manifest; ``RolloutRetiredError`` once it is retired."""
        # Validated before the URL is built, so "../rollouts/r1" can never fetch r1.
        validate_rollout_id(rollout_id)
        path = f"{CONTROL_ROUTE_PREFIX}/rollouts/{rollout_id}/manifest"
        reply = await self._request("GET", path)
        if reply.status_code == 410:
            raise RolloutRetiredError(rollout_id)
        if reply.status_code != 200:
            raise RuntimeError(
                f"rollout {rollout_id} manifest fetch failed: HTTP {reply.status_code} {reply.text}"
            )
        manifest = RolloutManifest.model_validate_json(reply.content)
        if manifest.rollout_id != rollout_id:
            raise ValueError(
                f"manifest for rollout {manifest.rollout_id!r} returned for {rollout_id!r}"
            )
        return manifest

    async def retire(self, rollout_ids: Sequence[str]) -> RolloutRemoval:
        """Fence every id; ``removed`` lists those whose ledger existed."""
        return await self._remove("retire", rollout_ids)

    async def delete(self, rollout_ids: Sequence[str]) -> RolloutRemoval:
        """Remove ledgers and fences; the ids become reusable."""
        return await self._remove("delete", rollout_ids)

    async def _remove(self, action: str, rollout_ids: Sequence[str]) -> RolloutRemoval:
        ids = validate_rollout_ids(rollout_ids)  # the whole list, before anything is sent
        removed: list[str] = []
        absent: list[str] = []
        path = f"{CONTROL_ROUTE_PREFIX}/rollouts/{action}"
        for start in range(0, len(ids), MAX_LEDGER_BATCH):
            batch = ids[start : start + MAX_LEDGER_BATCH]
            reply = await self._request("POST", path, {"rollout_ids": batch})
            if reply.status_code != 200:
                raise RuntimeError(
                    f"{action} of {len(batch)} rollout ledgers failed: "
                    f"HTTP {reply.status_code} {reply.text}"
                )
            result = RolloutRemoval.model_validate_json(reply.content)
            removed.extend(result.removed)
            absent.extend(result.absent)
        return RolloutRemoval(removed=removed, absent=absent)
