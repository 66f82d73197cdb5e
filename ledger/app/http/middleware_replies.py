"""The answer a middleware gives on its own, before or instead of the app: a JSON ``detail``
with its status (the shape every error of the API has, docs/api.md)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from starlette.types import Send


async def send_detail(
    send: Send, status: int, detail: str, headers: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
