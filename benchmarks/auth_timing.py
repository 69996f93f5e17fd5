"""How long a wrong password takes to be refused, per user, when the web config mixes bcrypt costs: does the
answer time tell which user names exist?

One server of `plumbing/web/server.py` on 127.0.0.1 with a web config of three users whose hashes have the
costs 5, 10 and 12 (`--costs`), the failure limit out of the way. Each round asks once with a wrong password
for each user and for an unknown name, in a shuffled order, so load on the machine falls on all of them alike;
the medians over the rounds are compared with the unknown name's.

Target (issue: user names told apart by timing): every user's failure within 0.8-1.25x the unknown name's.
Before, an unknown name was checked at the highest cost alone: 298 ms, against 77 ms for a cost-10 user and
6 ms for a cost-5 one.
Run: .venv/bin/python -m benchmarks.auth_timing [--rounds 15] [--costs 5,10,12]
"""

from __future__ import annotations

import argparse
import base64
import random
import statistics
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import bcrypt

from plumbing.web import load_web_config
from plumbing.web.guard import AuthLimits
from plumbing.web.server import Answer, HttpServer, Route, ServerSettings

UNKNOWN = "nobody"


def refused_in(url: str, user: str) -> float:
    """Seconds until a wrong password for `user` is answered (401)."""
    token = base64.b64encode(f"{user}:wrong-password".encode()).decode()
    request = urllib.request.Request(url, headers={"Authorization": f"Basic {token}"})
    began = time.perf_counter()
    try:
        urllib.request.urlopen(request, timeout=60).close()
    except urllib.error.HTTPError as exc:
        if exc.code != 401:
            raise
    else:
        raise AssertionError("a wrong password was accepted")
    return time.perf_counter() - began


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks.auth_timing", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--costs", default="5,10,12", help="bcrypt costs of the configured users")
    args = parser.parse_args(argv)
    costs = [int(cost) for cost in args.costs.split(",")]
    users = {f"cost{cost}": bcrypt.hashpw(b"right", bcrypt.gensalt(cost)).decode() for cost in costs}
    with tempfile.TemporaryDirectory() as scratch:
        web = Path(scratch) / "web.yml"
        web.write_text("basic_auth_users:\n" + "".join(f"  {u}: '{h}'\n" for u, h in users.items()))
        limits = AuthLimits(failures=1_000_000, max_pending=1_000)
        server = HttpServer("127.0.0.1", 0, {"/metrics": Route(lambda _: Answer(200, b"up 1\n"))},
                            ServerSettings(auth=limits), web_config=load_web_config(web))
        server.start()
        try:
            url = f"http://127.0.0.1:{server.port}/metrics"
            names = [*users, UNKNOWN]
            times: dict[str, list[float]] = {name: [] for name in names}
            refused_in(url, UNKNOWN)  # warm-up: the connection path, the dummy
            for _ in range(args.rounds):
                for name in random.sample(names, len(names)):
                    times[name].append(refused_in(url, name))
        finally:
            server.shutdown()
    unknown = statistics.median(times[UNKNOWN])
    print(f"{args.rounds} rounds; a wrong password refused in (median, min-max):")
    worst = 1.0
    for name in names:
        median = statistics.median(times[name])
        ratio = median / unknown
        worst = max(worst, ratio, 1 / ratio)
        print(f"  {name:>8}: {1000 * median:7.1f} ms ({1000 * min(times[name]):.1f}-"
              f"{1000 * max(times[name]):.1f}), {ratio:.2f}x the unknown name's")
    met = worst <= 1.25
    print(f"target: every user within 0.8-1.25x the unknown name's: {'met' if met else 'NOT met'}")
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
