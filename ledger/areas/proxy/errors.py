"""The proxy's own answers (unknown upstream, body too large, upstream unreachable), shaped as
the dialect's error body so an SDK raises its usual error with our message."""

from __future__ import annotations

import json

from starlette.types import Send

from ledger.gym.dialects import Dialect

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    408: "timeout_error",
    413: "request_too_large",
    502: "api_error",
    504: "timeout_error",
}


def error_body(status: int, message: str, *, anthropic_style: bool) -> bytes:
    kind = _ERROR_TYPES.get(status, "api_error")
    if anthropic_style:
        content: dict[str, object] = {
            "type": "error",
            "error": {"type": kind, "message": message},
        }
    else:
        content = {"error": {"message": message, "type": kind, "code": status}}
    # ensure_ascii: a message never carries a raw control character or a lone surrogate.
    return json.dumps(content, ensure_ascii=True).encode()


def is_anthropic_style(dialect: Dialect | None, raw_path: bytes) -> bool:
    return dialect == "messages" or raw_path.startswith(b"/v1/messages")


async def send_error(
    send: Send,
    status: int,
    message: str,
    *,
    anthropic_style: bool,
    extra_headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    body = error_body(status, message, anthropic_style=anthropic_style)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *(extra_headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})
