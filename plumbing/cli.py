"""What every command line of the project needs, once: argparse types, stop signals, quiet exits.

`gpu-exporter`, `gpu-autoscaler`, `gpu-fleet` and the demo take ports, durations (`15s`, `2m`, `500ms`, bare
numbers as seconds) and numbers (`number`, `whole_number`: finite, bounded, ASCII) the same way, stop on the
same signals without deadlocking, and treat a reader that closed the pipe (`| head`) as the end of the
output, not as an error.
"""

from __future__ import annotations

import argparse
import difflib
import logging
import math
import os
import platform
import re
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from importlib import metadata
from types import FrameType
from typing import Any, NoReturn

from plumbing.display import visible
from plumbing.numbers import ascii_int

__all__ = [
    "EXIT_USAGE", "HintingParser", "add_version_argument", "bounded_int", "bounded_number", "did_you_mean",
    "duration", "fail", "install_stop_handlers", "number", "parse_duration", "port_number", "silence_stdout",
    "version", "version_text", "whole_number",
]

log = logging.getLogger(__name__)

EXIT_USAGE = 2
"""Bad input (flags, files, a port that cannot be served): argparse's own status for a usage error."""

_DURATION = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*(ms|s|m|h)?\s*")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


MAX_INTERVAL_SECONDS = 86400.0
"""A day: longer than any sync interval means, and far below what Event.wait and time_t can hold."""


def parse_duration(text: str) -> float:
    """'15s', '500ms', '1m', '2h' or bare seconds -> seconds in (0, a day]; argparse shows the message on bad
    input (an interval of 10^17 hours would crash the loop's first wait)."""
    match = _DURATION.fullmatch(text)
    seconds = float(match.group(1)) * _UNIT[match.group(2)] if match is not None else 0.0
    if not 0 < seconds <= MAX_INTERVAL_SECONDS:
        raise argparse.ArgumentTypeError(
            f"expected a positive duration like 15s, 500ms or 1m, at most 24h (got {text!r})")
    return seconds


def duration(low: float = 0.0, high: float | None = None, *, above: bool = False) -> Callable[[str], float]:
    """An argparse type: a duration (syntax of `parse_duration`, 0 allowed) in [low, high], (low, high]
    with `above`; the bounds are in the message, in seconds."""
    opening = "(" if above else "["
    span = f"{opening}{low:g}s, {high:g}s]" if high is not None else f"{'>' if above else '>='} {low:g}s"
    expected = f"expected a duration like 15s, 500ms or 1m, {'in ' if high is not None else ''}{span}"

    def convert(text: str) -> float:
        match = _DURATION.fullmatch(text)
        if match is None:
            raise argparse.ArgumentTypeError(f"{expected} (got {text!r})")
        seconds = float(match.group(1)) * _UNIT[match.group(2)]
        if (not math.isfinite(seconds) or seconds < low or (above and seconds == low)
                or (high is not None and seconds > high)):
            raise argparse.ArgumentTypeError(f"{expected} (got {text!r})")
        return seconds

    return convert


MAX_NUMBER_CHARS = 40
"""Characters of a number on a command line: any decimal a person types fits; `10e400` or 4,300 digits is not
a setting, and float() of it is infinite, int() of it a ValueError or seconds of CPU."""
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]{1,3})?")
"""ASCII decimals only: float() also takes 'inf', 'nan', '1_000' and other scripts' digits."""


def _bounds(low: float, high: float, above: bool) -> str:
    return f"above {low:g}, at most {high:g}" if above else f"from {low:g} to {high:g}"


def bounded_number(text: str, low: float, high: float, *, what: str = "a number",
                   above: bool = False) -> float:
    """`text` as a finite decimal number in [low, high] ((low, high] with `above`); ValueError saying what was
    expected and what came otherwise. For a flag read outside argparse (the caller names the flag); `number`
    is the argparse type."""
    core = text.strip()
    value = float(core) if len(core) <= MAX_NUMBER_CHARS and _DECIMAL.fullmatch(core) else math.nan
    if not (math.isfinite(value) and low <= value <= high) or (above and value == low):
        raise ValueError(f"expected {what} {_bounds(low, high, above)} (got {text[:MAX_NUMBER_CHARS]!r})")
    return value + 0.0  # -0 is 0


