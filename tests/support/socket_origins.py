"""Where a socket the suite left unclosed was opened, named in the failure it causes.

An unclosed socket is only noticed when the garbage collector frees it, and pytest fails the
test that happens to be running then (``filterwarnings = error``), which is seldom the test
that opened it: CI twice failed a hostile suite on a socket to a port it never used. So every
socket the test process connects or accepts has the stack that did it recorded (by id, a
bounded number of the latest), and the warning's message carries that stack: the next such
failure names its origin. Pass and fail are unchanged.
"""

from __future__ import annotations

import socket
import sys
import traceback
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

# Enough for every socket a test keeps open at once, however many the suite opens in all.
KEPT = 20_000
STACK_FRAMES = 40

_origins: OrderedDict[int, str] = OrderedDict()


def _remember(sock: socket.socket) -> None:
    _origins[id(sock)] = "".join(traceback.format_stack(limit=STACK_FRAMES)[:-2])
    _origins.move_to_end(id(sock))
    while len(_origins) > KEPT:
        _origins.popitem(last=False)


def origin_of(sock: object) -> str | None:
    return _origins.get(id(sock))


def install() -> Callable[[], None]:
    """Record origins and name them in unraisable socket warnings; returns the undo."""
    connect, accept = socket.socket.connect, socket.socket.accept

    def recorded_connect(self: socket.socket, address: Any) -> None:
        _remember(self)
        connect(self, address)

    def recorded_accept(self: socket.socket) -> tuple[socket.socket, Any]:
        accepted = accept(self)
        _remember(accepted[0])
        return accepted

    previous_hook = sys.unraisablehook

    def hook(unraisable: Any) -> None:
        origin = origin_of(unraisable.object)
        if origin is not None:
            message = unraisable.err_msg or "Exception ignored in"
            unraisable = type(unraisable)(
                (
                    unraisable.exc_type,
                    unraisable.exc_value,
                    unraisable.exc_traceback,
                    f"{message} (a socket opened at:\n{origin})",
                    unraisable.object,
                )
            )
        previous_hook(unraisable)

    socket.socket.connect = recorded_connect  # type: ignore[method-assign,assignment]
    socket.socket.accept = recorded_accept  # type: ignore[method-assign]
    sys.unraisablehook = hook

    def undo() -> None:
        socket.socket.connect = connect  # type: ignore[method-assign]
        socket.socket.accept = accept  # type: ignore[method-assign]
        sys.unraisablehook = previous_hook

    return undo
