"""A fake upstream for Gym's ``vllm_model`` server: an OpenAI-compatible ``/v1/chat/completions``
on loopback that answers like a vLLM worker with Gym's external staging. A request carrying
Gym's admission (``ng_capture``) is staged by Gym's own worker-side capture core
(``RolloutTokenCapture``, into memory) and answered with its commit coordinates
(``ng_commit_coords``), so the model server commits a lineage row for the call to its lineage
store (the ledger's plug-in) before it sends the body.

Run as ``python -m gym_tests.fake_worker --port N``; it serves until terminated. The answer is
a pure function of the request (the prompt's length and last message), so every run sees the
same tokens."""

from __future__ import annotations

import argparse
import hashlib
import threading
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from nemo_gym.token_id_capture.sink import NG_CAPTURE_FIELD, NG_COMMIT_COORDS_FIELD
from nemo_gym.token_id_capture.staging.capture import RolloutTokenCapture
from nemo_gym.token_id_capture.staging.records import (
    CaptureAdmission,
    StagedCallRecord,
    StageResult,
)

WEIGHT_VERSION = 1


class MemoryStagingSink:
    """Gym's StagingSink contract in memory: every staged record is kept, keyed as Gym keys it."""

    def __init__(self) -> None:
        self.records: dict[str, StagedCallRecord] = {}
        self._lock = threading.Lock()

    def stage(self, record: StagedCallRecord, *, attachments: Any = None) -> StageResult:
        if attachments:
            return StageResult(ok=False, error="attachments are not supported by the fake")
        key = f"{record.rollout_id}/{record.model_call_id}"
        with self._lock:
            self.records[key] = record
        return StageResult(ok=True, staging_key=key)


def token_ids(text: str, count: int) -> list[int]:
    """Deterministic token ids for a text (the fake has no tokenizer)."""
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return [100 + digest[n % len(digest)] for n in range(count)]


def completion(body: dict[str, Any], capture: RolloutTokenCapture) -> dict[str, Any]:
    messages = body.get("messages") or []
    last = str(messages[-1].get("content") if messages else "")
    answer = f"echo: {last}"
    prompt = token_ids("\n".join(str(m.get("content")) for m in messages), 4 + 2 * len(messages))
    generated = token_ids(answer, 3)
    payload: dict[str, Any] = {
        "id": f"chatcmpl-{hashlib.sha256(answer.encode()).hexdigest()[:16]}",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model") or "fake-model",
        "prompt_token_ids": prompt,
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "token_ids": generated,
                "message": {"role": "assistant", "content": answer},
                "logprobs": {
                    "content": [
                        {
                            "token": f"token_id:{t}",
                            "logprob": -0.5,
                            "bytes": None,
                            "top_logprobs": [],
                        }
                        for t in generated
                    ]
                },
            }
        ],
        "usage": {
            "prompt_tokens": len(prompt),
            "completion_tokens": len(generated),
            "total_tokens": len(prompt) + len(generated),
        },
    }
    if NG_CAPTURE_FIELD in body:
        admission = CaptureAdmission.model_validate(body[NG_CAPTURE_FIELD])
        call = capture.begin_call(admission)
        coords = capture.complete_call(
            call,
            prompt_token_ids=prompt,
            generated_token_ids=generated,
            generated_logprobs=[-0.5] * len(generated),
        )
        payload[NG_COMMIT_COORDS_FIELD] = coords.model_dump(mode="json")
    return payload


def build_app() -> FastAPI:
    app = FastAPI()
    capture = RolloutTokenCapture(
        sink=MemoryStagingSink(), weight_version_fn=lambda: WEIGHT_VERSION
    )

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> dict[str, Any]:
        body: dict[str, Any] = await request.json()
        return completion(body, capture)

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": "fake-model", "object": "model"}]}

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    uvicorn.run(build_app(), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
