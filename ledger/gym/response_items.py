"""Gym's Responses input-item union (``list[NeMoGymResponseInputItem]``, the type of an
``AgentInvocation.conversation``), as our own pydantic models, pure and without I/O.

Gym 0.7.0 routes each item to ONE model by its shape before validating it (a tagged union with a
callable discriminator), so a wrong item fails with that model's errors rather than matching
some other member. ``item_tag`` applies the same routing rules; the models below then check what
Gym's models check: required fields, types (pydantic's lax mode, as Gym's), literals. Keys the
models do not name are accepted, as Gym's models accept them.

The message, function-call, function-output and reasoning items (what harnesses send) are
modelled field for field, down to content parts and annotations. The hosted-tool items
(file search, computer, shell, MCP, ...) are checked at their top level; their nested objects
(an ``action``, an ``operation``, ``tools`` entries) are only required to be objects.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    Discriminator,
    Tag,
    TypeAdapter,
    ValidationError,
    model_validator,
)

ItemStatus = Literal["in_progress", "completed", "incomplete"]
Phase = Literal["commentary", "final_answer"]
JsonObject = dict[str, Any]

# --- content parts -------------------------------------------------------------------------


class _Part(BaseModel):
    """Content parts are TypedDicts in Gym: keys they do not name are dropped, not refused."""


class InputText(_Part):
    type: Literal["input_text"]
    text: str


class InputImage(_Part):
    type: Literal["input_image"]
    detail: Literal["low", "high", "auto", "original"]
    file_id: str | None = None
    image_url: str | None = None


class InputFile(_Part):
    type: Literal["input_file"]
    detail: Literal["low", "high"] | None = None
    file_data: str | None = None
    file_id: str | None = None
    file_url: str | None = None
    filename: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _no_null_strings(cls, value: Any) -> Any:
        # Only file_id may be null in Gym's part; the others are plain ``str`` when present.
        if isinstance(value, dict):
            for name in ("detail", "file_data", "file_url", "filename"):
                if name in value and value[name] is None:
                    raise ValueError(f"input_file.{name} must be a string")
        return value


def _video_source_url(source: Any) -> Any:
    return source.get("url") if isinstance(source, dict) else source


class InputVideo(_Part):
    type: Literal["input_video"]
    video_url: str | JsonObject | None = None
    video: str | JsonObject | None = None

    @model_validator(mode="before")
    @classmethod
    def _one_source(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        sources = [key for key in ("video_url", "video") if key in value]
        if len(sources) != 1:
            raise ValueError("input_video requires exactly one of video_url or video")
        url = _video_source_url(value[sources[0]])
        if not isinstance(url, str) or not url.strip():
            raise ValueError(f"input_video.{sources[0]} must contain a non-empty URL")
        return value


InputPart = InputText | InputImage | InputFile | InputVideo


class OutputTextFileCitation(_Part):
    type: Literal["file_citation"]
    file_id: str
    filename: str
    index: int


class OutputTextUrlCitation(_Part):
    type: Literal["url_citation"]
    url: str
    title: str
    start_index: int
    end_index: int


class OutputTextContainerFileCitation(_Part):
    type: Literal["container_file_citation"]
    container_id: str
    file_id: str
    filename: str
    start_index: int
    end_index: int


class OutputTextFilePath(_Part):
    type: Literal["file_path"]
    file_id: str
    index: int


Annotation = (
    OutputTextFileCitation
    | OutputTextUrlCitation
    | OutputTextContainerFileCitation
    | OutputTextFilePath
)


class TopLogprob(_Part):
    token: str
    bytes: list[int]
    logprob: float


class Logprob(_Part):
    token: str
    bytes: list[int]
    logprob: float
    top_logprobs: list[TopLogprob]


class OutputText(BaseModel):
    type: Literal["output_text"] = "output_text"
    text: str
    annotations: list[Annotation]
    logprobs: list[Logprob] | None = None


class OutputRefusal(BaseModel):
    type: Literal["refusal"] = "refusal"
    refusal: str


class OutputInputText(_Part):
    """A text part of a function call's output list."""

    type: Literal["input_text"]
    text: str


