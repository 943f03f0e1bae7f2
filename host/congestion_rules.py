"""The congestion window's and the pacer's rules, compiled: what the sender asks them per RESULT, loss,
timeout and new chunk.

`hina.host.congestion` explains the rules and owns the record they run on; the sender's compiled rules
(`sendplane.py`) call these where its loss recovery decides that something happened: `window_result` for
every RESULT taken, `window_loss` for a chunk RACK found lost, `window_expired` for a timer that fired,
and `pace_release`, `pace_sent` and `crossing` for every new chunk `fill` lets out.  Like `sendplane.py`,
this is the bottom layer: functions of records, `now` and sizes, importing nothing from hina.  The
sender's kernels compile these in, so `hina.kernels` stamps the sender's group with this file too: an
edit here clears the sender's cache (numba's own check sees only the kernel's file).

State: one record per worker, `WINDOW` (`cw`), shared by its transfers, with the pacer inside it
(`cw.pacer`, a `PACER`): a field of the window's record rather than a record of its own, so that the
sender's entry points take no further array (each costs numba's dispatcher a look-up per call).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

SPLIT = 0.5  # contested, a fair-share window catches up to this share of the chunks the pipe holds
SQUEEZED = 0.75  # a delivery rate under this share of the fastest seen: something else takes the link
RATE_RTTS = 4  # round trips a delivery rate is measured over
SAMPLES = 3  # round trips whose least says whether a queue stands
# cw.pacer: the link rate it paces at (Mbit/s, 0: unpaced) and its gain, seconds of sending let go at once,
# seconds per byte at rate times gain (0: unpaced), and when what it let out has left the link at that rate
PACER = np.dtype([("mbps", np.float64), ("gain", np.float64), ("quantum", np.float64), ("per_byte", np.float64),
                  ("until", np.float64)])
# cw: the congestion window (CongestionWindow); a ring of the last SAMPLES round trips (`samples`, `count` of
# them taken, the next at `next`), their least (`recent`); the delivery rate: RESULTs (`rate_n`) since
# `rate_at`, the last two measurements and the fastest
WINDOW = np.dtype([
    ("cwnd", np.float64), ("ssthresh", np.float64), ("cut_at", np.float64), ("recent", np.float64),
    ("limit", np.float64), ("minimum", np.float64), ("cuts", np.int64), ("count", np.int64), ("next", np.int64),
    ("queue_delay", np.float64), ("queued", np.float64), ("contest", np.float64), ("contests", np.int64),
    ("rate_at", np.float64), ("rate_n", np.int64), ("rate", np.float64), ("rate_now", np.float64),
    ("rate_prev", np.float64), ("samples", np.float64, (SAMPLES,)),
    ("on", np.bool_),  # contested
    ("fair", np.bool_),  # the fair-share rules (CongestionSettings' `fair`)
    ("pacer", PACER),
], align=True)


@njit(cache=True)
def queueing(cw, rtt, min_rtt):
    """NaN (no sample) is never queueing; neither is anything against an infinite least RTT."""
    return rtt > min_rtt + max(cw.queue_delay, min_rtt)


@njit(cache=True)
def contested(cw):
    """Whether another flow holds the queue (`foreign`): for `cw.contest` windows of RESULTs in a row the
    round trips showed more queueing than the window's own chunks could make.  The fair-share rules
    also contest on a loss or a timeout while they did, and hold it until the queue drains (a round
    trip near the least) or the window's own chunks account for it for as long."""
    return cw.on


@njit(cache=True)
def foreign(cw, min_rtt):
    """Whether another flow holds the queue: the recent round trips queued more than twice what the
    window's own chunks could (at most cwnd of them wait in a queue, which drains at least as fast
    as the fastest the RESULTs ever came, `cw.rate`), and the RESULTs now come at under `SQUEEZED`
    of that fastest rate (`cw.rate_now`, the last round trip's).  The second condition tells another
    flow from the job's own peers: a worker's round trip also holds the wait for the slowest
    worker's UPDATE, which its own window does not bound, but a job waiting on its own workers still
    keeps its links busy, while a flow that takes a share of a link slows the RESULTs down.  Never
    before a rate is measured."""
    return deep(cw, min_rtt) and cw.rate_now < SQUEEZED * cw.rate


@njit(cache=True)
def deep(cw, min_rtt):
    """Whether the recent round trips queued more than twice what the window's own chunks could."""
    return cw.rate > 0 and cw.recent - min_rtt > 2.0 * cw.cwnd / cw.rate


@njit(cache=True)
def _contest(cw):
    if not cw.on:
        cw.on = True
        cw.contests += 1


