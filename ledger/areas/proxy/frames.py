"""Length-prefixed frames between the server and its capture process (capture_process.py).

A frame is a 4-byte big-endian length and that many bytes of a pickle. Pickle, because both
ends are this package in processes the server started over its own pipes (nothing else can
write to them), and an observed call is mostly bytes, which pickle copies as they are: no
encoding step on the server's side, whose CPU is the forwarding loop's.
"""

from __future__ import annotations

import pickle
import struct
from typing import IO, Any

_LENGTH = struct.Struct(">I")
# A batch is bounded by the recorder (MAX_BATCH_ITEMS calls of at most the proxy's body limits);
# a length beyond this is a broken pipe's garbage, not a frame.
MAX_FRAME_BYTES = 2**31


def encode_frame(value: Any) -> bytes:
    body = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    return _LENGTH.pack(len(body)) + body


def frame_length(header: bytes) -> int:
    (length,) = _LENGTH.unpack(header)
    if length > MAX_FRAME_BYTES:
        raise ValueError(f"frame of {length} bytes: over {MAX_FRAME_BYTES}")
    return int(length)


HEADER_BYTES = _LENGTH.size


def decode_frame(body: bytes) -> Any:
    return pickle.loads(body)


def read_frame(stream: IO[bytes]) -> Any | None:
    """The next frame's value from a blocking stream; None at a clean end of stream."""
    header = stream.read(HEADER_BYTES)
    if not header:
        return None
    if len(header) < HEADER_BYTES:
        raise EOFError("the stream ended inside a frame's header")
    length = frame_length(header)
    body = stream.read(length)
    if len(body) < length:
        raise EOFError("the stream ended inside a frame")
    return decode_frame(body)