class OutputInputImage(_Part):
    type: Literal["input_image"]
    detail: Literal["low", "high", "auto", "original"] | None = None
    file_id: str | None = None
    image_url: str | None = None


class OutputInputFile(_Part):
    type: Literal["input_file"]
    detail: Literal["low", "high"] | None = None
    file_data: str | None = None
    file_id: str | None = None
    file_url: str | None = None
    filename: str | None = None


ToolOutputPart = OutputInputText | OutputInputImage | OutputInputFile


class SummaryText(BaseModel):
    type: Literal["summary_text"]
    text: str


class ReasoningText(BaseModel):
    type: Literal["reasoning_text"]
    text: str


# --- items -----------------------------------------------------------------------------


class EasyInputMessage(BaseModel):
    type: Literal["message"] = "message"
    role: Literal["user", "assistant", "system", "developer"]
    content: str | list[InputPart]
    phase: Phase | None = None


class InputMessage(BaseModel):
    type: Literal["message"] = "message"
    role: Literal["user", "system", "developer"]
    content: list[InputPart]
    status: ItemStatus = "completed"


class OutputMessage(BaseModel):
    type: Literal["message"] = "message"
    id: str
    role: Literal["assistant"] = "assistant"
    content: list[OutputText | OutputRefusal]
    status: ItemStatus = "completed"
    phase: Phase | None = None


class FunctionCall(BaseModel):
    type: Literal["function_call"] = "function_call"
    call_id: str
    name: str
    arguments: str
    id: str | None = None
    status: ItemStatus | None = None
    namespace: str | None = None


class FunctionCallOutput(BaseModel):
    type: Literal["function_call_output"] = "function_call_output"
    call_id: str
    output: str | list[ToolOutputPart]
    id: str | None = None
    status: ItemStatus | None = None


class ReasoningItem(BaseModel):
    type: Literal["reasoning"] = "reasoning"
    id: str
    summary: list[SummaryText]
    encrypted_content: str | None = None
    content: list[ReasoningText] | None = None


class McpCall(BaseModel):
    type: Literal["mcp_call"] = "mcp_call"
    name: str
    arguments: str
    id: str | None = None
    server_label: str | None = None
    approval_request_id: str | None = None
    error: str | None = None
    output: str | None = None
    status: str | None = None


class McpListTools(BaseModel):
    """Also Gym's fallback for an untyped item it cannot place: nearly anything fits."""

    type: Literal["mcp_list_tools"] = "mcp_list_tools"
    tools: list[Any] = []
    id: str | None = None
    server_label: str | None = None
    error: str | None = None


class McpApprovalRequest(BaseModel):
    type: Literal["mcp_approval_request"] = "mcp_approval_request"
    name: str
    arguments: str
    id: str | None = None
    server_label: str | None = None


class McpApprovalResponse(BaseModel):
    type: Literal["mcp_approval_response"]
    approval_request_id: str
    approve: bool
    id: str | None = None
    reason: str | None = None


class FileSearchCall(BaseModel):
    type: Literal["file_search_call"]
    id: str
    queries: list[str]
    status: Literal["in_progress", "searching", "completed", "incomplete", "failed"]
    results: list[JsonObject] | None = None


class WebSearchCall(BaseModel):
    type: Literal["web_search_call"]
    id: str
    action: JsonObject
    status: Literal["in_progress", "searching", "completed", "failed"]


class ComputerCall(BaseModel):
    type: Literal["computer_call"]
    id: str
    call_id: str
    pending_safety_checks: list[JsonObject]
    status: ItemStatus


class ComputerCallOutput(BaseModel):
    type: Literal["computer_call_output"]
    call_id: str
    output: JsonObject
    id: str | None = None
    acknowledged_safety_checks: list[JsonObject] | None = None
    status: ItemStatus | None = None


class ImageGenerationCall(BaseModel):
    type: Literal["image_generation_call"]
    id: str
    status: Literal["in_progress", "completed", "generating", "failed"]
    result: str | None = None


