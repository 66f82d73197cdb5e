"""The OpenAPI document: every ``$ref`` resolvable, and the error answers documented.

Request bodies are documented with ``openapi_extra`` (the routes parse them themselves, see
``body.py``); pydantic puts the models such a schema refers to under its own ``$defs``, which
nothing in the document resolves. ``install_openapi`` moves them into
``components/schemas``. Error statuses every route of a kind can answer (a refused Host, a
missing token, a body that is too large, not JSON or invalid) are added here; the ones that
depend on the route (404, 409, 410) are declared on the route with ``error_responses``.

The document and its two renderings (``/docs``, ``/redoc``) are served here rather than by
FastAPI, so that they take the read token like every read (FastAPI's own routes take none).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse, JSONResponse

from ledger.app.http.auth import ReadAuth

ERROR_SCHEMA_NAME = "ErrorBody"
ERROR_SCHEMA: dict[str, Any] = {
    "title": ERROR_SCHEMA_NAME,
    "type": "object",
    "properties": {"detail": {"title": "Detail", "description": "what is wrong (bounded)"}},
    "required": ["detail"],
}
DESCRIPTIONS = {
    400: "bad request: invalid rollout id, Host header not allowed, bad parameter",
    401: "missing or invalid bearer token",
    404: "not found",
    408: "request body not received in time",
    409: "conflict: the same id with different content, or a min_seq beyond the log's head",
    410: "the rollout is retired",
    413: "request body too large",
    415: "the body is not JSON (content-type must be application/json)",
    422: "invalid body or parameter (the first problems, named)",
    503: "unavailable: the database, or the views behind past the wait's bound (Retry-After)",
}
# Load balancers ask these two without a token; /metrics takes the read or metrics token.
UNAUTHENTICATED_PATHS = frozenset({"/healthz", "/readyz"})
OPENAPI_URL = "/openapi.json"


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """``responses=`` of a route for its route-specific error statuses."""
    return {status: _error_response(status) for status in statuses}


def _error_response(status: int) -> dict[str, Any]:
    return {
        "description": DESCRIPTIONS[status],
        "content": {
            "application/json": {"schema": {"$ref": f"#/components/schemas/{ERROR_SCHEMA_NAME}"}}
        },
    }


def _hoist_defs(node: Any, schemas: dict[str, Any]) -> None:
    """Move every nested ``$defs`` into ``schemas`` and point its references there."""
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, dict):
            defs = current.pop("$defs", None)
            if isinstance(defs, dict):
                for name, schema in defs.items():
                    schemas.setdefault(name, schema)
                    stack.append(schema)
            ref = current.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                current["$ref"] = "#/components/schemas/" + ref.removeprefix("#/$defs/")
            stack.extend(current.values())
        elif isinstance(current, list):
            stack.extend(current)


def _document_errors(path: str, method: str, operation: dict[str, Any]) -> None:
    responses = operation.setdefault("responses", {})
    statuses = [400]
    if path not in UNAUTHENTICATED_PATHS:
        statuses.append(401)
    if "requestBody" in operation:
        statuses += [408, 413, 415, 422]
    if "422" in responses:
        # FastAPI documents its own list-of-errors shape; a body the route parses itself is
        # refused with a string detail (not JSON, too deep): document the shape both share.
        statuses.append(422)
        del responses["422"]
    for status in statuses:
        responses.setdefault(str(status), _error_response(status))


def build_openapi(app: FastAPI) -> dict[str, Any]:
    document = get_openapi(
        title=app.title,
        version=app.version,
        description=app.description,
        routes=app.routes,
    )
    components = document.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    schemas.setdefault(ERROR_SCHEMA_NAME, ERROR_SCHEMA)
    _hoist_defs(document["paths"], schemas)
    _hoist_defs(schemas, schemas)
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            _document_errors(path, method, operation)
    return document


def install_openapi(app: FastAPI) -> None:
    """Serve ``build_openapi`` (built once, on the first request for it) at ``/openapi.json``,
    rendered at ``/docs`` and ``/redoc``, all three behind the read token when it is set. The
    app must be made with ``openapi_url=None`` (and so without FastAPI's own docs routes)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = build_openapi(app)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

    async def document(_auth: ReadAuth) -> JSONResponse:
        return JSONResponse(app.openapi())

    async def swagger_ui(_auth: ReadAuth) -> HTMLResponse:
        return get_swagger_ui_html(openapi_url=OPENAPI_URL, title=f"{app.title} - Swagger UI")

    async def redoc(_auth: ReadAuth) -> HTMLResponse:
        return get_redoc_html(openapi_url=OPENAPI_URL, title=f"{app.title} - ReDoc")

    app.add_api_route(OPENAPI_URL, document, methods=["GET"], include_in_schema=False)
    app.add_api_route("/docs", swagger_ui, methods=["GET"], include_in_schema=False)
    app.add_api_route("/redoc", redoc, methods=["GET"], include_in_schema=False)
