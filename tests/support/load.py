"""Concurrent capture clients against real server processes."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.support.exchanges import chat_exchange


@dataclass
class LoadLedger:
    """What the clients sent and what the server acknowledged, by model_call_id."""

    sent: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    acknowledged: dict[str, dict[str, Any]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    threshold: int | None = None
    reached: asyncio.Event = field(default_factory=asyncio.Event)

    def acknowledge(self, model_call_id: str, reply: dict[str, Any]) -> None:
        self.acknowledged[model_call_id] = reply
        if self.threshold is not None and len(self.acknowledged) >= self.threshold:
            self.reached.set()


async def capture_client(
    base_url: str,
    *,
    name: str,
    record: LoadLedger,
    stop: asyncio.Event,
    limit: int,
    rollouts: int = 4,
) -> None:
    """Append captures until ``stop``, ``limit`` or the server goes away."""
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as http:
        for n in range(limit):
            if stop.is_set():
                return
            model_call_id = f"{name}-{n}"
            rollout_id = f"{name}-r{n % rollouts}"
            exchange = chat_exchange(model_call_id=model_call_id, text=f"prompt {n}")
            record.sent[model_call_id] = (rollout_id, exchange)
            try:
                reply = await http.post(f"/v1/rollouts/{rollout_id}/model-calls", json=exchange)
            except httpx.TransportError as exc:
                record.errors.append(f"{model_call_id}: {type(exc).__name__}")
                return
            if reply.status_code in (200, 201):
                record.acknowledge(model_call_id, reply.json())
            else:
                record.errors.append(f"{model_call_id}: {reply.status_code} {reply.text}")
