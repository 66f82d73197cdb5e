"""A diagnostic server for the ingest benchmark: ``ledger serve`` with only some of the write
side's projections (the views follow the log in the projector either way).

    python -m benchmarks.ingest_server --port P --projectors rollouts,captures,lineage

Reads the same ``LEDGER_*`` settings as ``ledger serve`` and runs the same application on
uvicorn; only the projector list differs. Not a product configuration: the left-out projections
are not maintained, so the routes that read them serve stale or missing data. It exists so the
benchmark can show, in one run, what each projection costs per capture.
"""

from __future__ import annotations

import argparse
import asyncio
import logging

from ledger.app.areas import write_side_projectors
from ledger.app.config import Settings
from ledger.log import migrate
from ledger.log.projector import Projector

# Others read the rollouts projection, so it is never left out.
REQUIRED = "rollouts"


def chosen_projectors(names: str) -> list[Projector]:
    """The named projections, in the default order (``rollouts`` must be one of them)."""
    wanted = {name.strip() for name in names.split(",") if name.strip()}
    available = write_side_projectors()
    unknown = wanted - {projector.name for projector in available}
    if unknown:
        known = ", ".join(projector.name for projector in available)
        raise SystemExit(f"unknown projection(s) {', '.join(sorted(unknown))}; known: {known}")
    if REQUIRED not in wanted:
        raise SystemExit(f"the {REQUIRED} projection is required")
    return [projector for projector in available if projector.name in wanted]


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    from ledger.app.http.app import create_app

    parser = argparse.ArgumentParser(prog="python -m benchmarks.ingest_server")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log-level", default="warning")
    parser.add_argument(
        "--projectors",
        required=True,
        help="comma-separated projection names, e.g. rollouts,captures,lineage",
    )
    args = parser.parse_args(argv)
    projectors = chosen_projectors(args.projectors)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    settings = Settings(port=args.port)
    settings.check_bind_is_safe()
    asyncio.run(migrate.ensure_at_head(settings.resolved_database_url))
    uvicorn.run(
        create_app(settings, projectors),
        host=settings.host,
        port=settings.port,
        log_level=args.log_level,
    )


if __name__ == "__main__":
    main()
