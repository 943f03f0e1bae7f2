"""Congestion control and pacing: what a worker's sender is set to, declared once, and its flags.

`CongestionSettings` holds every setting of a worker's congestion window and its pacer
(`hina.host.congestion`): which rules (the fair-share rules, or the delay rule alone), the window's start,
floor and queueing threshold, when a queue counts as another flow's, and the pacer's rate, gain and
quantum.  Everything that starts a sender takes one: `Worker(congestion=...)`,
`SwitchAllreduce.connect(congestion=...)`, `hina worker` and `hina demo` (`add_flags`, `from_flags`), an
experiment's spec (`to_config`, `from_config`: mininet/hina_net.py writes it, `hina worker --spec` reads
it) and the simulator's windows.  A default changed here changes it everywhere.

This module imports neither numba nor the compiled rules: the command line parses its flags with it before
anything is compiled or loaded.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from typing import Any

from hina.cliargs import between, non_negative, positive

CONTEST = 8.0  # windows of RESULTs queued more than our own chunks could, after which the queue is contested
CONTEST_FAIR = 2.0  # the same for the fair-share rules


@dataclasses.dataclass(frozen=True)
class CongestionSettings:
    """A worker's congestion window and pacer, as set (`hina.host.congestion` says what each rule does)."""

    # the fair-share rules (every worker's default): timeouts do not cut, contest sooner, catch up to an
    # equal split; False: the delay rule alone, which yields to a flow that keeps a queue standing
    fair: bool = True
    initial: int = 16  # chunks in flight at the start (slow start grows it), at most the job's W slots
    minimum: int = 2  # the fewest chunks a loss cuts the window to
    # seconds of queueing over the least round trip (or the least round trip, if longer) past which the window
    # stops growing: what a busy host's scheduler adds to round trips now and then (2 shared cores: single
    # round trips 5 ms over the least were common); a simulated host that a scheduler never delays takes 0
    queue_delay: float = 5e-3
    # windows of RESULTs queued more than the window's own chunks could, after which the queue is another
    # flow's (contested); None: CONTEST_FAIR with the fair-share rules, else CONTEST; inf: never
    contest: float | None = None
    # the link rate (Mbit/s) new chunks leave at, `pace_quantum` seconds of sending at a time, instead of a
    # window at once; None: unpaced
    pace_mbps: float | None = None
    # the pacer's rate over the link's: a little faster, so that the link's queue, not a timer that fired late,
    # sets the pace (at exactly the link's rate a late wake-up is sending time lost for good)
    pace_gain: float = 1.25
    # sending time the pacer lets go at once: a segmentation-offload batch of jumbo frames at a few hundred
    # Mbit/s (each wake-up of the worker's loop costs a system call or two)
    pace_quantum: float = 1.5e-3

    def __post_init__(self) -> None:
        """Refuse a bad setting in one line that names it and its value (ValueError)."""
        def positive_number(x: Any) -> bool:
            return isinstance(x, (int, float)) and not isinstance(x, bool) and 0 < x < math.inf

        checks = (
            ("fair", isinstance(self.fair, bool), "true or false"),
            ("initial", isinstance(self.initial, int) and not isinstance(self.initial, bool) and self.initial >= 1,
             "a whole number of chunks >= 1"),
            ("minimum", isinstance(self.minimum, int) and not isinstance(self.minimum, bool) and self.minimum >= 1,
             "a whole number of chunks >= 1"),
            ("queue_delay", positive_number(self.queue_delay) or self.queue_delay == 0,
             "a finite number of seconds >= 0"),
            ("contest", self.contest is None or self.contest == math.inf or positive_number(self.contest),
             "a positive number of windows, inf (never) or None (the rules' default)"),
            ("pace_mbps", self.pace_mbps is None or positive_number(self.pace_mbps),
             "a positive number of Mbit/s, or None (unpaced)"),
            ("pace_gain", positive_number(self.pace_gain), "a positive, finite number"),
            ("pace_quantum", positive_number(self.pace_quantum) or self.pace_quantum == 0,
             "a finite number of seconds >= 0"),
        )
        for name, ok, what in checks:
            if not ok:
                raise ValueError(f"congestion setting {name} must be {what}, got {getattr(self, name)!r}")

    @property
    def contest_windows(self) -> float:
        """`contest`, or the rules' default where it is None."""
        if self.contest is not None:
            return self.contest
        return CONTEST_FAIR if self.fair else CONTEST

    def to_config(self) -> dict[str, Any]:
        """The settings as JSON-ready values (an experiment's spec carries them to each worker)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> CongestionSettings:
        """Settings from `to_config`'s dict; a key it does not know is a ValueError naming it."""
        unknown = sorted(set(config) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise ValueError(f"unknown congestion settings {', '.join(map(repr, unknown))}")
        return cls(**config)


_DEFAULT = CongestionSettings()


def _milliseconds(text: str) -> float:
    return non_negative(text) / 1e3


# Each flag sets one field: (flag, field, type, metavar, help).  The help states the default from _DEFAULT.
_FLAGS = (
    ("--pace", "pace_mbps", positive, "MBPS",
     "let new chunks out at this link rate in Mbit/s (times --pace-gain), a quantum of sending at a time, "
     "instead of a window at once: the rate of the worker's link, where a window at once would overflow its "
     "queue (default: {pace_default})"),
    ("--pace-gain", "pace_gain", positive, "X",
     f"the pacer's rate over --pace's: a little faster, so that the link's queue and not a late timer sets the "
     f"pace (default: {_DEFAULT.pace_gain:g})"),
    ("--initial-window", "initial", between(1, None, " (chunks)"), "CHUNKS",
     f"chunks in flight at the start, grown by slow start; at most the job's slots (default: {_DEFAULT.initial})"),
    ("--min-window", "minimum", between(1, None, " (chunks)"), "CHUNKS",
     f"the fewest chunks a loss cuts the window to (default: {_DEFAULT.minimum})"),
    ("--queue-delay", "queue_delay", _milliseconds, "MS",
     f"queueing over the least round trip, in ms, past which the window stops growing "
     f"(default: {_DEFAULT.queue_delay * 1e3:g})"),
)


def _dest(field: str) -> str:
    return f"congestion_{field}"


def add_flags(parser: argparse.ArgumentParser, *, pace_default: str = "unpaced") -> None:
    """The congestion window's and pacer's flags (`from_flags` reads them back); pace_default: what the
    command paces at without --pace (mininet/run.py: each worker's own link rate).  A flag not given leaves
    its setting as it is (argparse.SUPPRESS), so the help states each default itself."""
    group = parser.add_argument_group("congestion window and pacing")
    for flag, field, kind, metavar, text in _FLAGS:
        group.add_argument(flag, dest=_dest(field), type=kind, metavar=metavar, default=argparse.SUPPRESS,
                           help=text.format(pace_default=pace_default))
    group.add_argument("--delay-rule", dest=_dest("fair"), action="store_const", const=False,
                       default=argparse.SUPPRESS,
                       help="the congestion window's delay rule alone instead of the fair-share rules, for "
                            "comparison (docs/fidelity.md; default: the fair-share rules)")


def from_flags(args: argparse.Namespace, base: CongestionSettings = _DEFAULT) -> CongestionSettings:
    """`base` with the settings `add_flags`' flags gave in `args` (a flag not given keeps base's)."""
    fields = [f.name for f in dataclasses.fields(CongestionSettings)]
    given = {name: getattr(args, _dest(name)) for name in fields if hasattr(args, _dest(name))}
    return dataclasses.replace(base, **given)
