"""`python -m demo` flags and bad input: one clear message, exit 2, nothing started."""

from __future__ import annotations

from pathlib import Path

import pytest

from demo.__main__ import DEMO_RULES, choose_rule, main, parse_args


def test_defaults_are_the_demo_rules_and_a_three_minute_day() -> None:
    args = parse_args([])
    assert args.rules == DEMO_RULES and args.duration == 180.0 and args.output == Path("demo-output")
    assert choose_rule(args.rules, None).name == "inference"


@pytest.mark.parametrize("flags", [["--duration", "0"], ["--startup-delay", "-1"], ["--interval", "0.01"],
                                   ["--duration", "abc"]], ids=lambda f: " ".join(f))
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