class CodeInterpreterCall(BaseModel):
    type: Literal["code_interpreter_call"]
    id: str
    container_id: str
    status: Literal["in_progress", "completed", "incomplete", "interpreting", "failed"]
    code: str | None = None
    outputs: list[JsonObject] | None = None


class LocalShellCall(BaseModel):
    type: Literal["local_shell_call"]
    id: str
    call_id: str
    action: JsonObject
    status: ItemStatus


class LocalShellCallOutput(BaseModel):
    type: Literal["local_shell_call_output"]
    id: str
    output: str
    status: ItemStatus | None = None


class CustomToolCall(BaseModel):
    type: Literal["custom_tool_call"]
    call_id: str
    name: str
    input: str
    id: str | None = None
    namespace: str | None = None


class CustomToolCallOutput(BaseModel):
    type: Literal["custom_tool_call_output"]
    call_id: str
    output: str | list[JsonObject]
    id: str | None = None


class ApplyPatchCall(BaseModel):
    type: Literal["apply_patch_call"]
    id: str
    call_id: str
    operation: JsonObject
    status: Literal["in_progress", "completed"]
    created_by: str | None = None


class ApplyPatchCallOutput(BaseModel):
    type: Literal["apply_patch_call_output"]
    id: str
    call_id: str
    status: Literal["completed", "failed"]
    created_by: str | None = None
    output: str | None = None


class CompactionItem(BaseModel):
    type: Literal["compaction"]
    id: str
    encrypted_content: str
    created_by: str | None = None


class ShellCall(BaseModel):
    type: Literal["shell_call"]
    id: str
    call_id: str
    action: JsonObject
    status: ItemStatus
    created_by: str | None = None


class ShellCallOutput(BaseModel):
    type: Literal["shell_call_output"]
    id: str
    call_id: str
    output: list[JsonObject]
    status: ItemStatus
    max_output_length: int | None = None
    created_by: str | None = None


class ToolSearchCall(BaseModel):
    type: Literal["tool_search_call"]
    id: str
    arguments: Any
    execution: Literal["server", "client"]
    status: ItemStatus
    call_id: str | None = None
    created_by: str | None = None


class ToolSearchOutput(BaseModel):
    type: Literal["tool_search_output"]
    id: str
    execution: Literal["server", "client"]
    status: ItemStatus
    tools: list[JsonObject]
    call_id: str | None = None
    created_by: str | None = None


class CompactionTrigger(BaseModel):
    type: Literal["compaction_trigger"]


class AdditionalTools(BaseModel):
    type: Literal["additional_tools"]
    role: Literal["developer"]
    tools: list[JsonObject]
    id: str | None = None


# --- training variants: the item plus its complete token metadata ------------------------

REQUIRED_TOKEN_FIELDS = frozenset(
    {"prompt_token_ids", "generation_token_ids", "generation_log_probs"}
)
TOKEN_FIELDS = REQUIRED_TOKEN_FIELDS | {"routed_experts"}


class _TokenMetadata(BaseModel):
    prompt_token_ids: list[int]
    generation_token_ids: list[int]
    generation_log_probs: list[float]
    routed_experts: Any = None


class EasyInputMessageForTraining(EasyInputMessage, _TokenMetadata):
    pass


class InputMessageForTraining(InputMessage, _TokenMetadata):
    pass


class OutputMessageForTraining(OutputMessage, _TokenMetadata):
    pass


class FunctionCallForTraining(FunctionCall, _TokenMetadata):
    pass


class ReasoningItemForTraining(ReasoningItem, _TokenMetadata):
    pass


# --- routing (Gym 0.7.0's discriminator rules) -------------------------------------------

_SIMPLE_ROLES = frozenset({"user", "system", "developer"})
_MESSAGE_ROLES = _SIMPLE_ROLES | {"assistant"}
_STATUSES = frozenset({"in_progress", "completed", "incomplete"})
_OUTPUT_PARTS = frozenset({"output_text", "refusal"})
_TRAINABLE = frozenset(
    {"easy_message", "input_message", "output_message", "function_call", "reasoning"}
)
TRAINING_SUFFIX = "__training"


