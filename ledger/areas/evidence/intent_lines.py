"""Gym's ``<id>.tokens.intents`` file: one bare ``model_call_id`` a line, appended (and
fsynced) by its token store before a call is dispatched (``TokenCaptureStore.begin_call``).
It sits in the token-capture dir, which is the model-call capture dir unless
``token_id_capture.dir`` is set. Gym reads it back as ``line.strip()`` of every non-blank line;
so does this, but a line that is not a model call id the ledger can store (not UTF-8, not
printable, too long) is counted instead of recorded."""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import TypeAdapter, ValidationError

from ledger.gym.capture_lines import ModelCallId

INTENTS_SUFFIX = ".tokens.intents"
_MODEL_CALL_ID: TypeAdapter[str] = TypeAdapter(ModelCallId)


@dataclass
class ParsedIntents:
    ids: list[str] = field(default_factory=list)
    unreadable: int = 0


def parse_intent_lines(lines: list[bytes]) -> ParsedIntents:
    parsed = ParsedIntents()
    for raw in lines:
        stripped = raw.strip()
        if not stripped:
            continue
        try:
            parsed.ids.append(_MODEL_CALL_ID.validate_python(stripped.decode("utf-8")))
        except (UnicodeDecodeError, ValidationError):
            parsed.unreadable += 1
    return parsed


def complete_lines(data: bytes) -> tuple[list[bytes], int]:
    """The complete lines of ``data`` (a partial last line is still being written) and the
    number of bytes they take, newlines included."""
    end = data.rfind(b"\n") + 1
    return data[:end].split(b"\n")[:-1], end


def rollout_of_intents(file_name: str) -> str | None:
    if file_name.endswith(INTENTS_SUFFIX) and len(file_name) > len(INTENTS_SUFFIX):
        return file_name[: -len(INTENTS_SUFFIX)]
    return None
