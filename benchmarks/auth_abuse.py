"""A correct scrape while 100 clients guess basic-auth passwords, on `gpu-exporter` and on the controller's
/metrics (`gpu-autoscaler run`), both started as the installed commands with a web config of one bcrypt
cost-10 user.

For each process: first the idle baseline (the correct client alone, one scrape every 0.2 s), then the same
client while `--clients` guessing clients (a separate process, asyncio, one keep-alive connection each,
a new wrong password on every request, Retry-After ignored) hammer the same endpoint from the same address
for `--seconds`. The guessers' answers are counted by status: 401 is a bcrypt check the server paid for, 429
one it refused to pay (plumbing/web/guard.py).

Targets (issue: authentication must not be a denial of service): under abuse, the correct client's median
scrape within 2x its idle median, and no scrape over 1 s.
Run: .venv/bin/python -m benchmarks.auth_abuse [--clients 100] [--seconds 30]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import multiprocessing
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import bcrypt

from demo.processes import free_port, wait_http_ok

USER, PASSWORD = "prometheus", "the-right-password"
BIN = Path(sys.executable).parent
IDLE_SCRAPES = 50
PERIOD = 0.2


def _header(password: str) -> str:
    return "Basic " + base64.b64encode(f"{USER}:{password}".encode()).decode()


def scrape(url: str) -> float:
    """One correct GET: seconds to the whole answer (an AssertionError on anything but 200)."""
    request = urllib.request.Request(url, headers={"Authorization": _header(PASSWORD)})
    began = time.perf_counter()
    with urllib.request.urlopen(request, timeout=10) as answer:
        answer.read()
        assert answer.status == 200, answer.status
    return time.perf_counter() - began


async def _guesser(port: int, deadline: float, seed: int, counts: Counter[int]) -> None:
    n = 0
    while time.monotonic() < deadline:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.05)
            continue
        try:
            while time.monotonic() < deadline:
                n += 1
                writer.write(f"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: "
                             f"{_header(f'guess-{seed}-{n}')}\r\n\r\n".encode())
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
                status = int(head.split(b" ", 2)[1])
                length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                await reader.readexactly(length)
                counts[status] += 1
                if b"connection: close" in head.lower():
                    break
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ValueError):
            counts[0] += 1  # dropped
        finally:
            writer.close()


def _guessers(port: int, clients: int, seconds: float, out: multiprocessing.Queue[dict[int, int]]) -> None:
    async def run() -> Counter[int]:
        counts: Counter[int] = Counter()
        deadline = time.monotonic() + seconds
        await asyncio.gather(*(_guesser(port, deadline, seed, counts) for seed in range(clients)))
        return counts

    out.put(dict(asyncio.run(run())))


@dataclass(frozen=True)
class Result:
    name: str
    idle: list[float]
    abused: list[float]
    guesses: dict[int, int]

    @property
    def ratio(self) -> float:
        return statistics.median(self.abused) / statistics.median(self.idle)

    @property
    def met(self) -> bool:
        return self.ratio <= 2.0 and max(self.abused) < 1.0


def measure(name: str, url: str, port: int, clients: int, seconds: float) -> Result:
    scrape(url)  # the first check is a bcrypt hash; from then on the credentials are cached
    idle = []
    for _ in range(IDLE_SCRAPES):
        idle.append(scrape(url))
        time.sleep(PERIOD)
    queue: multiprocessing.Queue[dict[int, int]] = multiprocessing.Queue()
    attackers = multiprocessing.Process(target=_guessers, args=(port, clients, seconds, queue))
    attackers.start()
    time.sleep(1.0)  # every guesser connected and sending
    abused = []
    end = time.monotonic() + seconds - 1.5
    while time.monotonic() < end:
        abused.append(scrape(url))
        time.sleep(PERIOD)
    guesses = queue.get(timeout=seconds + 60)
    attackers.join(30)
    return Result(name, idle, abused, guesses)


@contextmanager
def started(argv: list[str], ready: str) -> Iterator[None]:
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_http_ok(ready, 30)
        yield
    finally:
        process.terminate()
        process.wait(30)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.auth_abuse", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=100, help="guessing clients (default %(default)s)")
    parser.add_argument("--seconds", type=float, default=30.0, help="abuse per process (default %(default)s)")
    args = parser.parse_args(argv)
    if args.clients < 1 or args.seconds < 5:
        parser.error("--clients must be >= 1 and --seconds >= 5")
    results = []
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(10)).decode()
        web = work / "web.yml"
        web.write_text(f"basic_auth_users:\n  {USER}: '{hashed}'\n")
        rules = work / "rules.yaml"
        rules.write_text("rules:\n  - name: svc\n    target: {kind: Deployment, namespace: ml, name: svc}\n"
                         "    maxReplicas: 4\n    metrics:\n"
                         "      - {name: util, query: 'vector(1)', type: Average, target: 80}\n")
        port = free_port()
        exporter = [str(BIN / "gpu-exporter"), "--simulate", "2", "--address", "127.0.0.1", "--port",
                    str(port), "--web-config-file", str(web)]
        with started(exporter, f"http://127.0.0.1:{port}/healthz"):
            results.append(measure("gpu-exporter /metrics", f"http://127.0.0.1:{port}/metrics", port,
                                   args.clients, args.seconds))
        port = free_port()
        controller = [str(BIN / "gpu-autoscaler"), "run", "--rules", str(rules), "--prometheus",
                      f"http://127.0.0.1:{free_port()}", "--dry-run", "--assume-replicas", "2", "--interval",
                      "15s", "--metrics-port", str(port), "--web-config-file", str(web)]
        with started(controller, f"http://127.0.0.1:{port}/healthz"):
            results.append(measure("gpu-autoscaler /metrics", f"http://127.0.0.1:{port}/metrics", port,
                                   args.clients, args.seconds))
    print(f"{args.clients} clients guessing passwords for {args.seconds:g} s; one correct scrape every "
          f"{PERIOD:g} s (milliseconds)\n")
    print("| endpoint | idle median | abused median | ratio | abused max | guesses answered 401 / 429 |")
    print("|---|---|---|---|---|---|")
    for r in results:
        idle, abused = statistics.median(r.idle) * 1000, statistics.median(r.abused) * 1000
        print(f"| {r.name} | {idle:.1f} | {abused:.1f} | {r.ratio:.2f}x | {max(r.abused) * 1000:.0f} | "
              f"{r.guesses.get(401, 0)} / {r.guesses.get(429, 0)} |")
    met = all(r.met for r in results)
    print(f"\nTarget (median within 2x idle, no scrape over 1 s): {'met' if met else 'NOT met'}")
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
