"""Generated JSON values full of the cases where orjson and the standard library differ:
floats it spells otherwise, ints beyond 64 bits, -0.0, control characters and non-ASCII text,
keys whose sorted order differs by code point. For tests comparing a fast path with stdlib."""

from __future__ import annotations

import math
import random
from typing import Any

FLOATS = [
    0.0, -0.0, 1e-4, 9.99e-5, 1e-7, 5e-324, 1e16, 9999999999999998.0, 1e22, 1.5e300,
    1250.5, 80.0, -3.25, 0.1, 1 / 3, 123456789.123, 2.0**53, -1e-5,
]  # fmt: skip
INTS = [0, -1, 7, 2**53 + 1, 2**63 - 1, -(2**63), 2**63, 2**64, 2**70, -(2**70)]
TEXTS = ["", "a", "ünï ☃ \u2028 𝄞", 'q " \\ \n \t \x00 \x1f \x7f', "</script>", "\ufffe"]
KEYS = ["a", "b", "B", "é", "Z", "𝄞", "\x00", "aa", "model_call_id", "ü"]


def generated(rng: random.Random, depth: int = 0) -> Any:
    choice = rng.randrange(9 if depth < 4 else 5)
    if choice == 0:
        number = rng.choice(FLOATS) * rng.choice([1, -1, 10.0 ** rng.randint(-12, 12)])
        return number if math.isfinite(number) else -0.0
    if choice == 1:
        return rng.choice(INTS)
    if choice == 2:
        return rng.choice(TEXTS)
    if choice == 3:
        return rng.choice([None, True, False])
    if choice == 4:
        return rng.uniform(-1e6, 1e6)
    if choice in (5, 6):
        return {rng.choice(KEYS): generated(rng, depth + 1) for _ in range(rng.randint(0, 5))}
    return [generated(rng, depth + 1) for _ in range(rng.randint(0, 5))]
