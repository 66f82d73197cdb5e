"""A Host allow-list as pure ASGI middleware: a DNS-rebinding page (evil.example resolving to
127.0.0.1) reaches the loopback service with its own name in Host, and is refused here.

Allowed by default: the loopback names (``localhost``, ``127.0.0.1``, ``[::1]``), with or
without a port; ``Settings.allowed_hosts`` adds others (names, ``*`` for any).
"""

from __future__ import annotations

from collections.abc import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

from ledger.app.http.middleware_replies import send_detail

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "[::1]", "::1"})


def host_name(header: str) -> str:
    """``Example.org:8420`` → ``example.org``; ``[::1]:8420`` → ``[::1]``."""
    value = header.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        return value[: end + 1] if end != -1 else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class HostAllowList:
    def __init__(self, app: ASGIApp, *, extra_hosts: Iterable[str] = ()) -> None:
        self.app = app
        extra = {host_name(name) for name in extra_hosts}
        self.any_host = "*" in extra
        self.allowed = LOOPBACK_NAMES | extra

    def allows(self, header: str | None) -> bool:
        if self.any_host:
            return True
        return header is not None and host_name(header) in self.allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        hosts = [value for name, value in scope.get("headers", []) if name == b"host"]
        if len(hosts) == 1 and self.allows(hosts[0].decode("latin-1")):
            await self.app(scope, receive, send)
            return
        await send_detail(send, 400, "Host header not allowed (see LEDGER_ALLOWED_HOSTS)")
