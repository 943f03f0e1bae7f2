"""Command-line flags shared by hina's tools: bad input is one line naming the value, exit status 2.

`OneLineParser` is argparse without the usage dump; the type functions
below check a flag's value as argparse reads it, so a bad value never
reaches a run (and never half-writes a result file).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

MAX_PIPES = 64  # processes; a typo should not fork thousands
# A slow pipe's queue (the emulator's --pipe-queue), in packets: BMv2's simple_switch queues 1024 before its
# ingress pipeline (its input buffer) and drops what comes when it is full; the emulator's batched path keeps
# a ring this deep of frames up to 64 KB, so not more than 16,384
PIPE_QUEUE = 1024
MAX_PIPE_QUEUE = 1 << 14


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (prog: message) and exit status 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message}\n")


class DefaultsFormatter(argparse.HelpFormatter):
    """Help that states each flag's default once: "(default: X)" added where the help does not say it
    already, and never for a default of None (nothing given) or False (a switch left off)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if ("default" in text or action.default in (None, False, argparse.SUPPRESS) or action.required
                or not action.option_strings):
            return text
        return f"{text} (default: %(default)s)"


def plural(n: int, noun: str) -> str:
    """"1 worker", "4 workers": a count and its noun, as a reader says it."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


def _number(text: str, kind: type = float):
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, "
                                         f"got {text!r}") from None
    if kind is float and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
    return value


def checked(fn: Callable[[str], Any]) -> Callable[[str], Any]:
    """A flag's type from a function that raises ValueError on a bad value: argparse's one-line error."""
    def check(text: str) -> Any:
        try:
            return fn(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    check.__name__ = getattr(fn, "__name__", "value").strip("_")
    return check


def existing_file(text: str) -> Path:
    """A flag naming a file that must exist."""
    path = Path(text)
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"no such file: {text}")
    return path


def between(low: int, high: int | None = None, what: str = "") -> Callable[[str], int]:
    """An integer flag within [low, high] (no upper bound when high is None)."""
    def check(text: str) -> int:
        value = _number(text, int)
        if value < low or (high is not None and value > high):
            span = f"at least {low}" if high is None else f"an integer from {low} to {high}"
            raise argparse.ArgumentTypeError(f"must be {span}{what}, got {text!r}")
        return value
    return check


def pipes_flag(text: str) -> int:
    return between(1, MAX_PIPES, " (processes)")(text)


def pipe_queue_flag(text: str) -> int:
    return between(1, MAX_PIPE_QUEUE, " (packets)")(text)


def positive(text: str) -> float:
    value = _number(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return value


def non_negative(text: str) -> float:
    value = _number(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text}")
    return value


def fraction(text: str) -> float:
    value = _number(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be within [0, 1], got {text}")
    return value


def probability(text: str) -> float:
    value = _number(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"a probability must be within [0, 1], got {text}")
    return value


def scale_flag(text: str) -> float:
    value = _number(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {text}")
    return value


def library_only(doc: str | None, instead: str) -> int:
    """What a library module says when run as a script (`python mininet/topo.py --help`): its purpose, that
    it is a library, and the command to run instead; exit status 2 (0 for --help)."""
    import sys

    first = (doc or "").strip().split("\n\n")[0]
    print(f"{first}\n\nThis module is a library, not a command: run {instead} (--help there).")
    return 0 if any(a in ("-h", "--help") for a in sys.argv[1:]) else 2
