"""Loss, duplication, reordering and delay for experiments: seeded, reproducible, without I/O.

One `Impairment` sits on each direction of the switch (UPDATEs in, RESULTs
out).  Each packet is dropped with probability `drop`, otherwise sent twice
with probability `dup`, and held back with probability `reorder` until a
packet of another flow has passed it (or `max_hold` seconds have gone by).
With `delay` every surviving packet then waits that many seconds, in
order: on a star this is the links' propagation delay, for kernels whose
tc lacks netem.  The same config carries the slow pipe's rate and queue
(`pipe_rate`, `pipe_queue`), which act between the two directions, once
per pipe (`slow_pipe.SlowPipe`).

Reordering never swaps two packets of the same flow (same worker): a
network path keeps one flow in order, and the slot protocol relies on it.
A worker's retransmission of chunk c overtaken by its own next UPDATE for
the same slot could land in an emptied slot copy as if it were new data,
which the slot protocol excludes by assuming no packet is delayed for longer than a
window cycle; this injector therefore reorders across flows only.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Hashable
from typing import Any

import numpy as np

from hina.cliargs import MAX_PIPE_QUEUE, PIPE_QUEUE


@dataclasses.dataclass(frozen=True)
class ImpairmentConfig:
    """What the emulator does to packets, per direction (`Impairment`): drop with probability `drop`,
    else send twice with `dup`, hold back with `reorder` until another flow's packet passed (at most
    `max_hold` seconds), then delay every survivor by `delay` seconds; `seed` makes it repeatable.  Between
    the directions, with `pipe_rate` > 0, each pipe takes at most that many packets a second through its rules
    and queues at most `pipe_queue` (`slow_pipe.SlowPipe`; 0: as fast as the host goes)."""

    drop: float = 0.0
    dup: float = 0.0
    reorder: float = 0.0
    max_hold: float = 0.005  # seconds a held packet waits for another flow at most
    seed: int = 0
    delay: float = 0.0  # seconds every packet spends in a FIFO delay line
    pipe_rate: float = 0.0  # packets a second each pipe's rules take at most (0: no limit)
    pipe_queue: int = PIPE_QUEUE  # packets waiting for a slow pipe at most; more are dropped

    def __post_init__(self) -> None:
        for name in ("drop", "dup", "reorder"):
            p = getattr(self, name)
            if not 0.0 <= p <= 1.0:
                raise ValueError(f"{name} probability must be within [0, 1], got {p}")
        if not self.delay >= 0:
            raise ValueError(f"delay must be >= 0 ms, got {self.delay * 1000:g} ms")
        if not self.max_hold >= 0:
            raise ValueError(f"the reordering hold time must be >= 0 s, got {self.max_hold}")
        if not 0 <= self.pipe_rate < float("inf"):
            raise ValueError(f"pipe_rate must be a finite number of packets per second >= 0 (0: no limit), "
                             f"got {self.pipe_rate}")
        if (isinstance(self.pipe_queue, bool) or not isinstance(self.pipe_queue, int)
                or not 1 <= self.pipe_queue <= MAX_PIPE_QUEUE):
            raise ValueError(f"pipe_queue must be 1..{MAX_PIPE_QUEUE} packets, got {self.pipe_queue!r}")

    @property
    def active(self) -> bool:
        """Whether a direction does anything to packets (the slow pipe is not a direction's)."""
        return self.drop > 0 or self.dup > 0 or self.reorder > 0 or self.delay > 0


class Impairment:
    """Decides the fate of each packet; `apply` and `due` return what to deliver now."""

    def __init__(self, config: ImpairmentConfig, stream: int = 0):
        self.config = config
        self._rng = np.random.default_rng([config.seed, stream])
        self._held: collections.deque[tuple[Hashable, Any]] = collections.deque()
        self._held_flow: Hashable = None
        self._release_at = 0.0
        self._line: collections.deque[tuple[float, Any]] = collections.deque()
        self.stats = collections.Counter()

    def apply(self, packet: Any, flow: Hashable, now: float) -> list[Any]:
        """What to deliver now for this packet (and any held ones it releases)."""
        return self._delayed(self._decide(packet, flow, now), now)

    def due(self, now: float) -> list[Any]:
        """Packets whose hold or delay is over."""
        released = self._release() if self._held and now >= self._release_at else []
        out = self._delayed(released, now)
        while self._line and self._line[0][0] <= now:
            out.append(self._line.popleft()[1])
        return out

    def next_timer(self) -> float | None:
        timers = [t for t in (self._release_at if self._held else None,
                              self._line[0][0] if self._line else None) if t is not None]
        return min(timers) if timers else None

    def _delayed(self, packets: list[Any], now: float) -> list[Any]:
        if self.config.delay <= 0 or not packets:
            return packets
        self._line.extend((now + self.config.delay, p) for p in packets)
        return []

    def _decide(self, packet: Any, flow: Hashable, now: float) -> list[Any]:
        cfg = self.config
        if not cfg.active and not self._held:
            return [packet]
        u_drop, u_dup, u_reorder = self._rng.random(3)
        if u_drop < cfg.drop:
            self.stats["dropped"] += 1
            return []
        copies = 1
        if u_dup < cfg.dup:
            self.stats["duplicated"] += 1
            copies = 2
        out: list[Any] = []
        for _ in range(copies):
            if self._held and flow == self._held_flow:
                self._held.append((flow, packet))  # stay behind the held packet of the same flow
            elif not self._held and u_reorder < cfg.reorder:
                self.stats["reordered"] += 1
                self._held.append((flow, packet))
                self._held_flow, self._release_at = flow, now + cfg.max_hold
            else:
                out.append(packet)
                if self._held:  # another flow passed: the held packets follow it
                    out.extend(self._release())
        return out

    def _release(self) -> list[Any]:
        out = [p for _, p in self._held]
        self._held.clear()
        self._held_flow = None
        return out
