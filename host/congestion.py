"""Congestion control and pacing: how many chunks a worker keeps in flight, and how fast new ones leave.

This room holds three modules, each with one job:

- `congestion_settings.py`: `CongestionSettings`, every setting of the window and the pacer declared
  once, and the flags `hina worker` and `hina demo` take (plain Python: the command line parses its
  flags before numba or a kernel is loaded, and numba alone takes seconds to import on a busy machine);
- this module: `CongestionWindow` and its `Pacer`, the objects a `Worker` keeps across its transfers,
  and what their rules do;
- `congestion_rules.py`: the same rules compiled, over the window's record, which the sender's compiled
  rules (`sendplane.py`) call.  Kept apart from these objects as `sendplane.py` is from `window.py`: numba's
  cache, and the stamp `hina.kernels` keeps beside it, follow the kernels' file, so a change here costs no
  compile.

Loss detection and the timers (RACK, the tail probe, the retransmission timeout, the RTT estimate) are
the sender's (`window.py`, `sendplane.py`): they decide that a chunk was answered, lost or timed out and
tell the window (`window_result`, `window_loss`, `window_expired`); when a new chunk may go is the
window's and the pacer's.

The window: slow start from `initial` chunks (one more per RESULT) up to `ssthresh`, then one more per
window of RESULTs; a loss halves it, at most once per round trip (losses of chunks sent before the last
cut are the same congestion event), to no fewer than `minimum`; never past the job's W slots.

Whether a queue is building is read from the least of the last `congestion_rules.SAMPLES` round trips,
not from one: a queue that stands delays every packet, while a busy host's scheduler delays one now and
then (on 2 shared cores, single samples 5 ms over the least are common and said nothing about the
switch).  Few samples, so that a filling queue still stops the window before it overflows.  While one
builds (the least of them `queue_delay`, or the least round trip, over the least), the window stops
growing, and a loss while it stands halves the window (a loss without one is the link's, and keeps it).

That delay rule yields to any flow that keeps a queue standing: a loss-based TCP flow on a shared link
fills the queue, no round trip comes back near the least again, so the window never grows, and each loss
the flow causes halves it, down to its floor (TCP Vegas against Reno).  So the window tells its own queue
from another flow's: at most cwnd of its chunks wait in a queue, which drains at least as fast as the
fastest the RESULTs ever came (measured over 4 round trips, two measurements in a row), so its own chunks
queue at most cwnd / that rate.  When the recent round trips queue more than twice that (another flow
holds more of the queue than we do) while the RESULTs come at under 3/4 of that fastest rate (something
takes the link: a worker's round trip also holds the wait for the job's slowest worker, which its own
window does not bound, but then the job still moves at its pace), for `contest` windows of RESULTs in a
row, the window is *contested*: it grows as TCP Reno's does, queue or not (the same slow start and one
chunk per window), and a loss cuts it by 30%, as CUBIC (Linux's TCP) cuts, so it keeps a share of the
link instead of its floor.  A round trip near the least (the queue drained), or a queue its own chunks
could account for, hands it back to the delay rule (the mode switch of Copa, Arun and Balakrishnan, NSDI
2018).  Alone nothing changes: a queue of the window's own is never contested.

The fair-share rules (`fair`, every worker's default; `hina worker --delay-rule`,
`mininet/run.py --delay-rule` and `CongestionSettings(fair=False)` turn them off; docs/fidelity.md
measures both beside TCP at 30-200 Mbit/s) change four rules: timeouts never cut the window (a late peer
fires them as well as a loss; RACK's losses still cut, and RACK counts a chunk overtaken only by one after
it in the switch's order); it is contested after `CONTEST_FAIR` (2) windows of such RESULTs, or at once on a
loss or a timeout while the queue is more than twice its own, and stays so until its own chunks could
account for the queue for as long; contested, it grows by at least half the gap per round trip to an
equal split of the pipe (half the chunks the path holds at the fastest rate:
`congestion_rules.SPLIT`); and the worker's `RttEstimator.fair()` keeps half a round trip of margin.

The pacer (`pace_mbps`) lets new chunks out at the worker's link rate times `pace_gain`, `pace_quantum`
of sending time at once, instead of a window at once: a window of jumbo frames from every worker, sent
at once, queues behind itself on a shaped link, and its queueing delay outlasts the timers.  A paced
chunk's timer also waits for the chunks ahead of it to cross the link up and back down at that rate.
Resends are not paced.
"""

from __future__ import annotations

import math

import numpy as np

from . import congestion_rules as rules
from .congestion_settings import CongestionSettings
from .records import field, records


