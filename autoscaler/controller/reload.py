"""Hot reload of the rules file, including a mounted ConfigMap's symlink swap (`..data -> ..2024_...`).

`RulesWatcher.check()` runs before every sync: a cheap stat of the resolved path, then a content hash, so a
touch or a swap to identical content reloads nothing (but a file restored to the running rules after an
invalid version makes gpu_autoscaler_rules_valid 1 again). A valid new file replaces the rules (the controller
keeps the history of rules that did not change); an invalid one keeps the previous rules running, logs why
once per distinct content, and sets gpu_autoscaler_rules_valid to 0 until a valid file comes.

`load_watched` is the first read: `run` checks the file with it before anything else and starts from what it
read, so the file is read once and the watcher compares later reads with those very bytes.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass

from autoscaler.config.rules import RuleSet, parse_rules_bytes, read_rules_bytes
from autoscaler.errors import Problem, RulesError

log = logging.getLogger(__name__)

_NOTHING = object()


@dataclass(frozen=True)
class _Fingerprint:
    real_path: str
    inode: int
    size: int
    mtime_ns: int


def _fingerprint(path: str) -> _Fingerprint | None:
    try:
        real = os.path.realpath(path)
        st = os.stat(real)
    except OSError:
        return None
    return _Fingerprint(real, st.st_ino, st.st_size, st.st_mtime_ns)


def _digest(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


@dataclass(frozen=True)
class WatchedRules:
    """A rules file as first read: its rules, and the look and bytes its watcher compares later reads with."""

    rules: RuleSet
    fingerprint: _Fingerprint | None
    digest: str


def load_watched(path: str) -> WatchedRules:
    """Read and parse the rules file once; RulesError when it is unreadable or invalid.

    The file is looked at before it is read: a change made during or after the read differs from that look,
    so the watcher's first check reads it again instead of taking the new file for the one running."""
    fingerprint = _fingerprint(path)
    raw = read_rules_bytes(path)
    return WatchedRules(parse_rules_bytes(raw, path), fingerprint, _digest(raw))


class RulesWatcher:
    """Reloads `path` when it changes and hands valid rule sets to `apply`; `loaded`: the running rules as
    `load_watched` read them (None: nothing known, the first change found is applied)."""

    def __init__(
        self,
        path: str,
        apply: Callable[[RuleSet], None],
        set_valid: Callable[[bool], None] = lambda valid: None,
        loaded: WatchedRules | None = None,
    ) -> None:
        self.path = path
        self._apply = apply
        self._set_valid = set_valid
        self._fingerprint = loaded.fingerprint if loaded is not None else _fingerprint(path)
        self._digest: str | None = loaded.digest if loaded is not None else None
        self._reported: object = _NOTHING
        self.last_error: RulesError | None = None

    def _read(self) -> tuple[bytes | None, RulesError | None]:
        try:
            return read_rules_bytes(self.path), None
        except RulesError as e:
            return None, e

    def check(self) -> bool:
        """Reload if the file changed; True when new rules were applied.

        Never raises: a hostile file (a bomb, deep nesting, a huge number, not UTF-8, too large) is a
        RulesError from the bounded reader like any invalid file, so the sync loop goes on.
        """
        fingerprint = _fingerprint(self.path)
        if fingerprint == self._fingerprint and fingerprint is not None:
            return False
        self._fingerprint = fingerprint
        raw, error = self._read()
        digest = _digest(raw) if raw is not None else None
        if digest is not None and digest == self._digest:
            if self.last_error is not None:  # garbage reverted to the running rules: valid again
                self._restored()
            return False
        try:
            if error is not None or raw is None:
                raise error or RulesError([Problem(self.path, 0, "file", "cannot read the rules file")])
            try:
                rules = parse_rules_bytes(raw, self.path)
            except RulesError:
                raise
            except Exception as exc:  # a validator's bug: neither applied, nor a crash, nor silent
                raise RulesError([Problem(self.path, 0, "file", f"cannot be validated "
                                          f"({type(exc).__name__}: {exc})")]) from exc
        except RulesError as e:
            self.last_error = e
            self._set_valid(False)
            seen = digest if digest is not None else str(e)  # an unreadable file: once per distinct reason
            if seen != self._reported:
                self._reported = seen
                log.error("rules file %s is invalid; keeping the previous rules running:\n%s", self.path, e)
            return False
        self._digest = digest
        self._reported = _NOTHING
        self.last_error = None
        self._apply(rules)
        self._set_valid(True)
        log.info("rules file %s reloaded: %d rule(s)", self.path, len(rules.rules))
        return True

    def _restored(self) -> None:
        self._reported = _NOTHING
        self.last_error = None
        self._set_valid(True)
        log.info("rules file %s restored to the running rules; valid again", self.path)
