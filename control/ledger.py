"""The switch's slots as jobs share them: which range each job holds, who owns it, who waits.

A job that joins without a slot range of its own (`Placement`) is given one by
the switch: the lowest free range of the size it asks for, capped by the
switch's share policy, within the switch's slot space (`DEFAULT_SPACE`, the
P4 program's registers).  When no free range is large enough, the job's
`when_full` answers:

- ``refuse``: the join fails at once, in one line naming the jobs that hold
  the slots and what to do;
- ``fewer``: the job runs on the largest free range if it holds at least
  `least` slots (its workers' windows are that many chunks);
- ``wait``: the job queues, first come first served; each of its workers asks
  again (`ControlClient.join` does, showing the position) until the head of
  the queue fits.  A job may pass the queue where the job first in it
  would still fit beside it.

The share policies (`POLICIES`), each a cap on a new job's range computed from
the jobs on the switch when it arrives (a job keeps what it was given):

- ``equal``: space / (jobs + 1);
- ``workers``: space x its workers / (its workers + the others' workers);
- ``request``: what it asks for, first come first served.

`Ledger` is the control port's own state (the data plane holds only the
ranges): the queue, and each job's owner where the switch has tenants
(`hina.control.auth`).  The functions below it are pure: `free_runs`, `cap`
and `choose` are what a controller uses for BMv2 and for trees too
(`hina.control.fabric`).
"""

from __future__ import annotations

import collections
import dataclasses
import time
from collections.abc import Iterable
from typing import Any

from hina.cliargs import plural
from hina.wire.headers import MAX_SLOTS

# slots a switch hands out by default: the P4 programs' registers (HINA_SLOTS in p4/configuration.p4 and
# p4/tna/configuration.p4, which tests/wire/test_declared_once.py holds equal to this)
DEFAULT_SPACE = 4096
POLICIES = ("equal", "workers", "request")
DEFAULT_POLICY = "equal"
WHEN_FULL = ("refuse", "fewer", "wait")
DEFAULT_WHEN_FULL = "refuse"
WAIT_POLL = 0.25  # seconds between a waiting worker's joins
WAIT_FORGET = 3.0  # seconds after which a waiting job that stopped asking leaves the queue


class Full(ValueError):
    """No range can be given now (the message names the holders and the remedies)."""


@dataclasses.dataclass(frozen=True)
class Placement:
    """What a job asks of the switch's slots: `slots` wanted, at least `least` (with when_full "fewer")."""

    slots: int
    least: int | None = None
    when_full: str = DEFAULT_WHEN_FULL

    def __post_init__(self) -> None:
        if isinstance(self.slots, bool) or not isinstance(self.slots, int) or not 1 <= self.slots <= MAX_SLOTS:
            raise ValueError(f"slots must be 1..{MAX_SLOTS}, got {self.slots!r}")
        if self.least is not None and (isinstance(self.least, bool) or not isinstance(self.least, int)
                                       or not 1 <= self.least <= self.slots):
            raise ValueError(f"the least slots must be 1..{self.slots} (the slots asked for), got {self.least!r}")
        if self.when_full not in WHEN_FULL:
            raise ValueError(f"when_full must be one of {', '.join(WHEN_FULL)}, got {self.when_full!r}")

    @property
    def minimum(self) -> int:
        """The fewest slots this job runs on: `least` with "fewer", else all it asks for."""
        return (self.least or 1) if self.when_full == "fewer" else self.slots

    def to_config(self) -> dict[str, Any]:
        return {"slots": self.slots, "least": self.least, "when_full": self.when_full}

    @classmethod
    def from_config(cls, cfg: Any) -> Placement:
        if not isinstance(cfg, dict) or "slots" not in cfg:
            raise ValueError(f"a placement is {{\"slots\": N, optional \"least\": M, \"when_full\": "
                             f"{'|'.join(WHEN_FULL)}}}, got {cfg!r}")
        unknown = set(cfg) - {"slots", "least", "when_full"}
        if unknown:
            raise ValueError(f"placement: unknown fields {', '.join(sorted(unknown))}")
        return cls(cfg["slots"], cfg.get("least"), cfg.get("when_full", DEFAULT_WHEN_FULL))


@dataclasses.dataclass(frozen=True)
class Held:
    """A job's range on a switch, as the allocation sees it."""

    job_id: int
    slot_base: int
    slots: int
    workers: int = 1
    owner: str | None = None

    @property
    def end(self) -> int:
        return self.slot_base + self.slots


def check_space(space: int) -> int:
    if isinstance(space, bool) or not isinstance(space, int) or not 1 <= space <= MAX_SLOTS:
        raise ValueError(f"the slot space must be 1..{MAX_SLOTS} slots, got {space!r}")
    return space


def check_policy(policy: str) -> str:
    if policy not in POLICIES:
        raise ValueError(f"the share policy must be one of {', '.join(POLICIES)}, got {policy!r}")
    return policy


