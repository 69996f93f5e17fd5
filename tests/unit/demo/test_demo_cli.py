"""`python -m demo` flags and bad input: one clear message, exit 2, nothing started; what it says when the
rule's queries find nothing; start-up waits that stop at once."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from autoscaler.config.rules import parse_rules
from autoscaler.policy import Rule
from demo.__main__ import (
    DEMO_RULES,
    RATE_RULES,
    NothingToDemo,
    choose_rule,
    explain_empty,
    main,
    parse_args,
    range_windows,
    scrape_interval_problem,
)
from demo.cluster import SimulatedDeployment
from demo.processes import Stopped, free_port, wait_http_ok
from demo.world import SimulatedWorld


def test_defaults_are_the_demo_rules_and_a_three_minute_day() -> None:
    args = parse_args([])
    assert args.rules == DEMO_RULES and args.duration == 180.0 and args.output == Path("demo-output")
    assert args.drain_seconds == 60.0  # the drain recipe's --shutdown-timeout (docs/rules.md)
    assert parse_args(["--drain", "0"]).drain_seconds == 0.0  # vLLM's default: cut at once
    assert parse_args(["--drain", "2m"]).drain_seconds == 120.0  # a duration, as --startup-delay
    assert choose_rule(args.rules, None).name == "inference"


@pytest.mark.parametrize("flags", [["--duration", "0"], ["--startup-delay", "-1"], ["--interval", "0.01"],
                                   ["--duration", "abc"], ["--drain", "-1s"],
                                   ["--drain", "3601s"], ["--drain", "nan"], ["--drain", "2h"]],
                         ids=lambda f: " ".join(f))
def test_bad_flags_exit_2_naming_the_flag(flags: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        parse_args(flags)
    assert info.value.code == 2
    assert flags[0] in capsys.readouterr().err


def test_an_invalid_rules_file_exits_2_with_file_and_line(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "rules.yaml"
    bad.write_text("rules:\n  - name: x\n    target: {kind: Deployment, namespace: a, name: b}\n"
                   "    maxReplicas: 3\n    metrics: []\n")
    assert main(["--rules", str(bad), "--output", str(tmp_path / "out")]) == 2
    assert f"{bad}:" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # nothing started, nothing written


def test_an_unknown_rule_name_exits_2_listing_the_rules(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--rule", "nope", "--output", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "nope" in err and "inference" in err


def test_a_scrape_interval_too_long_for_the_rules_rate_window_exits_2_naming_flag_window_and_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """demo-rules.yaml's rate() uses [5s]: a 3 s scrape interval leaves some windows with one sample."""
    flags = ["--rules", str(RATE_RULES), "--scrape-interval", "3", "--output", str(tmp_path / "out")]
    assert main(flags) == 2
    err = capsys.readouterr().err
    lines = RATE_RULES.read_text().splitlines()
    line = next(n for n, text in enumerate(lines, 1) if "name: requests_per_second" in text)
    assert "--scrape-interval" in err and "[5s]" in err and f"demo-rules.yaml:{line}" in err, err
    assert "requests_per_second" in err and "2 or less" in err, err
    assert not (tmp_path / "out").exists()  # refused before anything started


def test_the_scrape_interval_may_be_two_fifths_of_the_smallest_window() -> None:
    rule = choose_rule(RATE_RULES, None)
    assert scrape_interval_problem(rule, "r.yaml", 2.0) is None
    assert scrape_interval_problem(rule, "r.yaml", 2.1) is not None
    two_windows = parse_rules("""\
rules:
  - name: r
    target: {kind: Deployment, namespace: demo, name: inference}
    maxReplicas: 3
    metrics:
      - name: slow
        query: sum(rate(service_requests_total[1m]))
        type: Total
        target: 9
      - name: mixed
        query: sum(rate(a[30s])) / sum(rate(b[1m30s])) * avg(c{pod=~"x-[0-9]+"})
        type: Average
        target: 1
""", "u.yaml").rules[0]
    assert range_windows(two_windows.metrics[1].query) == [("[30s]", 30.0), ("[1m30s]", 90.0)]
    assert scrape_interval_problem(two_windows, "u.yaml", 12.0) is None
    problem = scrape_interval_problem(two_windows, "u.yaml", 13.0)
    assert problem is not None and "[30s]" in problem and "'mixed' (u.yaml:10)" in problem, problem


def unknown_metrics_rule(gpu_query: str) -> Rule:
    return parse_rules(f"""\
rules:
  - name: vllm
    target: {{kind: Deployment, namespace: llm, name: vllm}}
    maxReplicas: 4
    metrics:
      - name: queue
        query: sum(tgi_queue_size{{namespace="llm"}})
        type: Total
        target: 5
      - name: gpu
        query: '{gpu_query}'
        type: Average
        target: 80
""", "u.yaml").rules[0]


def test_when_no_metric_finds_a_series_there_is_nothing_to_demo_and_the_message_says_what_is_served() -> None:
    rule = unknown_metrics_rule("avg(DCGM_FI_DEV_GPU_UTIL{namespace=\"llm\"})")
    world = SimulatedWorld(SimulatedDeployment("llm", "vllm", 1, lambda: 0.0), 10.0)  # not started: no ports
    with pytest.raises(NothingToDemo) as info:
        explain_empty(rule, "u.yaml", rule.metrics, world, 3.0)
    message = str(info.value)
    for part in ("none of the 2 metrics of rule vllm (u.yaml:2)", "queue (u.yaml:6)", "gpu (u.yaml:10)",
                 "names no series the demo serves", "Deployment llm/vllm", 'namespace="llm"',
                 'pod=~"vllm-.*"', 'service_requests_total{namespace="llm", service="vllm"}',
                 "gpu_utilization_ratio", "Nothing to demo"):
        assert part in message, (part, message)


def test_when_some_metrics_find_no_series_the_demo_warns_and_goes_on(
        capsys: pytest.CaptureFixture[str]) -> None:
    rule = unknown_metrics_rule("100 * avg(gpu_utilization_ratio{namespace=\"prod\", pod=~\"vllm-.*\"})")
    world = SimulatedWorld(SimulatedDeployment("llm", "vllm", 1, lambda: 0.0), 10.0)
    explain_empty(rule, "u.yaml", rule.metrics[1:], world, 3.0)  # returns: the queue metric still works
    out = capsys.readouterr().out
    assert "warning: 1 of the 2 metrics of rule vllm" in out and "gpu (u.yaml:10)" in out, out
    assert "it selects gpu_utilization_ratio, which the demo serves: check its label values" in out, out
    assert 'namespace="llm"' in out and "queue (" not in out, out


def test_a_start_up_wait_stops_at_once_when_stop_is_set() -> None:
    """Ctrl-C while a server starts: Stopped (not an error), not 30 s of waiting for a server that never
    answers."""
    stop = threading.Event()
    stop.set()
    with pytest.raises(Stopped):
        wait_http_ok(f"http://127.0.0.1:{free_port()}/-/ready", timeout=30, stop=stop)
