"""The host's clock as the sender's timers meet it: how late a timer fires here.

A worker's timers (the retransmission timeout, the tail probe, RACK's reordering allowance) are set from
the path they measure: round trips, their variation, the delivery rate.  One thing the path cannot tell
is how soon this host wakes a thread whose timer is due: a `select` that should return in 100 us
returns 50-100 us late on an idle Linux machine (the timer slack and the wake-up), and a timer set
shorter than that fires late anyway, after the answer it waited for may already be in the socket.  So
no timer is set shorter than the host's `tick`, measured once per process: the median lateness of a few
short waits.  Scheduling delays beyond it (a busy machine descheduling the worker for milliseconds) show
in the round trips themselves, and the estimator's variance takes them.  On a virtual clock (the
simulators) timers fire exactly when due: its tick is 0.
"""

from __future__ import annotations

import functools
import select
import statistics
import time

PROBES = 16  # short waits measured
WAIT = 100e-6  # each one's length: about a datacenter round trip
LEAST = 20e-6  # no host is taken to wake a thread sooner than this


@functools.cache
def tick() -> float:
    """The median lateness (seconds) of a short `select` timeout on this host, at least `LEAST`; measured
    on the first call in a process (about 3 ms), the same figure after."""
    late = []
    for _ in range(PROBES):
        start = time.monotonic()
        select.select((), (), (), WAIT)
        late.append(time.monotonic() - start - WAIT)
    return max(LEAST, statistics.median(late))
