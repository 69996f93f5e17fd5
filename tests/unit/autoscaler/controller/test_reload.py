"""Hot reload: plain rewrites, a ConfigMap-style symlink swap, garbage keeps the previous rules."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from autoscaler.config.rules import RuleSet
from autoscaler.controller.reload import RulesWatcher, load_watched
from tests.rules import rule, rules_yaml


class Sink:
    def __init__(self) -> None:
        self.applied: list[RuleSet] = []
        self.valid: list[bool] = []


def watcher(path: Path, sink: Sink) -> RulesWatcher:
    return RulesWatcher(str(path), sink.applied.append, sink.valid.append, loaded=load_watched(str(path)))


def test_unchanged_file_reloads_nothing(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(rules_yaml(rule("a")))
    sink = Sink()
    w = watcher(path, sink)
    assert not w.check()
    os.utime(path, ns=(1, 1))  # touched, same content
    assert not w.check()
    assert sink.applied == []


def test_a_change_after_the_first_read_is_applied_at_the_first_check(tmp_path: Path) -> None:
    """The watcher compares with the bytes `run` started from, never with a second read: a file rewritten
    between `run`'s read and the watcher's start is the change it reloads."""
    path = tmp_path / "rules.yaml"
    path.write_text(rules_yaml(rule("a")))
    loaded = load_watched(str(path))
    path.write_text(rules_yaml(rule("a"), rule("b")))
    sink = Sink()
    w = RulesWatcher(str(path), sink.applied.append, sink.valid.append, loaded=loaded)
    assert loaded.rules.names == ("a",)
    assert w.check()
    assert sink.applied[-1].names == ("a", "b") and sink.valid == [True]


def test_rewrite_is_applied(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(rules_yaml(rule("a")))
    sink = Sink()
    w = watcher(path, sink)
    path.write_text(rules_yaml(rule("a"), rule("b")))
    assert w.check()
    assert sink.applied[-1].names == ("a", "b") and sink.valid == [True]


def configmap_dir(root: Path, stamp: str, text: str) -> None:
    """Write a new ..<stamp> dir and atomically swap ..data to it, as the kubelet does."""
    (root / f"..{stamp}").mkdir()
    (root / f"..{stamp}" / "rules.yaml").write_text(text)
    tmp_link = root / "..data_tmp"
    tmp_link.symlink_to(f"..{stamp}")
    os.replace(tmp_link, root / "..data")


def test_configmap_symlink_swap(tmp_path: Path) -> None:
    configmap_dir(tmp_path, "2026_01_01_00_00_00.1", rules_yaml(rule("a")))
    (tmp_path / "rules.yaml").symlink_to("..data/rules.yaml")
    sink = Sink()
    w = watcher(tmp_path / "rules.yaml", sink)
    configmap_dir(tmp_path, "2026_01_01_00_01_00.2", rules_yaml(rule("a", target=50)))
    assert w.check()
    assert sink.applied[-1].rules[0].metrics[0].target == 50


def test_garbage_keeps_previous_rules_and_says_why(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(rules_yaml(rule("a")))
    sink = Sink()
    w = watcher(path, sink)
    path.write_text("rules: [ {{{ not yaml")
    with caplog.at_level(logging.ERROR, logger="autoscaler.controller.reload"):
        assert not w.check()
        assert not w.check()  # same bad content: reported once
    assert sink.applied == [] and sink.valid == [False]
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and str(path) in errors[0].getMessage() and "yaml" in errors[0].getMessage()
    assert w.last_error is not None
    path.write_text(rules_yaml(rule("b")))
    assert w.check()
    assert sink.valid == [False, True] and sink.applied[-1].names == ("b",)


def test_invalid_rules_and_missing_file_keep_previous(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(rules_yaml(rule("a")))
    sink = Sink()
    w = watcher(path, sink)
    path.write_text(rules_yaml(rule("a", min_replicas=5, max_replicas=2)))
    assert not w.check()
    assert w.last_error is not None and "minReplicas" in str(w.last_error)
    path.unlink()
    assert not w.check()
    assert sink.applied == [] and sink.valid == [False, False]


def test_garbage_reverted_to_the_running_content_is_valid_again(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    good = rules_yaml(rule("a"))
    path.write_text(good)
    sink = Sink()
    w = watcher(path, sink)
    path.write_text("rules: [ {{{ not yaml")
    assert not w.check()
    assert sink.valid == [False] and w.last_error is not None
    path.write_text(good)  # `kubectl rollout undo` of the ConfigMap: exactly the running rules again
    os.utime(path, ns=(10**18, 10**18))  # a new mtime even on a coarse clock
    assert not w.check()  # nothing new to apply...
    assert sink.applied == []
    assert sink.valid == [False, True] and w.last_error is None  # ...but the file is valid again
    path.write_text("rules: [ {{{ not yaml")
    assert not w.check()
    assert sink.valid == [False, True, False]  # the same garbage again is a new invalid change


def test_any_exception_while_validating_keeps_the_previous_rules_in_one_log_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A validator's own bug (an OSError from the time zone database, say) is an invalid file: nothing
    applied, rules_valid 0, one ERROR line without a traceback; a valid file afterwards is applied."""
    path = tmp_path / "rules.yaml"
    path.write_text(rules_yaml(rule("a")))
    sink = Sink()
    w = watcher(path, sink)

    def broken(raw: bytes, name: str) -> RuleSet:
        raise IsADirectoryError(21, "Is a directory", "zoneinfo/Europe")

    monkeypatch.setattr("autoscaler.controller.reload.parse_rules_bytes", broken)
    path.write_text(rules_yaml(rule("a"), rule("b")))
    with caplog.at_level(logging.ERROR, logger="autoscaler.controller.reload"):
        assert not w.check()
    assert sink.applied == [] and sink.valid == [False]
    [record] = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert record.exc_info is None and "cannot be validated (IsADirectoryError" in record.getMessage()
    monkeypatch.undo()
    path.write_text(rules_yaml(rule("a"), rule("c")))
    assert w.check() and sink.applied[-1].names == ("a", "c") and sink.valid == [False, True]
