"""The simulator's one event clock: virtual time and a heap of callbacks, nothing else.

`Clock.at(when, callback, *args)` schedules; `run(until)` calls every
callback due at or before `until`, in time order, setting `now` to each
one's time as it runs (a callback may schedule more); `step(until)` runs
just the earliest.  Callbacks due at the same instant run in the order they
were scheduled, so a run is a pure function of its inputs.  The virtual
network (sim/netsim.py) and the scale model's path (sim/scale.py) both run
on it.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable


class Clock:
    """Virtual seconds (`now`, from 0) and the callbacks scheduled on them."""

    __slots__ = ("now", "_events", "_seq")

    def __init__(self) -> None:
        self.now = 0.0
        self._events: list = []  # (when, insertion number, callback, args): ties go by insertion
        self._seq = itertools.count()

    def at(self, when: float, callback: Callable, *args) -> None:
        """Call `callback(*args)` at `when`."""
        heapq.heappush(self._events, (when, next(self._seq), callback, args))

    def step(self, until: float = math.inf) -> bool:
        """Run the earliest callback if it is due at or before `until`; False if none is."""
        if not self._events or self._events[0][0] > until:
            return False
        self.now, _, callback, args = heapq.heappop(self._events)
        callback(*args)
        return True

    def run(self, until: float = math.inf) -> bool:
        """Run callbacks until none is due at or before `until` (default: until none is left); True if
        some are still scheduled (after `until`)."""
        events = self._events
        while events and events[0][0] <= until:
            self.now, _, callback, args = heapq.heappop(events)
            callback(*args)
        return bool(events)

    def advance(self, to: float) -> None:
        """Move `now` on to `to` (never back): the time a caller's own timer fires."""
        self.now = max(self.now, to)

    @property
    def next_at(self) -> float:
        """When the earliest scheduled callback is due; infinity when none is."""
        return self._events[0][0] if self._events else math.inf

    def __len__(self) -> int:
        """Callbacks still scheduled."""
        return len(self._events)