@njit(cache=True)
def window_result(cw, rtt, min_rtt, now):
    # the delivery rate: RESULTs over RATE_RTTS round trips (a batch shares one `now`).  The fastest
    # rate counts only what two intervals in a row sustained: RESULTs held up come in a burst (a
    # phase's first window, the end of a stall), which one interval would take for the path's.
    # An interval over an idle gap (between phases or steps) measures the gap: dropped.
    cw.rate_n += 1
    recent = cw.recent
    if math.isnan(cw.rate_at) or now < cw.rate_at or (
            not math.isnan(recent) and now - cw.rate_at > 4 * RATE_RTTS * recent + 0.01):
        cw.rate_at, cw.rate_n, cw.rate_now = now, 0, 0.0
    elif not math.isnan(recent) and now - cw.rate_at >= RATE_RTTS * recent > 0:
        cw.rate_prev, cw.rate_now = cw.rate_now, cw.rate_n / (now - cw.rate_at)
        cw.rate = max(cw.rate, min(cw.rate_prev, cw.rate_now))
        cw.rate_at, cw.rate_n = now, 0
    if not math.isnan(rtt):
        cw.samples[cw.next] = rtt
        cw.next = (cw.next + 1) % SAMPLES
        cw.count = min(SAMPLES, cw.count + 1)
        least = math.inf
        for i in range(cw.count):
            least = min(least, cw.samples[i])
        cw.recent = least
        if not queueing(cw, least, min_rtt):
            cw.queued, cw.on = 0.0, False  # the queue drained: the delay rule's again
        elif foreign(cw, min_rtt):
            cw.queued += 1.0 / cw.cwnd  # a window of such RESULTs: about one round trip
            if cw.fair:
                cw.queued = min(cw.contest, cw.queued)
            if cw.queued >= cw.contest:
                _contest(cw)
        elif cw.fair:
            # a queue the window's own chunks could hold: contested until they could for as long
            cw.queued = max(0.0, cw.queued - 1.0 / cw.cwnd)
            if cw.queued <= 0.0:
                cw.on = False
        else:
            cw.queued, cw.on = 0.0, False  # a queue our own chunks could hold: the delay rule's case
    if queueing(cw, cw.recent, min_rtt) and not cw.on:
        return
    grow = 1.0 if cw.cwnd < cw.ssthresh else 1.0 / cw.cwnd
    if cw.fair and cw.on and cw.rate > 0 and not math.isnan(cw.recent):
        # contested: at least half the gap to an equal split of the pipe per round trip
        fair = SPLIT * cw.rate * cw.recent
        if fair > cw.cwnd:
            grow = max(grow, (fair - cw.cwnd) / (2.0 * cw.cwnd))
    cw.cwnd = min(cw.limit, cw.cwnd + grow)


@njit(cache=True)
def window_timeout(cw, min_rtt):
    """The fair-share rules' answer to a timer that expired with nothing overtaking its chunk: no cut (a
    late peer does that as well as a loss, and RACK's losses cut), but with a queue deeper than the
    window's own chunks could make, another flow's: contested."""
    if cw.contest < math.inf and queueing(cw, cw.recent, min_rtt) and deep(cw, min_rtt):
        cw.queued = cw.contest
        _contest(cw)


@njit(cache=True)
def window_expired(cw, sent_at, now, min_rtt):
    """A chunk sent at `sent_at` timed out at `now`: a loss to the delay rule (`window_loss`), not to the
    fair-share rules (`window_timeout`)."""
    if cw.fair:
        window_timeout(cw, min_rtt)
    else:
        window_loss(cw, sent_at, now, min_rtt)


@njit(cache=True)
def window_loss(cw, sent_at, now, min_rtt):
    """A chunk sent at `sent_at` was lost at `now`: cut the window unless this congestion event was
    cut for already (the chunk went before the last cut) or no queue shows (the link's loss)."""
    if sent_at <= cw.cut_at or not queueing(cw, cw.recent, min_rtt):
        return
    if cw.fair and cw.contest < math.inf and deep(cw, min_rtt):
        # the queue overflowed while more of it was another flow's than ours could be: contested now
        cw.queued = cw.contest
        _contest(cw)
    # contested, give back what CUBIC (Linux's TCP) does, 30%; else half, as Reno
    keep = 0.7 if cw.on else 0.5
    cw.ssthresh = cw.cwnd = max(cw.minimum, cw.cwnd * keep)
    cw.cut_at = now
    cw.cuts += 1




# -- the pacer ---------------------------------------------------------------------------------
@njit(cache=True)
def pace_release(p):
    """When the pacer lets the next new chunk go: a quantum before what it let out before has left the link
    (a time already past: at once; unpaced, always at once)."""
    return p.until - p.quantum


@njit(cache=True)
def pace_sent(p, now, size):
    """A new chunk of `size` bytes on the wire went at `now`: it has left the link once what went before it
    has and then its own bytes, at the paced rate."""
    if p.per_byte > 0.0:
        p.until = max(p.until, now) + size * p.per_byte


@njit(cache=True)
def crossing(p, frames, size):
    """How long `frames` frames of `size` bytes take to cross the link up and back down at the paced rate
    (0 unpaced): a paced chunk's answer cannot come before the chunks ahead of it did, so its timer waits
    for them too (a queue of our own making is not a loss)."""
    return 2.0 * frames * size * p.per_byte