def _first_part_type(content: Any) -> Any:
    if not isinstance(content, list) or not content:
        return None
    first = content[0]
    if isinstance(first, dict):
        return first.get("type") or ("refusal" if "refusal" in first else None)
    return None


def _message_tag(value: JsonObject) -> str:
    content = value.get("content")
    if value.get("role") in _SIMPLE_ROLES:
        if isinstance(content, list) and value.get("status") in _STATUSES:
            return "input_message"
        return "easy_message"
    if isinstance(content, list):
        if content:
            if _first_part_type(content) in _OUTPUT_PARTS:
                return "output_message"
        elif isinstance(value.get("id"), str):
            return "output_message"
    return "easy_message"


def _untyped_tag(value: JsonObject) -> str:
    role, content = value.get("role"), value.get("content")
    if role in _MESSAGE_ROLES and isinstance(content, str | list):
        tag = _message_tag(value)
        if tag == "output_message":
            if isinstance(value.get("id"), str):
                return tag
        elif _first_part_type(content) not in _OUTPUT_PARTS:
            return tag
        return "mcp_list_tools"
    if (
        "role" not in value
        and isinstance(value.get("id"), str)
        and isinstance(content, list)
        and (not content or _first_part_type(content) in _OUTPUT_PARTS)
    ):
        return "output_message"
    if "arguments" in value and "name" in value:
        return "function_call" if "call_id" in value else "mcp_call"
    if isinstance(value.get("call_id"), str) and "output" in value:
        return "function_call_output"
    if isinstance(value.get("id"), str) and isinstance(value.get("summary"), list):
        return "reasoning"
    return "mcp_list_tools"


def item_tag(value: Any) -> str | None:
    """The union member an item is validated as (None: not an item at all)."""
    if not isinstance(value, dict):
        return None
    item_type = value.get("type")
    if item_type == "message":
        tag = _message_tag(value)
    elif isinstance(item_type, str):
        tag = item_type
    elif item_type is None:
        tag = _untyped_tag(value)
    else:
        return None
    if tag in _TRAINABLE and REQUIRED_TOKEN_FIELDS.issubset(value):
        return tag + TRAINING_SUFFIX
    return tag


def _complete_token_metadata(value: Any) -> Any:
    if isinstance(value, dict):
        present = TOKEN_FIELDS.intersection(value)
        missing = REQUIRED_TOKEN_FIELDS.difference(present)
        if present and missing:
            raise ValueError(
                "Token metadata must include all required fields; missing: "
                + ", ".join(sorted(missing))
            )
    return value


_MEMBERS: dict[str, type[BaseModel]] = {
    "easy_message": EasyInputMessage,
    "input_message": InputMessage,
    "output_message": OutputMessage,
    "function_call": FunctionCall,
    "function_call_output": FunctionCallOutput,
    "reasoning": ReasoningItem,
    "mcp_call": McpCall,
    "mcp_list_tools": McpListTools,
    "mcp_approval_request": McpApprovalRequest,
    "file_search_call": FileSearchCall,
    "web_search_call": WebSearchCall,
    "computer_call": ComputerCall,
    "image_generation_call": ImageGenerationCall,
    "code_interpreter_call": CodeInterpreterCall,
    "local_shell_call": LocalShellCall,
    "custom_tool_call": CustomToolCall,
    "computer_call_output": ComputerCallOutput,
    "custom_tool_call_output": CustomToolCallOutput,
    "local_shell_call_output": LocalShellCallOutput,
    "mcp_approval_response": McpApprovalResponse,
    "apply_patch_call": ApplyPatchCall,
    "apply_patch_call_output": ApplyPatchCallOutput,
    "compaction": CompactionItem,
    "shell_call": ShellCall,
    "shell_call_output": ShellCallOutput,
    "tool_search_call": ToolSearchCall,
    "tool_search_output": ToolSearchOutput,
    "compaction_trigger": CompactionTrigger,
    "additional_tools": AdditionalTools,
    "easy_message__training": EasyInputMessageForTraining,
    "input_message__training": InputMessageForTraining,
    "output_message__training": OutputMessageForTraining,
    "function_call__training": FunctionCallForTraining,
    "reasoning__training": ReasoningItemForTraining,
}

