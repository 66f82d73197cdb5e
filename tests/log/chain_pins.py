"""A fixed series of appends and the chain it makes, pinned: the chain is part of the log's format.

``scenario`` appends, through a real store and the capture service, events whose payloads hold
the values where orjson and the standard library could disagree (tiny and huge floats, -0.0,
integers beyond 64 bits, unicode, unsorted nested keys). The clock is fixed, so the chain is
a function of the code alone. ``PINNED`` is what this code writes and ``PINNED_STANDARD`` what
the code before revision 0020 wrote (the standard library's bytes for every payload); each was
produced by running ``python -m tests.log.chain_pins`` with that code's ``ledger`` package.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ledger.app.areas import default_catalogue, write_side_projectors
from ledger.areas.captures.service import CaptureService
from ledger.log import migrate
from ledger.log.store import LedgerStore

AWKWARD_VALUES: dict[str, Any] = {
    "tiny": [1e-7, -2.3324451179648887e-07, 9.539537689588723e-05, 5e-324, 1e-4],
    "huge": [1e16, -1e16, 1.5e300, 9999999999999998.0, 1e22],
    "zeros": [0.0, -0.0, 0, -0],
    "ints": [2**63 - 1, -(2**63), 2**64, 2**70, -(2**70)],
    "text": ["ünïcödé ☃ \u2028 𝄞", 'quote " \\ \n \t \x00 \x7f', "</script>"],
    "z_unsorted": {"b": 1, "a": {"d": [1.5, 2.25], "c": None}, "é": True, "Z": False},
}


def exchange(model_call_id: str, extra: dict[str, Any]) -> dict[str, Any]:
    return {
        "model_call_id": model_call_id,
        "dialect": "chat",
        "model_ref": {"type": "responses_api_models", "name": "policy_model"},
        "started_at": 1764400000.25,
        "completed_at": 1764400001.5,
        "latency_ms": 1250.5,
        "latency_ttft_ms": 80.0,
        "status_code": 200,
        "error_category": None,
        "request": {"model": "policy", "messages": [{"role": "user", "content": "hi"}], **extra},
        "response": {
            "id": "chatcmpl-" + model_call_id,
            "object": "chat.completion",
            "model": "policy",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "hello"},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 12, "completion_tokens": 8, "total_tokens": 20},
        },
    }


def fixed_clock() -> Iterator[datetime]:
    moment = datetime(2026, 11, 30, 12, 0, 0, 123456, tzinfo=UTC)
    while True:
        yield moment
        moment += timedelta(microseconds=1001)


async def scenario(store: LedgerStore) -> list[tuple[int, str, str]]:
    """Run the appends; return (seq, payload_sha256, hash) of every event."""
    captures = CaptureService(store)
    await captures.append("pin-a", exchange("call-1", AWKWARD_VALUES))
    for name, value in AWKWARD_VALUES.items():
        await captures.append("pin-a", exchange(f"call-{name}", {name: value}))
    await captures.append_many(
        [
            {"rollout_id": "pin-b", "exchange": exchange("call-b1", {"n": 1e-9})},
            {"rollout_id": "pin-c", "exchange": exchange("call-c1", {"n": 2**80})},
        ]
    )
    await captures.announce_pending("pin-b", "call-b2")
    await captures.mark_incomplete("pin-b", "upstream write failed: ☃")
    await captures.clear("pin-c")
    events = await store.events(limit=1000)
    return [(event.seq, event.payload_sha256, event.hash) for event in events]


async def record(database_url: str) -> list[tuple[int, str, str]]:
    import ledger.log.transaction as transaction

    clock = fixed_clock()
    transaction._now = lambda: next(clock)
    await migrate.upgrade(database_url)
    store = LedgerStore(database_url, default_catalogue(), write_side_projectors())
    await store.open()
    try:
        return await scenario(store)
    finally:
        await store.close()


# What the code before revision 0020 wrote (scheme 1 for every payload): the events of
# v1_events.json, which tests/log/test_payload_schemes.py verifies.
PINNED_STANDARD: list[tuple[int, str, str]] = [
    (
        1,
        "e77db8dd4c59cadafc8bde0b8586c1e1c6370577d17fc3d0370c907a2fad63e2",
        "c87e726b8d926243c926bc5a2617a07325c60e62d46b0b61706a59695410363f",
    ),
    (
        2,
        "64332fe33dc17e13070097643e6b10a48d4979aa0635e7be91b3c5787d7813fc",
        "54692b08bb7071669ebd735b3bf17f34eba7c82c4da480ed9e9454b485ba55e0",
    ),
    (
        3,
        "3351360037cf6c0ba8ab04e6d8936a94818494ba3769fd0e90d63cef861e9f5a",
        "b494f27119c119a57dd904faeda8bfb299c0181d5b50018e30e8164f7aeba0d7",
    ),
    (
        4,
        "596d6c1c91af890b20bb88594d4f017ef44f6d6522d8106b8c8ea7e74b349249",
        "bbb0ceb441b56eeaa902353c44090d77fdef037d24ca1c4b97535b3eb94500e2",
    ),
    (
        5,
        "50c406b77f8348125feb3134d480df407689f447c1312dc0b2d35fd3abeb0e85",
        "cc3dcbbdcbd3de53d7585058de539fcb61585e9776045450b2650ffe8384b664",
    ),
    (
        6,
        "c3e1ff84648ab805877c9b181b8b8c191c6cce54f4fabd3574efbe430cbd51a8",
        "4a1bd3063a99b4fd1c461393cdc4149e6dd91f4d37a235079d04b3f313607be3",
    ),
    (
        7,
        "84045c0ab3d0f227a20febd253f29fbd65f29a0806f0580d30ade172e60f5ccf",
        "a3fc0643c039ffcda9cff8a399f863b578e9ce68fbec82327911aaeab90a6316",
    ),
    (
        8,
        "c9746a48e668ab82bb5ef6e45c7052571e56e4cc759435b283aae37f5a00a8b3",
        "733b562f4ea384bc5e2a509b8e0559043601db8fbe7d7c8d3c14de019814593d",
    ),
    (
        9,
        "6bd6d260172aa5ed0386d29c4e6ae83737cb8ffb694533c4894b765987d46200",
        "6fff1123e350723d8d49839bbad8d9f272e3efca7617188b97fbae388eddd210",
    ),
    (
        10,
        "3ba34bbeee125995e9950443618489488f96b4473c9a5772cc997fe414ab9164",
        "c8f90205d99e450c9dc91c8f22545a929f4c0e152672bc5f8556fdc5c92aff59",
    ),
    (
        11,
        "734bf90aee19eb5bef031a00fecb8d46482559c6873ca690972fcece4854f8f5",
        "d07075256a5d60289baf8f4bac8d4fc4b235933cdecf3cca5ea605e49d465b19",
    ),
    (
        12,
        "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a",
        "8fda1c836e7b37367c53cc461a6b410a68c993fb58f8d7c88225f9eb09d1ee05",
    ),
]


# What this code writes (scheme 2): events 2 and 8 hold floats the schemes spell otherwise, so
# their payloads differ from PINNED_STANDARD's, and every hash from event 2 on with them.
PINNED: list[tuple[int, str, str]] = [
    (
        1,
        "e77db8dd4c59cadafc8bde0b8586c1e1c6370577d17fc3d0370c907a2fad63e2",
        "c87e726b8d926243c926bc5a2617a07325c60e62d46b0b61706a59695410363f",
    ),
    (
        2,
        "4ec133b02cdbdc49b41eec6805ab23c38b708b2d0f7e2084ee6638634f640779",
        "3a1b19f7b74e3f3d309687a15343b810a0336cab8fef2596f35556de206bc963",
    ),
    (
        3,
        "3351360037cf6c0ba8ab04e6d8936a94818494ba3769fd0e90d63cef861e9f5a",
        "b606fafc0a654c6dd92da11f6a0e62c58fc774e51d9397fff94450b6c7b43c16",
    ),
    (
        4,
        "596d6c1c91af890b20bb88594d4f017ef44f6d6522d8106b8c8ea7e74b349249",
        "f6a20e586ab86409a81190b3e884f3090127496cf1c9636d5df2097c0dafc480",
    ),
    (
        5,
        "50c406b77f8348125feb3134d480df407689f447c1312dc0b2d35fd3abeb0e85",
        "3f4435db43623e5238c14fcfe1b8b2fa9d81c7f6db11a549a67bcc56f58dcdeb",
    ),
    (
        6,
        "c3e1ff84648ab805877c9b181b8b8c191c6cce54f4fabd3574efbe430cbd51a8",
        "e6e095c56047fe0bf5e4e99bf1ab135ad3bfa1bebfd854a4f54c92a25bc28247",
    ),
    (
        7,
        "84045c0ab3d0f227a20febd253f29fbd65f29a0806f0580d30ade172e60f5ccf",
        "2486f91ae1030e24b8075095ad78927e8fa243a5148130bec8ffaf9daa3ab109",
    ),
    (
        8,
        "eba915ad319fd6a294200ad55435724119534e50802e1c8615f18f5c26887d71",
        "d83ffa91d67e150cc9e6cf2e6984dac251eb3adbf7dd7fcccc5c3a43edd57101",
    ),
    (
        9,
        "6bd6d260172aa5ed0386d29c4e6ae83737cb8ffb694533c4894b765987d46200",
        "9293391ce713031926d64865e414488041aab31f1bda349681b108d38e9e6211",
    ),
    (
        10,
        "3ba34bbeee125995e9950443618489488f96b4473c9a5772cc997fe414ab9164",
        "30e686d1c5b7f87e29a10bc1a408ab08eb53318e1767ed6e4d88b74f23cae3fb",
    ),
    (
        11,
        "734bf90aee19eb5bef031a00fecb8d46482559c6873ca690972fcece4854f8f5",
        "05585a3be7ff40aea0a009998c290f286f25256dc9991ef16bc9a07d24fca7db",
    ),
    (
        12,
        "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a",
        "eff6629431956c60b6f72b7766d8e606ef33abce0cae41d5fd890bab3b14af8a",
    ),
]


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as scratch:
        url = f"sqlite+aiosqlite:///{Path(scratch) / 'pins.db'}"
        sys.stdout.write(repr(asyncio.run(record(url))) + "\n")
