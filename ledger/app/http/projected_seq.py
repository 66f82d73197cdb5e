"""The ``Ledger-Projected-Seq`` header of run-level reads: how far the views they answered from
had applied the log (deps.projected_views sets it on the request's state). Written here, as the
answer starts, because a route may answer with a response of its own (a file, a stream), which
a dependency cannot add headers to."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ledger.app.http.deps import PROJECTED_SEQ_STATE

HEADER = b"ledger-projected-seq"


class ProjectedSeqHeader:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_header(message: Message) -> None:
            if message["type"] == "http.response.start":
                seq = scope.get("state", {}).get(PROJECTED_SEQ_STATE)
                if seq is not None:
                    message["headers"] = [*message.get("headers", []), (HEADER, str(seq).encode())]
            await send(message)

        await self.app(scope, receive, send_with_header)
