"""Same-stack baselines for the ingest benchmark: uvicorn + Starlette without the ledger.

    python -m benchmarks.bare_server --port P --mode bare|noop|lineage

The first two answer the capture routes the benchmark's clients call, with the same status codes
(single 201, batch 200 with one ``{"status": 201}`` per item), on the same server stack as
``ledger serve`` (uvicorn's defaults, so httptools and uvloop when installed):

- ``bare``: parse the body with orjson, ``executemany`` its raw items (rollout id and the
  exchange's JSON) into one SQLite table, commit (WAL, ``synchronous=FULL``), answer. No
  validation, no hash, no chain, no projection, no mirror: what storing the bytes durably
  costs on this stack. The SQL runs on the event loop's thread, one connection, one commit
  per request.
- ``noop``: read the body and answer; nothing is parsed or stored: what the HTTP request that
  carries a capture costs.
- ``lineage``: the lineage-store plug-in's two routes (``bench plugin``): a row POSTed is
  parsed with orjson, inserted with its rollout id and fingerprint into one SQLite table and
  committed (WAL, ``synchronous=FULL``); a GET by fingerprint selects the rollout's rows with
  it (an index on both). No validation, fence, generation, idempotency, chain or projection:
  what the plug-in's round trip costs on this stack.

The database file is the one ``LEDGER_DATABASE_URL`` names (``sqlite...:///<path>``), so the
benchmark's ``ServerProcess`` starts these exactly like ``ledger serve``.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
from collections.abc import Awaitable, Callable

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

_CREATED = orjson.dumps({"status": 201})


def json_response(content: object, status_code: int = 200) -> Response:
    return Response(orjson.dumps(content), status_code, media_type="application/json")


def database_path(url: str) -> str:
    prefix, _, path = url.partition(":///")
    if not prefix.startswith("sqlite") or not path:
        raise SystemExit(f"bare_server needs a sqlite URL, got {url!r}")
    return path


def durable_connection(path: str) -> sqlite3.Connection:
    """One connection for the event loop's thread: WAL, each commit synced (``FULL``)."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    return conn


def bare_app(path: str) -> Starlette:
    conn = durable_connection(path)
    conn.execute(
        "CREATE TABLE IF NOT EXISTS bare_captures"
        " (id INTEGER PRIMARY KEY, rollout_id TEXT NOT NULL, exchange TEXT NOT NULL)"
    )
    insert = "INSERT INTO bare_captures (rollout_id, exchange) VALUES (?, ?)"

    def store(rows: list[tuple[str, str]]) -> None:
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(insert, rows)
        conn.execute("COMMIT")

    async def single(request: Request) -> Response:
        body = orjson.loads(await request.body())
        store([(request.path_params["rollout_id"], orjson.dumps(body).decode())])
        return json_response({"rollout_id": request.path_params["rollout_id"]}, 201)

    async def batch(request: Request) -> Response:
        items = orjson.loads(await request.body())["items"]
        store([(item["rollout_id"], orjson.dumps(item["exchange"]).decode()) for item in items])
        return Response(
            b'{"results":[' + b",".join([_CREATED] * len(items)) + b"]}",
            media_type="application/json",
        )

    return capture_app(single, batch)


def lineage_app(path: str) -> Starlette:
    conn = durable_connection(path)
    conn.execute(
        "CREATE TABLE IF NOT EXISTS bare_rows (seq INTEGER PRIMARY KEY,"
        " rollout_id TEXT NOT NULL, fingerprint TEXT, row TEXT NOT NULL)"
    )
    conn.execute(
        "CREATE INDEX IF NOT EXISTS bare_rows_by_fingerprint ON bare_rows (rollout_id, fingerprint)"
    )

    async def record(request: Request) -> Response:
        row = orjson.loads(await request.body())
        conn.execute("BEGIN IMMEDIATE")
        cursor = conn.execute(
            "INSERT INTO bare_rows (rollout_id, fingerprint, row) VALUES (?, ?, ?)",
            (request.path_params["rollout_id"], row.get("fingerprint"), orjson.dumps(row).decode()),
        )
        conn.execute("COMMIT")
        return json_response({"outcome": "recorded", "seq": cursor.lastrowid})

    async def find(request: Request) -> Response:
        rollout_id = request.path_params["rollout_id"]
        found = conn.execute(
            "SELECT seq, row FROM bare_rows WHERE rollout_id = ? AND fingerprint = ? ORDER BY seq",
            (rollout_id, request.query_params.get("fingerprint")),
        ).fetchall()
        rows = [{"seq": seq, "row": orjson.loads(text)} for seq, text in found]
        return json_response({"rollout_id": rollout_id, "generation": 0, "rows": rows})

    return Starlette(
        routes=[
            Route("/healthz", healthz),
            Route("/v1/rollouts/{rollout_id}/ledger/rows", record, methods=["POST"]),
            Route("/v1/rollouts/{rollout_id}/ledger/rows", find, methods=["GET"]),
        ]
    )


def noop_app() -> Starlette:
    async def single(request: Request) -> Response:
        await request.body()
        return json_response({"rollout_id": request.path_params["rollout_id"]}, 201)

    async def batch(request: Request) -> Response:
        # The reply must say how many items there were, so count them without parsing.
        count = (await request.body()).count(b'"rollout_id"')
        return Response(
            b'{"results":[' + b",".join([_CREATED] * count) + b"]}",
            media_type="application/json",
        )

    return capture_app(single, batch)


Handler = Callable[[Request], Awaitable[Response]]


async def healthz(_request: Request) -> Response:
    return json_response({"status": "ok"})


def capture_app(single: Handler, batch: Handler) -> Starlette:
    """The capture routes the benchmark's clients call, and /healthz (the lean leg's too)."""
    return Starlette(
        routes=[
            Route("/healthz", healthz),
            Route("/v1/rollouts/{rollout_id}/model-calls", single, methods=["POST"]),
            Route("/v1/model-calls/batch", batch, methods=["POST"]),
        ]
    )


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    parser = argparse.ArgumentParser(prog="python -m benchmarks.bare_server")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log-level", default="warning")
    parser.add_argument("--mode", choices=("bare", "noop", "lineage"), required=True)
    args = parser.parse_args(argv)
    if args.mode == "bare":
        app = bare_app(database_path(os.environ["LEDGER_DATABASE_URL"]))
    elif args.mode == "lineage":
        app = lineage_app(database_path(os.environ["LEDGER_DATABASE_URL"]))
    else:
        app = noop_app()
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level=args.log_level)


if __name__ == "__main__":
    main()