class Pacer:
    """When a worker's new chunks may leave: at its link's rate times the gain, a quantum at a time.

    The state is one `congestion_rules.PACER` record (`state`): the window's own (`CongestionWindow.pacer`,
    a field of its record, which the compiled sender paces with), or one of its own.
    """

    def __init__(self, settings: CongestionSettings, state: np.ndarray | None = None):
        """state: the PACER record to keep (a window's `state["pacer"]`); by default one of its own."""
        self.state = records(rules.PACER)[0] if state is None else state
        mbps = settings.pace_mbps or 0.0
        self.state["mbps"] = mbps
        self.state["gain"] = settings.pace_gain
        self.state["quantum"] = settings.pace_quantum
        self.state["per_byte"] = 8 / (mbps * 1e6 * settings.pace_gain) if mbps else 0.0
        self.state["until"] = -math.inf

    gain = field("gain", "the paced rate over the link's")
    quantum = field("quantum", "seconds of sending let go at once")
    until = field("until", "when what the pacer let out has left the link at the paced rate")

    @property
    def rate_mbps(self) -> float | None:
        """The link rate it paces at (times `gain`), in Mbit/s; None: unpaced."""
        return float(self.state["mbps"][0]) or None

    def release_at(self) -> float:
        """When the next new chunk may go (a time already past: at once)."""
        return float(rules.pace_release(self.state[0]))

    def sent(self, now: float, size: int) -> None:
        """A new chunk of `size` bytes on the wire went at `now`."""
        rules.pace_sent(self.state[0], now, size)


class CongestionWindow:
    """How many chunks a worker keeps in flight, at most its job's W slots, and its pacer; shared by its
    transfers.  The rules are the module's; `settings` set them.

    The state is one record (`state`, a structured array of one `congestion_rules.WINDOW`, the pacer's
    record inside it, and its bytes `state_bytes`, which the compiled sender takes and updates in place);
    these methods call the same functions on the record (`state[0]`).
    """

    def __init__(self, limit: int, settings: CongestionSettings):
        """limit: the job's W slots, the most the window opens to."""
        self.settings = settings
        minimum = min(settings.minimum, limit)
        self.state, self.state_bytes = records(
            rules.WINDOW, limit=limit, minimum=minimum, cwnd=max(minimum, min(settings.initial, limit)),
            ssthresh=limit, cut_at=-math.inf, recent=math.nan, queue_delay=settings.queue_delay,
            contest=settings.contest_windows, rate_at=math.nan, fair=settings.fair)
        self.pacer = Pacer(settings, self.state["pacer"])

    cwnd = field("cwnd")
    ssthresh = field("ssthresh")
    cut_at = field("cut_at", "when the window was last cut")

    limit = field("limit", kind=int)
    minimum = field("minimum", kind=int)
    cuts = field("cuts", kind=int)
    chunks = field("cwnd", "whole chunks the window allows in flight", kind=int)
    contests = field("contests", "how often another flow's standing queue made the window contested", kind=int)
    fair = field("fair", "whether the fair-share rules apply", kind=bool)
    queue_delay = field("queue_delay", "queueing over the least round trip past which the window stops growing")
    contest = field("contest", "windows of RESULTs queued more than its own chunks could before it is contested")
    delivery_rate = field("rate", "the fastest RESULT rate two measurements in a row sustained, per second")
    recent_rate = field("rate_now", "the RESULT rate of the last measurement (4 round trips), per second")

    @property
    def contested(self) -> bool:
        """Whether the round trips have queued more than the window's own chunks could for `contest`
        windows of RESULTs: another flow's queue, so the window grows as Reno's does rather than
        yield the link to it."""
        return bool(rules.contested(self.state[0]))

    @property
    def recent_rtt(self) -> float | None:
        """The least of the last SAMPLES round trips."""
        recent = float(self.state["recent"][0])
        return None if math.isnan(recent) else recent

    def queueing(self, rtt: float | None, min_rtt: float) -> bool:
        """Whether a round trip says a queue is building: `queue_delay` (or the least RTT) over the least."""
        return bool(rules.queueing(self.state[0], math.nan if rtt is None else rtt, min_rtt))

    def on_result(self, rtt: float | None = None, min_rtt: float = math.inf, now: float = 0.0) -> None:
        """A RESULT came; `rtt`: its round trip if its chunk went once, `min_rtt`: the least seen.

        The window grows only while the recent round trips stay near the least: past that the
        switch's queue is filling, and a full queue drops (a drop-tail BMv2 switch); or while
        `contested`, when that queue is another flow's."""
        rules.window_result(self.state[0], math.nan if rtt is None else rtt, min_rtt, now)

    def on_loss(self, sent_at: float, now: float, min_rtt: float = 0.0) -> None:
        """The chunk sent at `sent_at` was lost (or timed out) at `now`.

        A loss while round trips show no queue is the link's, not congestion (the window is not
        what caused it, and halving it would only slow a lossy path down): the window stays."""
        rules.window_loss(self.state[0], sent_at, now, min_rtt)

    def on_timeout(self, sent_at: float, now: float, min_rtt: float = 0.0) -> None:
        """The chunk sent at `sent_at` timed out at `now` with nothing overtaking it: a loss to the delay
        rule (`on_loss`); the fair-share rules do not cut (a late peer fires timers as a loss does)."""
        rules.window_expired(self.state[0], sent_at, now, min_rtt)

    def report(self) -> dict:
        """What a worker's summary says of its window: the settings it runs with, and its chunks, cuts and
        contests now."""
        return {"settings": self.settings.to_config(), "chunks": self.chunks, "cuts": self.cuts,
                "contests": self.contests}