def bounded_int(text: str, low: int, high: int, *, what: str = "a whole number") -> int:
    """`text` as a whole number (ASCII digits, an optional sign) in [low, high]; ValueError otherwise."""
    core = text.strip()
    sign = -1 if core.startswith("-") else 1
    digits = ascii_int(core[1:] if core[:1] in "+-" else core, max_digits=len(str(max(abs(low), abs(high)))))
    value = None if digits is None else sign * digits
    if value is None or not low <= value <= high:
        raise ValueError(f"expected {what} from {low} to {high} (got {text[:MAX_NUMBER_CHARS]!r})")
    return value


def number(low: float, high: float, *, what: str = "a number", above: bool = False) -> Callable[[str], float]:
    """An argparse type: `bounded_number`, its message argparse's (which names the flag), exit 2."""
    def convert(text: str) -> float:
        try:
            return bounded_number(text, low, high, what=what, above=above)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return convert


def whole_number(low: int, high: int, *, what: str = "a whole number") -> Callable[[str], int]:
    """An argparse type: `bounded_int`, its message argparse's (which names the flag), exit 2."""
    def convert(text: str) -> int:
        try:
            return bounded_int(text, low, high, what=what)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return convert


port_number = whole_number(0, 65535, what="a port number")
"""argparse type of a TCP port, 0-65535 (0: no server); a typo is one argparse message, not a traceback."""


def install_stop_handlers(
    stop: threading.Event,
    on_signal: Callable[[int], None] | None = None,
    signals: Iterable[signal.Signals] = (signal.SIGTERM, signal.SIGINT),
) -> None:
    """Each of `signals` calls `on_signal(signum)`, then sets `stop`, from a thread: the handler runs in the
    main thread, which may hold the Event's lock at that instant (inside `stop.wait()`), and `set()` there
    would wait for it forever."""

    def stop_now(signum: int) -> None:
        if on_signal is not None:
            on_signal(signum)
        stop.set()

    def handle(signum: int, frame: FrameType | None) -> None:
        threading.Thread(target=stop_now, args=(signum,), name="signal", daemon=True).start()

    for signum in signals:
        signal.signal(signum, handle)


