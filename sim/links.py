"""The simulator's links and servers: work served in order of arrival, optionally behind a drop-tail queue.

A `Server` serves one piece of work at a time, in the order offered: a
piece offered at `now` that takes `seconds` is done at
max(now, when the one before is done) + seconds.  With a `queue` of N, a
piece that finds N pieces not yet done (the one being served counts) is
dropped, as Linux's pfifo does under Mininet's htb; without, the queue has
no end.  Either way it counts the most pieces it held at once (`deepest`,
the one being served included): what a queue of any limit would have had to
hold, which is how the scale model finds where a switch port would drop.
A software switch's per-frame service (sim/netsim.py's slow switch,
sim/scale.py's `_Switch`) is a `Server`.

A `Link` is a `Server` whose pieces are frames: a frame of `size` bytes
takes size * 8 / rate seconds to send (`rate` in bits per second) and
arrives `delay` later.  It counts the bytes it carried and the frames it
dropped by kind ("hina", "tcp", ...).  The virtual network's bottlenecks
(rate and queue; the network adds each packet's latency and jitter
itself) and the scale model's links (rate and delay, no queue limit: their
`deepest` says what a switch port would have to hold) are both `Link`s.
"""

from __future__ import annotations

import collections


class Server:
    """A FIFO server of one piece at a time behind a drop-tail queue of `queue` pieces (None: no limit)."""

    __slots__ = ("queue", "free_at", "dropped", "deepest", "_leaving")

    def __init__(self, queue: int | None = None):
        self.queue = queue
        self.free_at = 0.0  # when everything offered so far is done
        self.dropped = 0
        self.deepest = 0  # the most pieces held at once, the one being served included
        self._leaving: collections.deque[float] = collections.deque()  # when each held piece is done

    def serve(self, now: float, seconds: float) -> float | None:
        """When a piece of `seconds` offered at `now` is done; None: the queue was full, it is dropped."""
        leaving = self._leaving
        while leaving and leaving[0] <= now:
            leaving.popleft()
        if self.queue is not None and len(leaving) >= self.queue:
            self.dropped += 1
            return None
        self.free_at = max(now, self.free_at) + seconds
        leaving.append(self.free_at)
        if len(leaving) > self.deepest:
            self.deepest = len(leaving)
        return self.free_at


class Link(Server):
    """A link of `rate` bits per second and `delay` seconds of propagation, behind a drop-tail queue of
    `queue` frames (None: no limit): frames leave in the order they came, back to back."""

    __slots__ = ("rate", "delay", "seconds_per_byte", "carried", "drops")

    def __init__(self, rate: float, delay: float = 0.0, queue: int | None = None):
        super().__init__(queue)
        self.rate, self.delay = rate, delay
        self.seconds_per_byte = 8.0 / rate
        self.carried: dict[str, int] = {}  # bytes sent, by kind
        self.drops: dict[str, int] = {}  # frames dropped, by kind

    def send(self, now: float, size: int, kind: str = "frames") -> float | None:
        """When a frame of `size` bytes offered at `now` arrives at the far end (it has left the link
        `delay` before); None: dropped."""
        left = self.serve(now, size * self.seconds_per_byte)
        if left is None:
            self.drops[kind] = self.drops.get(kind, 0) + 1
            return None
        self.carried[kind] = self.carried.get(kind, 0) + size
        return left + self.delay
