"""A client that leaves before its body is complete ends its request quietly: no exception
reaches uvicorn, which logged each one as "Exception in ASGI application" with a traceback
(found by the resource-bound suite, its slow and oversized bodies)."""

from __future__ import annotations

from fastapi import FastAPI, Request
from starlette.types import Message, Scope

from ledger.app.http.timeouts import BodyReadTimeout


def app_reading_its_body() -> FastAPI:
    """The middleware where the service has it: inside Starlette's error middleware."""
    app = FastAPI()
    app.add_middleware(BodyReadTimeout, seconds=5)

    @app.post("/body")
    async def body(request: Request) -> int:
        return len(await request.body())

    return app


def post_scope() -> Scope:
    return {
        "type": "http",
        "method": "POST",
        "path": "/body",
        "raw_path": b"/body",
        "query_string": b"",
        "headers": [(b"content-type", b"application/json"), (b"content-length", b"100")],
        "http_version": "1.1",
        "scheme": "http",
        "server": ("127.0.0.1", 80),
        "client": ("127.0.0.1", 1234),
        "root_path": "",
    }


async def run(messages: list[Message]) -> list[Message]:
    """What the application sends for a request whose client sends ``messages``."""
    sent: list[Message] = []

    async def receive() -> Message:
        return messages.pop(0)

    async def send(message: Message) -> None:
        sent.append(message)

    await app_reading_its_body()(post_scope(), receive, send)
    return sent


async def test_a_disconnect_mid_body_ends_the_request_without_an_exception() -> None:
    sent = await run(
        [
            {"type": "http.request", "body": b'{"a"', "more_body": True},
            {"type": "http.disconnect"},
        ]
    )
    assert sent == []  # returned without raising, and nobody is left to answer


async def test_a_complete_body_is_still_answered() -> None:
    sent = await run([{"type": "http.request", "body": b"{}", "more_body": False}])
    assert sent[0]["status"] == 200
