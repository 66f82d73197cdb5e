"""The projector process ``ledger serve`` starts beside itself:
``python -m ledger.app.projector_child --database-url URL``.

It runs what ``ledger project`` runs (``run_projector``) until its standard input closes (the
server's pipe: the server stopped or died). It is a module of its own rather than a hidden
option of ``ledger project`` because a projector's start is mostly imports, and the command line
imports every command of every area: the server starts a projector again after every crash,
and this one follows the log sooner. The rest of its settings come from the environment the
server hands it (``ProjectorProcess``).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
from collections.abc import Sequence

from pydantic import ValidationError

from ledger.app.cli.common import run_async
from ledger.app.config import Settings
from ledger.app.http.validation_errors import describe_validation_error
from ledger.app.projector import run_projector


def run(settings: Settings, *, log_level: str, until_stdin_closes: bool) -> None:
    """Run the projector in this process (``ledger project`` and the server's child both do):
    its log lines on stderr, until interrupted or, for the server's child, until its standard
    input closes. ``settings`` say ``projector="process"``."""
    logging.basicConfig(
        level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    with contextlib.suppress(KeyboardInterrupt):
        run_async(lambda: run_projector(settings, until_stdin_closes=until_stdin_closes))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m ledger.app.projector_child",
        description="The projector `ledger serve` runs: exits when standard input closes.",
    )
    parser.add_argument("--database-url", required=True)
    args = parser.parse_args(argv)
    # This process is the projector, whatever LEDGER_PROJECTOR says (it tells `serve` where
    # the followers run).
    try:
        settings = Settings(database_url=args.database_url, projector="process")
    except ValidationError as exc:
        raise SystemExit(f"error: {describe_validation_error(exc, 'settings')}") from None
    run(settings, log_level="info", until_stdin_closes=True)


if __name__ == "__main__":
    main()
