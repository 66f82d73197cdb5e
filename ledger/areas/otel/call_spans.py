"""A captured model call as GenAI and OpenInference attributes.

Every dialect (chat, responses, messages) is read from Gym's ModelCallRecord dump, which the
capture already normalised: model, finish reason, response id, token counts and error category
are the same fields whatever the wire format was. Only the provider name differs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ledger.areas.otel.spans import Attributes

# gen_ai.provider.name (and the older gen_ai.system) of each capture dialect.
PROVIDER_OF_DIALECT = {"chat": "openai", "responses": "openai", "messages": "anthropic"}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def call_failed(call: Mapping[str, Any]) -> bool:
    status = _int(call.get("status_code"))
    return call.get("error_category") is not None or (status is not None and status >= 400)


def call_error_type(call: Mapping[str, Any]) -> str:
    """``error.type``: the ledger's error category, else the HTTP status."""
    category = _str(call.get("error_category"))
    if category is not None:
        return category
    return str(call.get("status_code") or "_OTHER")


def call_model(call: Mapping[str, Any]) -> str | None:
    model = _str(call.get("model"))
    if model is not None:
        return model
    ref = call.get("model_ref")
    return _str(ref.get("name")) if isinstance(ref, Mapping) else None


def call_attributes(call: Mapping[str, Any]) -> Attributes:
    """The call's attributes without content (model, tokens, finish reason, ids, status)."""
    attributes: Attributes = {
        "gen_ai.operation.name": "chat",
        "openinference.span.kind": "LLM",
    }
    dialect = _str(call.get("dialect"))
    if dialect is not None:
        attributes["ledger.dialect"] = dialect
        provider = PROVIDER_OF_DIALECT.get(dialect)
        if provider is not None:
            attributes["gen_ai.provider.name"] = provider
            attributes["gen_ai.system"] = provider
            attributes["llm.provider"] = provider
    model = call_model(call)
    if model is not None:
        attributes["gen_ai.request.model"] = model
        attributes["gen_ai.response.model"] = model
        attributes["llm.model_name"] = model
    ref = call.get("model_ref")
    if isinstance(ref, Mapping) and _str(ref.get("name")) is not None:
        attributes["ledger.model_ref"] = str(ref["name"])
    for key, name in (
        ("model_call_id", "ledger.model_call_id"),
        ("response_id", "gen_ai.response.id"),
        ("client_session_id", "ledger.client_session_id"),
    ):
        value = _str(call.get(key))
        if value is not None:
            attributes[name] = value
    finish = _str(call.get("finish_reason"))
    if finish is not None:
        attributes["gen_ai.response.finish_reasons"] = (finish,)
    index = _int(call.get("call_index"))
    if index is not None:
        attributes["ledger.call_index"] = index
    status = _int(call.get("status_code"))
    if status is not None:
        attributes["http.response.status_code"] = status
    attributes.update(_token_attributes(call))
    ttft = call.get("latency_ttft_ms")
    if isinstance(ttft, int | float) and not isinstance(ttft, bool):
        attributes["ledger.latency_ttft_ms"] = float(ttft)
    if call_failed(call):
        attributes["error.type"] = call_error_type(call)
    return attributes


def _token_attributes(call: Mapping[str, Any]) -> Attributes:
    attributes: Attributes = {}
    pairs = (
        ("tokens_in", ("gen_ai.usage.input_tokens", "llm.token_count.prompt")),
        ("tokens_out", ("gen_ai.usage.output_tokens", "llm.token_count.completion")),
        ("tokens_total", ("llm.token_count.total",)),
        (
            "tokens_reasoning",
            ("gen_ai.usage.reasoning_tokens", "llm.token_count.completion_details.reasoning"),
        ),
        (
            "cached_tokens",
            ("gen_ai.usage.cache_read_input_tokens", "llm.token_count.prompt_details.cache_read"),
        ),
        (
            "cache_creation_tokens",
            (
                "gen_ai.usage.cache_creation_input_tokens",
                "llm.token_count.prompt_details.cache_write",
            ),
        ),
    )
    for key, names in pairs:
        value = _int(call.get(key))
        if value is not None:
            for name in names:
                attributes[name] = value
    return attributes
