"""Gym 0.7.0 on Python 3.11: the one compatibility attribute it needs, and an entrypoint runner.

nemo-gym 0.7.0 declares Python >= 3.13; the Gym leg installs it on this machine's 3.11
(scripts/gym-env). Its plug-in loader and its model server's capture middleware check stores
with ``isinstance`` against runtime Protocols and read ``Protocol.__protocol_attrs__``, which
typing sets only from 3.12 on: on 3.11 they raise AttributeError before looking at the store.
Setting that attribute the way 3.12 does is the whole shim; nothing of Gym is patched.

``python -m gym_tests.py311_shim app.py`` applies it in a server process Gym's launcher would
start as ``python app.py``, then runs the entrypoint unchanged as ``__main__``. This module
imports nothing of the test suite: the server's working directory (Gym's server folder) has a
``tests`` package of its own that shadows ours."""

from __future__ import annotations

import runpy
import sys
import typing


def allow_gym_protocol_checks() -> None:
    """Compute ``__protocol_attrs__`` as 3.12 does (and keep it out of the runtime isinstance
    check) so Gym's own checks run unchanged. See docs/contract.md, "Gym 0.7.0 on 3.11"."""
    if sys.version_info >= (3, 12):
        return
    from nemo_gym.token_id_capture import protocols

    excluded: list[str] = typing.EXCLUDED_ATTRIBUTES  # type: ignore[attr-defined]
    if "__protocol_attrs__" not in excluded:
        excluded.append("__protocol_attrs__")
    for protocol in (
        protocols.LineageResolver,
        protocols.CaptureLedger,
        protocols.TokenSink,
        protocols.TokenSource,
    ):
        protocol.__protocol_attrs__ = typing._get_protocol_attrs(protocol)  # type: ignore[attr-defined]


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m gym_tests.py311_shim ENTRYPOINT.py")
    entrypoint = sys.argv[1]
    allow_gym_protocol_checks()
    sys.argv = [entrypoint]
    runpy.run_path(entrypoint, run_name="__main__")


if __name__ == "__main__":
    main()