def silence_stdout() -> None:
    """After a BrokenPipeError on stdout (`... | head`): point stdout at /dev/null, so the interpreter's final
    flush does not fail a second time and print a traceback."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)


def fail(prog: str | None, message: str) -> int:
    """Print `prog: message` (the message alone when `prog` is None: it already says where it comes from) as
    the one error line(s) on stderr, and return EXIT_USAGE for the caller to exit with, so every command
    reports bad input the same way."""
    shown = "\n".join(visible(line) for line in message.split("\n"))  # a server's words may hold escapes
    print(shown if prog is None else f"{prog}: {shown}", file=sys.stderr)
    return EXIT_USAGE


DISTRIBUTION = "gpu-autoscaler"
"""The distribution all three commands ship in (pyproject's [project] name)."""

CLIENT_LIBRARIES: tuple[tuple[str, str], ...] = (
    ("nvidia-ml-py", "NVML bindings, pynvml"),
    ("kubernetes", "Kubernetes client"),
    ("prometheus-client", "Prometheus client"),
)
"""(distribution, what it is) of the libraries a bug report needs the versions of, in `--version`."""


def version(distribution: str = DISTRIBUTION) -> str:
    """The installed version of `distribution` ('not installed' when it is not): read from its metadata,
    never by importing it (the Kubernetes client alone takes 0.35 s to import)."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


def version_text(prog: str) -> str:
    """What `--version` prints: the command's version, then each client library's and Python's, one a line."""
    lines = [f"{prog} {version()}"]
    lines += [f"{name} {version(name)} ({what})" for name, what in CLIENT_LIBRARIES]
    lines.append(f"Python {platform.python_version()}")
    return "\n".join(lines)


class _VersionAction(argparse.Action):
    """`--version`: print `version_text` and exit 0; the versions are read only when the flag is given."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, prog: str = "",
                 **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)
        self.prog = prog

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        print(version_text(self.prog))
        parser.exit()


def add_version_argument(parser: argparse.ArgumentParser, prog: str) -> None:
    """`--version` on `parser`, printing `prog`'s version and its client libraries' (`version_text`)."""
    parser.add_argument("--version", action=_VersionAction, prog=prog,
                        help="print the version and the NVML, Kubernetes and Prometheus client versions")


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """'; did you mean X?' for the choice closest to a mistyped `word` (difflib's), '' when none is close."""
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


_INVALID_CHOICE = re.compile(r"invalid choice: '(?P<word>.*)' \(choose from (?P<choices>.*)\)", re.DOTALL)


class HintingParser(argparse.ArgumentParser):
    """argparse, with the answer to a typo every command of the project gives: the usage of the command the
    typo is in (not the top level's: `gpu-fleet estimate 70B` shows estimate's), what was not understood,
    and the closest subcommand or option, exit 2. Subparsers are of the same class."""

    _seen: tuple[str, ...] = ()

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        self._seen = tuple(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def parse_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                   namespace: argparse.Namespace | None = None) -> argparse.Namespace:
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            where = self.chosen(parsed)
            where.error(f"unrecognized arguments: {' '.join(extras)}" + where.option_hint(extras))
        return parsed

    def chosen(self, parsed: argparse.Namespace) -> HintingParser:
        """The parser of the innermost subcommand named in `parsed` (this one without a subcommand)."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                child = action.choices.get(getattr(parsed, action.dest, None) or "")
                if isinstance(child, HintingParser):
                    return child.chosen(parsed)
        return self

    def option_hint(self, words: Iterable[str]) -> str:
        """'; did you mean '--port'?' for the first of `words` that is an option this parser lacks; for a
        value given without its flag, the first option whose type takes it (`70B`: '--params 70B')."""
        known = [s for s in self._option_string_actions if s.startswith("--")]
        for word in words:
            name = word.split("=", 1)[0]
            if name in self._option_string_actions:
                continue
            if name.startswith("-") and not any(s.startswith(name) for s in known):
                return did_you_mean(name, known) or f" ({self.prog} has no option {name}: see --help)"
            if not name.startswith("-"):
                flag = self.flag_taking(word)
                return f"; did you mean '{flag} {word}'?" if flag else ""
        return ""

    def flag_taking(self, word: str) -> str | None:
        """The first long option with a type or choices of its own that accepts `word` (None: none does)."""
        for action in self._actions:
            longs = [s for s in action.option_strings if s.startswith("--")]
            if not longs or action.nargs not in (None, "?") or (action.type is None and not action.choices):
                continue
            try:
                value = action.type(word) if callable(action.type) else word
            except (ValueError, TypeError, argparse.ArgumentTypeError):
                continue
            if not action.choices or value in action.choices:
                return longs[0]
        return None

    def hinted(self, message: str) -> str:
        """`message` with the hint: the closest choice of a mistyped subcommand, or the option this parser
        does not know that made argparse read a value as the subcommand (`gpu-exporter --gpus 2`)."""
        match = _INVALID_CHOICE.search(message)
        commands = [argparse._get_action_name(a) for a in self._actions
                    if isinstance(a, argparse._SubParsersAction)]
        if match is None or not any(message.startswith(f"argument {name}:") for name in commands):
            return message
        word = match.group("word")
        choices = re.findall(r"'([^']*)'", match.group("choices"))
        hint = did_you_mean(word, choices)
        if hint:
            return message + hint
        before = self._seen[:self._seen.index(word)] if word in self._seen else self._seen
        unknown = [w for w in before if w.startswith("-") and self.option_hint([w])]
        if unknown:  # `--gpus 2`: the value of an option that does not exist was read as the command
            return f"unrecognized arguments: {unknown[0]}{self.option_hint(unknown)}"
        return message

    def error(self, message: str) -> NoReturn:
        """This command's usage and the hinted message on stderr, exit 2."""
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {visible(self.hinted(message))}\n")
