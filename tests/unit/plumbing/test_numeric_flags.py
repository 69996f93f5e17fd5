"""Every numeric flag of the three command lines, given any text: exit 0 or 2 (and `estimate`'s own 1, "does
not fit"), never a traceback. Run in this process through each script's own `main` (tests.measure), so an
uncaught exception fails the test as itself, not as an exit status that might be mistaken for an answer.

Each command is given a file that does not exist (a rules file, a Prometheus connections file), so a flag
that parses ends in that file's exit 2 at once: no cluster, no Prometheus, no server is ever reached.
`gpu-exporter` runs `status` on simulated GPUs, `gpu-fleet estimate` computes locally.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plumbing.cli import bounded_int, bounded_number
from tests.measure import run_captured

NO_RULES = "no-such-rules.yaml"
NO_PROMETHEUS = ("--prometheus-config", "no-such-prometheus.yaml")
ESTIMATE = ("estimate", "--params", "7B", "--gpu-memory", "80GiB")

FLAGS: list[tuple[tuple[str, ...], str, frozenset[int]]] = [
    # (the command before the flag, the flag, the exit statuses it may end with)
    *((("gpu-autoscaler", "simulate", "--rules", NO_RULES, "trace.csv"), flag, frozenset({2}))
      for flag in ("--replicas", "--start", "--startup-seconds")),
    (("gpu-autoscaler", "check", "--rules", NO_RULES), "--timeout", frozenset({2})),
    *((("gpu-autoscaler", "run", "--rules", NO_RULES, "--dry-run", "--once"), flag, frozenset({2}))
      for flag in ("--interval", "--prometheus-batch-size", "--metrics-port", "--assume-replicas")),
    (("gpu-autoscaler", "status", "--rules", NO_RULES), "--assume-replicas", frozenset({2})),
    *((("gpu-autoscaler", "tune", "--rules", NO_RULES), flag, frozenset({2}))
      for flag in ("--since", "--step", "--startup-seconds", "--max-overloaded-minutes")),
    (("gpu-exporter", "status"), "--simulate", frozenset({0, 2})),
    *((("gpu-exporter", "--simulate", "1", "status"), flag, frozenset({0, 2}))
      for flag in ("--port", "--min-interval")),
    *((("gpu-fleet", "status", *NO_PROMETHEUS), flag, frozenset({2}))
      for flag in ("--query-timeout", "--watch")),
    *((("gpu-fleet", "select", "--gpus", "1", *NO_PROMETHEUS), flag, frozenset({2}))
      for flag in ("--min-free-memory", "--max-utilization")),
    (("gpu-fleet", "select", *NO_PROMETHEUS), "--gpus", frozenset({2})),
    *((("gpu-fleet", "wait", "--gpus", "1", *NO_PROMETHEUS), flag, frozenset({2}))
      for flag in ("--timeout", "--interval")),
    *((("gpu-fleet", "report", *NO_PROMETHEUS), flag, frozenset({2}))
      for flag in ("--since", "--until", "--price-per-gpu-hour", "--price-per-kwh", "--idle-below")),
    *((("gpu-fleet", "export", *NO_PROMETHEUS), flag, frozenset({2}))
      for flag in ("--step", "--since", "--until")),
    (("gpu-fleet", "estimate", "--gpu-memory", "80GiB"), "--params", frozenset({0, 1, 2})),
    (("gpu-fleet", "estimate", "--params", "7B"), "--gpu-memory", frozenset({0, 1, 2})),
    *((("gpu-fleet", *ESTIMATE), flag, frozenset({0, 1, 2}))
      for flag in ("--tp", "--pp", "--dp", "--cp", "--dcp", "--context", "--batch", "--layers", "--hidden",
                   "--heads", "--kv-heads", "--cuda-context", "--fragmentation")),
]

HOSTILE = ["10e400", "1e400", "-1e400", "1e308", "-1e308", "1.7976931348623157e308", "1e-400", "nan", "inf",
           "-inf", "Infinity", "1_000", "0x10", "\u0663", "\uff15", "\u00b2", "9" * 4300, "1" + "0" * 400,
           "", " ", "-0", "+1", ".5", "5.", "1e3", "3%", "2w", "90d", "1e10d", "99999999999h", "1,2,4",
           "1,,2", "0", "1", "64", "65", "2147483647", "2147483648", "9999-12-31T23:59:59+00:00",
           "10000-01-01T00:00:00", "0001-01-01T00:00:00-23:59", "\x00", "1\n"]
text_st = st.one_of(
    st.sampled_from(HOSTILE),
    st.from_regex(r"[+-]?[0-9]{0,30}(\.[0-9]{0,8})?([eE][+-]?[0-9]{1,4})?(ms|s|m|h|d|w|%|GiB|B|K)?",
                  fullmatch=True),
    st.floats().map(repr),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.text(max_size=24),
)


@pytest.mark.parametrize(("command", "flag", "statuses"), FLAGS,
                         ids=[f"{c[0]} {c[1] if c[1] != '--simulate' else c[-1]} {f}" for c, f, _ in FLAGS])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=text_st)
def test_any_text_given_to_a_numeric_flag_exits_0_or_2(command: tuple[str, ...], flag: str,
                                                       statuses: frozenset[int], text: str) -> None:
    result = run_captured([*command, f"{flag}={text}"])  # '=': a text starting with '-' is the value too
    assert result.returncode in statuses, (result.returncode, result.stderr[-500:])
    if result.returncode == 2:
        assert result.output.strip(), "exit 2 says why"


@pytest.mark.parametrize("text", ["10e400", "1e309", "-1e400", "nan", "inf", "1_0", "\u0663", "9" * 4300, ""])
def test_the_shared_types_refuse_what_is_not_a_finite_ascii_number(text: str) -> None:
    with pytest.raises(ValueError, match="expected a number from 0 to 10"):
        bounded_number(text, 0, 10)
    with pytest.raises(ValueError, match="expected a whole number from 0 to 10"):
        bounded_int(text, 0, 10)


@pytest.mark.parametrize(("text", "value"),
                         [("0", 0.0), (" 2.5 ", 2.5), ("1e1", 10.0), ("-0", 0.0), (".5", 0.5)])
def test_the_number_type_takes_plain_decimals_within_its_bounds(text: str, value: float) -> None:
    assert bounded_number(text, 0, 10) == value


def test_the_bounds_are_in_the_message_and_argparse_names_the_flag() -> None:
    result = run_captured(["gpu-autoscaler", "simulate", "--rules", NO_RULES, "t.csv",
                           "--replicas", "10e400"])
    assert result.returncode == 2
    assert ("argument --replicas: expected a replica count from 0 to 2147483647 (got '10e400')"
            in result.stderr)
    result = run_captured(["gpu-fleet", "report", *NO_PROMETHEUS, "--idle-below", "1e400"])
    assert result.returncode == 2
    assert "--idle-below: expected a ratio from 0 to 1 (got '1e400')" in result.stderr
    result = run_captured(["gpu-fleet", *ESTIMATE, "--fragmentation", "1e400"])
    assert result.returncode == 2
    assert "--fragmentation: expected a percentage from 0 to 100 (got '1e400')" in result.stderr
    with pytest.raises(ValueError, match=r"expected a ratio above 0, at most 1 \(got '0'\)"):
        bounded_number("0", 0, 1, above=True, what="a ratio")
