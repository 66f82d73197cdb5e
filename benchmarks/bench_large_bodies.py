"""What an accepted body at the limit costs in server memory (issue 31 §2.5: at most 10x the
body limit under any body shape, four concurrent bodies included).

Each shape is a capture of 16 MiB (the default limit) whose opaque request holds many short
strings, integers like token ids, floats like logprobs, or one long string. For each: the peak
RSS growth of a fresh ``ledger serve`` (SQLite) taking one such body, and four at once, read
from /proc (``VmHWM`` reset through ``clear_refs``); the same with the mirror and health
followers off (they read each new event back and parse it in the same process); and the floor
of the job alone, in a fresh interpreter with no ledger: parse, sorted-key bytes, SHA-256 and
one SQLite insert with a FULL commit. Figures are in MiB and as multiples of the body limit.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from tests.support.server import ServerProcess

DESCRIPTION = (
    "peak server memory for accepted 16 MiB bodies (one and four at once) vs the job's floor"
)

MIB = 1024 * 1024
LIMIT = 16 * MIB


def capture_holding(items: bytes, call: str) -> bytes:
    head = b'{"model_call_id": "%s", "dialect": "chat", "request": {"messages": [' % call.encode()
    tail = b']}, "response": {}}'
    return head + items[: LIMIT - len(head) - len(tail) - 64].rpartition(b",")[0] + tail


SHAPES: dict[str, Callable[[str], bytes]] = {
    "6-character strings": lambda call: capture_holding(b'"abcdef",' * (LIMIT // 9), call),
    "integers (token ids)": lambda call: capture_holding(b"123456," * (LIMIT // 7), call),
    "floats (logprobs)": lambda call: capture_holding(b"-0.1234," * (LIMIT // 8), call),
    "one long string": lambda call: capture_holding(b'"' + b"x" * (LIMIT - 256) + b'",', call),
}

FLOOR = """
import hashlib, sqlite3, sys, tempfile, orjson
def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM"):
            return int(line.split()[1])
raw = open(sys.argv[1], "rb").read()
directory = tempfile.mkdtemp()
db = sqlite3.connect(directory + "/floor.db")
db.execute("PRAGMA journal_mode=WAL"); db.execute("PRAGMA synchronous=FULL")
db.execute("CREATE TABLE events (seq INTEGER PRIMARY KEY, payload BLOB, sha256 TEXT)")
open("/proc/self/clear_refs", "w").write("5")
before = hwm()
value = orjson.loads(raw)
payload = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
db.execute("INSERT INTO events (payload, sha256) VALUES (?, ?)",
           (payload, hashlib.sha256(payload).hexdigest()))
db.commit()
print(hwm() - before)
"""


def status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/{pid}/status")


def peak_growth_mib(server: ServerProcess, bodies: list[bytes]) -> float:
    assert server.process is not None
    pid = server.process.pid
    Path(f"/proc/{pid}/clear_refs").write_text("5")
    before = status_kib(pid, "VmRSS")
    with (
        httpx.Client(base_url=server.base_url, timeout=600) as http,
        ThreadPoolExecutor(len(bodies)) as pool,
    ):
        replies = list(
            pool.map(
                lambda n: http.post(
                    f"/v1/rollouts/big{n}/model-calls",
                    content=bodies[n],
                    headers={"content-type": "application/json"},
                ),
                range(len(bodies)),
            )
        )
    for reply in replies:
        if reply.status_code != 201:
            raise RuntimeError(f"{reply.status_code}: {reply.text[:300]}")
    return (status_kib(pid, "VmHWM") - before) / 1024


def measure_server(shape: str, concurrent: int, env: dict[str, str]) -> float:
    with tempfile.TemporaryDirectory() as directory:
        url = f"sqlite:///{directory}/ledger.db"
        subprocess.run(
            [sys.executable, "-m", "ledger", "db", "upgrade", "--database-url", url],
            check=True,
            capture_output=True,
        )
        with ServerProcess(data_dir=Path(directory), database_url=url, env=env) as server:
            bodies = [SHAPES[shape](f"{shape[:3]}-{n}") for n in range(concurrent)]
            return peak_growth_mib(server, bodies)


def measure_floor(shape: str) -> float:
    with tempfile.NamedTemporaryFile(suffix=".json") as body:
        body.write(SHAPES[shape]("floor"))
        body.flush()
        out = subprocess.run(
            [sys.executable, "-c", FLOOR, body.name], check=True, capture_output=True, text=True
        )
    return int(out.stdout) / 1024


FOLLOWERS_OFF = {"LEDGER_MIRROR_ENABLED": "false", "LEDGER_HEALTH_FINDINGS_ENABLED": "false"}


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench large_bodies")
    parser.add_argument("--quick", action="store_true", help="two shapes only")
    args = parser.parse_args(argv)
    shapes = list(SHAPES)[::3] if args.quick else list(SHAPES)
    print(f"peak RSS growth, MiB (multiple of the {LIMIT // MIB} MiB limit); target 10x:")
    columns = ("one body", "four at once", "four, followers off", "floor (no ledger)")
    print(f"  {'shape':22}" + "".join(f"{c:>22}" for c in columns))
    for shape in shapes:
        figures = [
            measure_server(shape, 1, {}),
            measure_server(shape, 4, {}),
            measure_server(shape, 4, FOLLOWERS_OFF),
            measure_floor(shape),
        ]
        cells = "".join(f"{f:>12,.0f} ({f * MIB / LIMIT:4.1f}x)" + " " * 2 for f in figures)
        print(f"  {shape:22}{cells}", flush=True)