# The union, built from the table above (one tag per member, as in Gym).
ResponseInputItem = Annotated[
    Annotated[EasyInputMessage, Tag("easy_message")]
    | Annotated[InputMessage, Tag("input_message")]
    | Annotated[OutputMessage, Tag("output_message")]
    | Annotated[FunctionCall, Tag("function_call")]
    | Annotated[FunctionCallOutput, Tag("function_call_output")]
    | Annotated[ReasoningItem, Tag("reasoning")]
    | Annotated[McpCall, Tag("mcp_call")]
    | Annotated[McpListTools, Tag("mcp_list_tools")]
    | Annotated[McpApprovalRequest, Tag("mcp_approval_request")]
    | Annotated[FileSearchCall, Tag("file_search_call")]
    | Annotated[WebSearchCall, Tag("web_search_call")]
    | Annotated[ComputerCall, Tag("computer_call")]
    | Annotated[ImageGenerationCall, Tag("image_generation_call")]
    | Annotated[CodeInterpreterCall, Tag("code_interpreter_call")]
    | Annotated[LocalShellCall, Tag("local_shell_call")]
    | Annotated[CustomToolCall, Tag("custom_tool_call")]
    | Annotated[ComputerCallOutput, Tag("computer_call_output")]
    | Annotated[CustomToolCallOutput, Tag("custom_tool_call_output")]
    | Annotated[LocalShellCallOutput, Tag("local_shell_call_output")]
    | Annotated[McpApprovalResponse, Tag("mcp_approval_response")]
    | Annotated[ApplyPatchCall, Tag("apply_patch_call")]
    | Annotated[ApplyPatchCallOutput, Tag("apply_patch_call_output")]
    | Annotated[CompactionItem, Tag("compaction")]
    | Annotated[ShellCall, Tag("shell_call")]
    | Annotated[ShellCallOutput, Tag("shell_call_output")]
    | Annotated[ToolSearchCall, Tag("tool_search_call")]
    | Annotated[ToolSearchOutput, Tag("tool_search_output")]
    | Annotated[CompactionTrigger, Tag("compaction_trigger")]
    | Annotated[AdditionalTools, Tag("additional_tools")]
    | Annotated[EasyInputMessageForTraining, Tag("easy_message__training")]
    | Annotated[InputMessageForTraining, Tag("input_message__training")]
    | Annotated[OutputMessageForTraining, Tag("output_message__training")]
    | Annotated[FunctionCallForTraining, Tag("function_call__training")]
    | Annotated[ReasoningItemForTraining, Tag("reasoning__training")],
    Discriminator(item_tag),
    BeforeValidator(_complete_token_metadata),
]

_ADAPTER: TypeAdapter[Any] = TypeAdapter(ResponseInputItem)
_MAX_ERRORS_NAMED = 3
_MAX_MESSAGE = 600


def item_error(item: Any) -> str | None:
    """Why ``item`` is not a Responses input item Gym accepts (bounded), or None if it is."""
    try:
        _ADAPTER.validate_python(item)
    except ValidationError as exc:
        tag = item_tag(item)
        errors = exc.errors(include_url=False, include_context=False, include_input=False)
        named = "; ".join(
            f"{'.'.join(str(part) for part in error['loc'][1:]) or '(item)'}: {error['msg']}"
            for error in errors[:_MAX_ERRORS_NAMED]
        )
        more = (
            f" (+{len(errors) - _MAX_ERRORS_NAMED} more)" if len(errors) > _MAX_ERRORS_NAMED else ""
        )
        kind = f"read as {tag}" if tag else "no usable type"
        return f"not a Responses input item ({kind}): {named}{more}"[:_MAX_MESSAGE]
    return None


def checked_conversation_item(item: JsonObject) -> JsonObject:
    """The item unchanged when it validates as Gym's ``NeMoGymResponseInputItem``."""
    reason = item_error(item)
    if reason is not None:
        raise ValueError(reason)
    return item


MEMBER_TAGS = tuple(_MEMBERS)
