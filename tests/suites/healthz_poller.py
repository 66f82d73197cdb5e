"""``python -m tests.suites.healthz_poller SECONDS URL...``: poll ``/healthz`` of each URL in
turn every 20 ms for SECONDS and print one JSON object: ``{"polls": [[ms per URL], ...],
"failures": [...]}``.

Its own process, so that a latency is the server's and the machine's, not the wait of a
thread for the interpreter lock of a test process running a hundred attacking threads. The
URLs are polled back to back, on connections opened before the first poll: two servers'
answers to the same moment of machine load.
"""

from __future__ import annotations

import json
import sys
import time

import httpx

# Often enough that the 99th percentile is not the second-worst poll of the run.
POLL_INTERVAL_S = 0.02
# Far above any bound asserted on a poll: a timeout here is recorded as a failure.
CLIENT_TIMEOUT_S = 10.0


def poll(seconds: float, urls: list[str]) -> dict[str, list[object]]:
    clients = [httpx.Client(base_url=url, timeout=CLIENT_TIMEOUT_S) for url in urls]
    polls: list[object] = []
    failures: list[object] = []
    try:
        for client in clients:  # open the connections before timing anything
            client.get("/healthz")
        print("ready", file=sys.stderr, flush=True)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            row = []
            for url, client in zip(urls, clients, strict=True):
                started = time.monotonic()
                try:
                    status = client.get("/healthz").status_code
                    if status != 200:
                        failures.append(f"{url}: /healthz answered {status}")
                except httpx.TransportError as exc:
                    failures.append(f"{url}: /healthz {type(exc).__name__}")
                row.append((time.monotonic() - started) * 1000)
            polls.append(row)
            time.sleep(POLL_INTERVAL_S)  # poll: the fixed interval between rounds
    finally:
        for client in clients:
            client.close()
    return {"polls": polls, "failures": failures}


if __name__ == "__main__":
    print(json.dumps(poll(float(sys.argv[1]), sys.argv[2:])))
