"""Request bodies of the JSON routes: a JSON content type, one parse (``json_body``), and one
pydantic validation whose errors are bounded.

FastAPI never sees these bodies as parameters: it would validate them a second time and
answer a 422 that echoes every bad input whole. ``request_body_schema`` keeps them documented.
"""

from __future__ import annotations

from typing import Any, TypeVar

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import TypeAdapter, ValidationError

from ledger.app.http.deps import get_ledger
from ledger.app.http.errors import bounded_error
from ledger.app.http.json_body import MAX_SHOWN, JsonBody, parse_json
from ledger.app.http.validation_errors import (
    MAX_ERRORS_LISTED,
    describe_validation_error,
    too_many_errors,
)
from ledger.log.errors import InvalidPayload, UnsupportedMediaType

T = TypeVar("T")


def is_json_media_type(content_type: str | None) -> bool:
    """``application/json`` or ``application/<anything>+json``, parameters ignored."""
    if not content_type:
        return False
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


def require_json_content_type(request: Request) -> None:
    # A browser can send text/plain or a form across sites without a preflight; JSON it cannot.
    if not is_json_media_type(request.headers.get("content-type")):
        raise UnsupportedMediaType("the body must be JSON: send content-type: application/json")


async def read_json(request: Request, *, wide_integers: bool = False) -> JsonBody:
    """The body parsed once, with its problems (see ``json_body``)."""
    require_json_content_type(request)
    raw = await request.body()
    settings = get_ledger(request).settings
    return parse_json(raw, max_depth=settings.max_json_depth, wide_integers=wide_integers)


def validate_as(adapter: TypeAdapter[T], value: Any, prefix: str = "body") -> T:
    """The one validation of a parsed body; 422 naming the first problems."""
    try:
        return adapter.validate_python(value)
    except ValidationError as exc:
        raise InvalidPayload(describe_validation_error(exc, prefix)) from None


def validate_as_fastapi(adapter: TypeAdapter[T], body: JsonBody) -> T:
    """As ``validate_as`` but answering FastAPI's 422 shape (Gym's control routes keep it)."""
    if body.problems:
        raise RequestValidationError(
            [
                {"type": "value_error", "loc": ("body", *p.path), "msg": p.message}
                for p in body.problems[:MAX_SHOWN]
            ]
        )
    try:
        return adapter.validate_python(body.value)
    except ValidationError as exc:
        if exc.error_count() > MAX_ERRORS_LISTED:
            message = too_many_errors(exc, "body")
            raise RequestValidationError(
                [{"type": "too_many_errors", "loc": ("body",), "msg": message}]
            ) from None
        errors = exc.errors(include_url=False)
        raise RequestValidationError(
            [bounded_error({**e, "loc": ("body", *e["loc"])}) for e in errors[:MAX_SHOWN]]
        ) from None


def request_body_schema(adapter: TypeAdapter[Any]) -> dict[str, Any]:
    """``openapi_extra`` documenting a JSON request body (its ``$defs`` are moved into the
    document's components by ``openapi.install_openapi``)."""
    return {
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {
                    "schema": adapter.json_schema(
                        by_alias=True, ref_template="#/components/schemas/{model}"
                    )
                }
            },
        }
    }