def free_runs(held: Iterable[Held], space: int) -> list[tuple[int, int]]:
    """The free ranges of [0, space) as (base, length), lowest first (ranges beyond the space are ignored)."""
    runs, at = [], 0
    for h in sorted(held, key=lambda h: h.slot_base):
        if h.slot_base > at:
            runs.append((at, min(h.slot_base, space) - at))
        at = max(at, h.end)
        if at >= space:
            break
    if at < space:
        runs.append((at, space - at))
    return [(b, n) for b, n in runs if n > 0]


def cap(policy: str, space: int, workers: int, held: Iterable[Held]) -> int:
    """The most slots the policy gives a new job of `workers` workers beside the jobs `held`."""
    others = list(held)
    if policy == "equal":
        return max(1, space // (len(others) + 1))
    if policy == "workers":
        return max(1, space * workers // (workers + sum(h.workers for h in others)))
    return space


def choose(want: Placement, workers: int, held: Iterable[Held], space: int, policy: str) -> tuple[int, int] | None:
    """(slot_base, slots) for a new job, or None when no free range holds its minimum: the lowest free range
    that holds what it asks for (capped by the policy), else, with when_full "fewer", the largest free range
    if it holds at least `least`."""
    held = list(held)
    size = min(want.slots, cap(policy, space, workers, held))
    runs = free_runs(held, space)
    for base, length in runs:
        if length >= size:
            return base, size
    if want.when_full == "fewer" and runs:
        base, length = max(runs, key=lambda r: (r[1], -r[0]))
        if length >= min(want.minimum, size):
            return base, length
    return None


def describe(held: Iterable[Held]) -> str:
    """"job 1 [0, 64) of alice (4 workers), job 2 [64, 96)": who holds what."""
    parts = []
    for h in sorted(held, key=lambda h: h.slot_base):
        parts.append(f"job {h.job_id} [{h.slot_base}, {h.end})" + (f" of {h.owner}" if h.owner else "")
                     + f" ({plural(h.workers, 'worker')})")
    return ", ".join(parts) or "none"


class Ledger:
    """The control port's book of jobs: owners, and the queue of jobs waiting for slots."""

    def __init__(self, space: int = DEFAULT_SPACE, policy: str = DEFAULT_POLICY, *, clock=time.monotonic):
        self.space = check_space(space)
        self.policy = check_policy(policy)
        self.clock = clock
        self.owners: dict[int, str | None] = {}
        # job_id -> (when it last asked, what it asks for, its workers), first come first
        self.waiting: collections.OrderedDict[int, tuple[float, Placement, int]] = collections.OrderedDict()

    def held(self, jobs: Iterable[dict]) -> list[Held]:
        """The switch's listing (`Pipeline.listing`) as ranges, with their owners."""
        return [Held(j["job_id"], j["slot_base"], j["slots"], j["workers"], self.owners.get(j["job_id"]))
                for j in jobs]

    def place(self, job_id: int, workers: int, want: Placement, jobs: list[dict]) -> tuple[int, int] | int:
        """(slot_base, slots) granted to a job the switch does not hold yet; or, with when_full "wait", its
        position in the queue (1: next); raises `Full` otherwise."""
        now = self.clock()
        for j, (asked, _, _) in list(self.waiting.items()):  # waiting jobs that stopped asking leave the queue
            if now - asked > WAIT_FORGET:
                del self.waiting[j]
        held = self.held(jobs)
        order = list(self.waiting)
        ahead = order[:order.index(job_id)] if job_id in self.waiting else order
        got = choose(want, workers, held, self.space, self.policy)
        if got is not None and ahead:  # past the queue only where the job first in it still fits beside it
            _, head, head_workers = self.waiting[ahead[0]]
            beside = [*held, Held(job_id, got[0], got[1], workers)]
            if choose(head, head_workers, beside, self.space, self.policy) is None:
                got = None
        if got is not None:
            self.waiting.pop(job_id, None)
            return got
        if want.when_full == "wait":
            self.waiting[job_id] = (now, want, workers)  # keeps its place: assigning does not move a key
            return list(self.waiting).index(job_id) + 1
        runs = [n for _, n in free_runs(held, self.space)]
        free, largest = sum(runs), max(runs, default=0)
        size = min(want.slots, cap(self.policy, self.space, workers, held))
        queue = (f"; {plural(len(ahead), 'job')} wait{'s' * (len(ahead) == 1)} ahead of it" if ahead else "")
        raise Full(f"job {job_id} asks for {plural(size, 'slot')}"
                   f"{f' (at least {want.minimum})' * (want.when_full == 'fewer')}"
                   f" and the switch has {free:,} of its {self.space:,} free, in runs of at most {largest:,}{queue}; "
                   f"held: {describe(held)}. Ask for fewer (--slots, or --min-slots with --when-full fewer), wait "
                   f"for a job to end (--when-full wait), or remove one (hina switch remove JOB_ID)")

    def forget(self, job_id: int) -> None:
        """A job gone from the switch: its owner is no longer on the books."""
        self.owners.pop(job_id, None)
        self.waiting.pop(job_id, None)


__all__ = ["DEFAULT_POLICY", "DEFAULT_SPACE", "DEFAULT_WHEN_FULL", "POLICIES", "WAIT_POLL", "WHEN_FULL", "Full",
           "Held", "Ledger", "Placement", "cap", "check_policy", "check_space", "choose", "describe", "free_runs"]
