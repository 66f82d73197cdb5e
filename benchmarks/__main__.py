"""Run benchmarks: ``python -m benchmarks [name ...]`` (default: all), ``--list`` to list them.

Every module ``benchmarks/bench_<name>.py`` is a benchmark. It defines ``DESCRIPTION`` and
``main(argv: list[str]) -> None``, and prints its own figures beside a baseline measured in the
same run.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path


def discover() -> dict[str, str]:
    found = {}
    for module in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if module.name.startswith("bench_"):
            found[module.name.removeprefix("bench_")] = f"benchmarks.{module.name}"
    return dict(sorted(found.items()))


def run(argv: list[str]) -> int:
    available = discover()
    if "--list" in argv:
        for name, module_name in available.items():
            print(f"{name:20} {importlib.import_module(module_name).DESCRIPTION}")
        return 0
    names = [a for a in argv if not a.startswith("-")] or list(available)
    unknown = [n for n in names if n not in available]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(available)}")
        return 2
    passthrough = [a for a in argv if a.startswith("-")]
    for name in names:
        module = importlib.import_module(available[name])
        print(f"\n=== {name}: {module.DESCRIPTION}", flush=True)
        module.main(passthrough)
    return 0


if __name__ == "__main__":
    raise SystemExit(run(sys.argv[1:]))
