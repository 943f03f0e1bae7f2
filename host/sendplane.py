"""The sender's rules, compiled: what `PhaseTransfer` does per RESULT, per chunk sent and per timer.

Layering: this module is the bottom layer, rules over records that take
`now` and frames and nothing else; `window.py` above it owns the arrays,
drives these functions and explains the rules (slots and copies, RACK
loss detection per pipe, the tail probe, the retransmission timeout).
The congestion window and the pacer are a room of their own
(`congestion_rules.py`, compiled, which this module calls where a RESULT,
a loss, a timeout or a new chunk happens; `congestion.py` explains them).
This module imports nothing from `window.py` or `agent.py`; the rules run
here, as the switch's rules run in `switch_emulator/controls.py`.
Per chunk the Python sender spent about 10 us parsing, bookkeeping and
building the frame, as much as the kernel's UDP path; on a host that runs
several workers (Mininet, a training job's ranks) that was the bound.  Here
a batch of RESULTs that one `recvmmsg` brought (`take`) is checked, copied
into place and answered with the frames it lets out, written into a
`sendmmsg` ring: no Python runs per packet.  The sans-I/O methods of
`PhaseTransfer` (one frame in, a list of frames out) call the same
functions, so every window test exercises them.

State lives in numpy structured arrays the Python objects own, records
that the rules read and write by name (`t.next`, `fl[slot].chunk`; the
dtypes below): the transfer's scalars `t` (`TRANSFER`, its integers and
times in one record), its chunk table (`CHUNK`, a row per chunk), a row
per slot (`fl`, `SLOT`: the chunk in flight there and the last one
answered there), a row per pipe for RACK (`rack`, `RACK`) and its counts
(`stats`, `STATS`); the worker's RTT estimate `r` (`RTT`) and congestion
window `cw` (`congestion_rules.WINDOW`, with its pacer inside), one record
each, shared by its transfers, their sample rings as array fields; and its
slot copies (`SlotPool.version`, a
plain array).  window.py hands the record arrays over as their bytes, to
the `*_bytes` entry points at the end (which say why).  Outgoing frames
are written one after another into `tx`, and message m's (address,
length) into `iov[2 m : 2 m + 2]`, the address being `base` plus the
frame's offset (`base` 0 gives offsets).

RACK and the timers look at every slot: each RESULT costs O(W) compares
(W = 64 by default, well under a microsecond; a job with thousands of
slots pays a few microseconds per RESULT).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from hina.wire.compiled import get16, get32, put16, put32, swap_copy
from hina.wire.headers import (
    AT_COUNT,
    AT_FLAGS,
    AT_JOB_ID,
    AT_MSG_TYPE,
    AT_OFFSET,
    AT_OP,
    AT_PHASE,
    AT_POOL_INDEX,
    AT_WORKER_ID,
    FRAME_OVERHEAD,
    HEADER_BYTES,
    VERSION_BIT,
    Flags,
    MsgType,
)
from hina.wire.offload import coalesce

from .congestion_rules import WINDOW, crossing, pace_release, pace_sent, window_expired, window_loss, window_result

# the wire's codes as plain integers, which the kernels compile in as constants
_UPDATE, _RESULT, _STALE_RUN_FLAG = int(MsgType.UPDATE), int(MsgType.RESULT), int(Flags.STALE_RUN)
_RESEND_FLAG, _PENDING_FLAG = int(Flags.RESEND), int(Flags.PENDING)
_VERSION_SHIFT = VERSION_BIT.bit_length() - 1

# The state, as records (numpy structured dtypes; `t.next`, `fl[slot].chunk` compile to a load at a fixed
# offset).  One record each: the transfer, the RTT estimator, the congestion window, the counts; one per
# slot, one per pipe, one per chunk.
TRANSFER = np.dtype([
    # the next chunk to send, the chunks answered, transmissions so far (RACK orders by them), chunks in flight
    ("next", np.int64), ("received", np.int64), ("seq", np.int64), ("in_flight", np.int64),
    # what the frames say: chunks, K, job, worker, phase tag; the job's first slot, W, the switch's pipes
    ("chunks", np.int64), ("words", np.int64), ("job", np.int64), ("worker", np.int64), ("tag", np.int64),
    ("slot_base", np.int64), ("slots", np.int64), ("pipes", np.int64),
    ("stale_slot", np.int64),  # the slot a STALE_RUN answer named
    ("pace_at", np.float64),  # when new chunks the pacer held back may go (inf: none held back)
    # last progress, the earliest timeout, the RACK timer, the deadline, the tail probe
    ("last_progress", np.float64), ("earliest", np.float64), ("rack_at", np.float64), ("deadline", np.float64),
    ("probe_at", np.float64),
    ("oldest", np.float64),  # the least first transmission of a chunk in flight (maybe stale-early: `poll` renews it)
    ("stuck_slot", np.int64),  # the slot whose chunk waited past the deadline
    # a RESULT came since the last timeout; a timeout's probe went, and no chunk sent once was answered since
    ("heard", np.bool_), ("probing", np.bool_),
    # the last tail probe: its transmission's seq (-1: none yet) and when it went; it was answered from a
    # complete copy as soon as the path's least round trip allows, and nothing else was answered since
    ("probe_seq", np.int64), ("probe_sent", np.float64), ("probe_answered", np.bool_),
], align=True)
# fl[slot]: the chunk in flight in that slot, and the last chunk answered there
SLOT = np.dtype([
    # the chunk in flight (-1: none), its copy, its latest transmission's seq, how often it was resent
    ("chunk", np.int64), ("version", np.int64), ("seq", np.int64), ("retries", np.int64),
    # its latest transmission, its own timeout, when that expires, its first transmission
    ("sent", np.float64), ("rto", np.float64), ("due", np.float64), ("first", np.float64),
    # the last chunk answered, its copy, how often it went (-1 once a duplicate answer was taken), its first
    # transmission, when its answer came
    ("done_chunk", np.int64), ("done_version", np.int64), ("done_retries", np.int64),
    ("done_first", np.float64), ("done_at", np.float64),
    # the chunk in flight's timer waits for progress; RACK resent it
    ("suppressed", np.bool_), ("overtaken", np.bool_),
    # the switch holds the chunk in flight and waits for others (a PENDING answer): who it had counted, and how
    # long this worker now waits before it asks again (doubling, never resending faster than answers come)
    ("held", np.bool_), ("counted", np.int64), ("hold", np.float64),
], align=True)
# rack[pipe]: the latest transmission answered of a chunk sent once, its round trip and chunk; same for resent
# chunks; when the pipe's last chunk was answered, and the gap before that answer (the pipe's pace)
RACK = np.dtype([("fresh_seq", np.int64), ("fresh_rtt", np.float64), ("resent_seq", np.int64),
                 ("resent_rtt", np.float64), ("fresh_chunk", np.int64), ("resent_chunk", np.int64),
                 ("done_at", np.float64), ("gap", np.float64)])
# chunks[chunk]: its words' offset in the phase, how many, the op, the offset the wire carries (salted)
CHUNK = np.dtype([("offset", np.int64), ("count", np.int64), ("op", np.int64), ("wire_offset", np.int64)])
R_SAMPLES = 4  # the last round trips whose least a standing queue raises (`recent`)
RTO_SRTT = 0.5  # the fair-share sender's timeout waits at least this much of srtt past srtt (`rto_srtt`)
# r: the RTT estimator (RttEstimator): its parameters, the allowance's scale and the recoveries since it
# last changed, and a ring of the last R_SAMPLES round trips
RTT = np.dtype([
    ("rto", np.float64), ("srtt", np.float64), ("rttvar", np.float64), ("min_rtt", np.float64),
    ("reorder_scale", np.float64), ("recoveries", np.int64), ("minimum", np.float64), ("maximum", np.float64),
    ("backoff_limit", np.float64), ("decay", np.int64), ("probe_floor", np.float64),
    ("next", np.int64), ("recent", np.float64, (R_SAMPLES,)),
    ("rto_srtt", np.float64),  # the timeout's least margin past srtt, a share of srtt (0: RFC 6298's alone)
    ("tick", np.float64),  # the host's timer granularity (0 on a virtual clock): no timer is set shorter
])
# stats: what a transfer counts (`PhaseTransfer.stats`)
STATS = np.dtype([(name, np.int64) for name in ("frames", "bytes", "retransmissions", "fast_retransmissions",
                                                 "timeouts", "spurious_resends", "ignored", "probes",
                                                 "pending", "asked")])

# what a call reports besides its frames; `step` adds FULL (the ring filled: send it, then call again from the
# entry it returned) and DONE (every chunk answered)
OK, STALE_RUN, DEADLINE, FULL, DONE = 0, 1, 2, 3, 4
NO_SLOT = -1
HOLD_ASKS = 8  # a held chunk asks the switch again at least this many times before its deadline


@njit(cache=True)
def burst(slots):
    """The most frames one RESULT or one `poll` may let out: every chunk in flight resent and a
    window of new ones (2 W, and one to spare); a ring keeps this much free before each."""
    return 2 * slots + 1


# -- the RTT estimator (RFC 6298, with the backoff cap and reordering allowance window.py describes) --
@njit(cache=True)
def recent_least(r):
    """The least of the last R_SAMPLES round trips (inf before any): a queue that stands raises it, a
    chunk held up by a late peer does not (the chunks around it came back sooner)."""
    least = math.inf
    for i in range(R_SAMPLES):
        least = min(least, r.recent[i])
    return least


@njit(cache=True)
def _now_rtt(r):
    """The least of the recent round trips, or 0 before any."""
    recent = recent_least(r)
    return 0.0 if math.isinf(recent) else recent


@njit(cache=True)
def recent_median(r):
    """The median of the last R_SAMPLES round trips (of those taken; inf before any): a queue that stands
    raises it, and so does one that fills and drains (a slow switch's), whose round trips are long but for a
    short one now and then, when it ran empty; a chunk held up by a late peer, one long round trip among
    short ones, does not.  Ranks by counting (R_SAMPLES is a handful): nothing allocated per RESULT."""
    taken = 0
    for i in range(R_SAMPLES):
        taken += not math.isinf(r.recent[i])
    if taken == 0:
        return math.inf
    total = 0.0
    for i in range(R_SAMPLES):
        v = r.recent[i]
        if math.isinf(v):
            continue
        rank = 0  # of the samples taken, how many come before this one (ties in ring order)
        for j in range(R_SAMPLES):
            if r.recent[j] < v or (r.recent[j] == v and j < i):
                rank += 1
        if rank == (taken - 1) // 2 or rank == taken // 2:
            total += v if taken % 2 else v / 2
    return total


@njit(cache=True)
def backoff_cap(r):
    recent = recent_median(r)
    return min(r.maximum, max(r.backoff_limit, r.minimum, r.tick, 8.0 * r.min_rtt,
                              0.0 if math.isinf(recent) else 2.0 * recent))


@njit(cache=True)
def rtt_sample(r, rtt):
    if math.isnan(r.srtt):
        r.srtt, r.rttvar = rtt, rtt / 2
    else:
        r.rttvar = 0.75 * r.rttvar + 0.25 * abs(r.srtt - rtt)
        r.srtt = 0.875 * r.srtt + 0.125 * rtt
    r.min_rtt = min(r.min_rtt, rtt)
    r.recent[r.next] = rtt
    r.next = (r.next + 1) % R_SAMPLES
    r.rto = min(backoff_cap(r), max(r.minimum, r.tick, r.srtt + max(4 * r.rttvar, r.rto_srtt * r.srtt)))


@njit(cache=True)
def rtt_backoff(r):
    r.rto = min(backoff_cap(r), 2 * r.rto)


@njit(cache=True)
def probe_after(r):
    """How long a silent path (no answer, nothing sent) waits before one chunk goes again as a probe:
    two smoothed round trips, at least the floor (RACK's tail loss probe, RFC 8985 7.2); never without
    a round trip measured."""
    return math.inf if math.isnan(r.srtt) else max(2 * r.srtt, r.probe_floor, r.tick)


@njit(cache=True)
def reordering(r):
    srtt = 0.0 if math.isnan(r.srtt) else r.srtt
    return max(r.tick, r.reorder_scale * srtt / 4)


@njit(cache=True)
def rtt_reordered(r):
    r.reorder_scale = min(8.0, 2 * r.reorder_scale)
    r.recoveries = 0


@njit(cache=True)
def rtt_recovered(r):
    r.recoveries += 1
    if r.recoveries >= r.decay:
        r.recoveries = 0
        r.reorder_scale = max(1.0, r.reorder_scale / 2)


# -- frames: UPDATEs written, RESULTs read (the loads and stores are hina.wire.compiled's) ----------------
@njit(cache=True)
def _frame(t, chunks, wire, slot, chunk, version, tx, iov, m, base, stats):
    """UPDATE for `chunk` in `slot`, copy `version`, as message m, at byte m (16 + 4 K) of `tx`."""
    words = t.words
    size = HEADER_BYTES + 4 * words
    at = m * size  # every frame of a worker's job is K words long
    if at + size > tx.size or 2 * m + 1 >= iov.size:
        return m  # never past the ring (callers leave room; were one not to, the chunk counts as lost)
    c = chunks[chunk]
    tx[at + AT_MSG_TYPE] = _UPDATE
    tx[at + AT_OP] = c.op
    put16(tx, at + AT_JOB_ID, t.job)
    tx[at + AT_WORKER_ID] = t.worker
    tx[at + AT_FLAGS] = 0
    put16(tx, at + AT_POOL_INDEX, (version << _VERSION_SHIFT) | (t.slot_base + slot))
    put32(tx, at + AT_OFFSET, c.wire_offset)
    put16(tx, at + AT_COUNT, c.count)
    put16(tx, at + AT_PHASE, t.tag)
    # the chunk's words (the codec's, native: `wire` is their bytes), big-endian, then zeros to K words
    swap_copy(tx, at + HEADER_BYTES, wire, 4 * c.offset, 4 * c.count)
    tx[at + HEADER_BYTES + 4 * c.count : at + size] = 0
    iov[2 * m] = base + at
    iov[2 * m + 1] = size
    stats.frames += 1
    stats.bytes += size
    return m + 1


@njit(cache=True)
def _send_new(t, fl, slot, chunk, version, now, rto):
    s = fl[slot]
    s.chunk = chunk
    s.version = version
    s.seq = t.seq
    s.retries = 0
    s.suppressed = False
    s.overtaken = False
    s.held = False
    s.counted = 0
    s.sent = s.first = now
    s.rto = rto
    s.due = now + rto
    t.seq += 1
    t.in_flight += 1
    t.earliest = min(t.earliest, now + rto)
    t.oldest = min(t.oldest, now)


@njit(cache=True)
def _resend(t, chunks, wire, fl, slot, now, tx, iov, m, base, stats):
    s = fl[slot]
    s.retries += 1
    s.sent = now
    s.due = now + s.rto
    s.seq = t.seq
    t.seq += 1
    s.suppressed = False
    t.earliest = min(t.earliest, s.due)
    stats.retransmissions += 1
    return _frame(t, chunks, wire, slot, s.chunk, s.version, tx, iov, m, base, stats)


@njit(cache=True)
def _ask(t, chunks, wire, fl, slot, now, tx, iov, m, base, stats):
    """A held chunk asks the switch again (its UPDATE once more, answered from the copy) and waits for its
    hold before the next ask."""
    stats.asked += 1
    m = _resend(t, chunks, wire, fl, slot, now, tx, iov, m, base, stats)
    fl[slot].due = now + fl[slot].hold
    return m


@njit(cache=True)
def fill(t, r, cw, version, chunks, wire, fl, now, tx, iov, m, base, stats):
    """Send the next chunks while the window has room, their slots are free (in order: chunk c waits
    for chunk c - W, as every worker's does) and the pacer lets them go (resends are not paced)."""
    room = np.int64(cw.cwnd) - t.in_flight
    slots = t.slots
    first = t.next
    t.pace_at = math.inf
    wire_bytes = FRAME_OVERHEAD + HEADER_BYTES + 4 * t.words
    while room > 0 and t.next < t.chunks:
        chunk = t.next
        slot = chunk % slots
        if fl[slot].chunk >= 0:
            break
        held = pace_release(cw.pacer)
        if held > now:  # the pacer holds new chunks back until then (`poll` lets them out)
            t.pace_at = held
            break
        pace_sent(cw.pacer, now, wire_bytes)
        _send_new(t, fl, slot, chunk, version[slot], now, r.rto + crossing(cw.pacer, t.in_flight, wire_bytes))
        m = _frame(t, chunks, wire, slot, chunk, version[slot], tx, iov, m, base, stats)
        t.next += 1
        room -= 1
    if t.next > first:
        t.probe_at = now + probe_after(r)
    return m


@njit(cache=True)
def _by_seq(fl, picked, n):
    """The first n slots of `picked`, oldest transmission first.  An insertion sort: n is the slots lost
    or due at one moment, a handful (numpy's argsort would add a second to the kernels' compile)."""
    out = picked[:n].copy()
    for i in range(1, n):
        slot = out[i]
        seq = fl[slot].seq
        k = i - 1
        while k >= 0 and fl[out[k]].seq > seq:
            out[k + 1] = out[k]
            k -= 1
        out[k + 1] = slot
    return out


@njit(cache=True)
def _oldest(fl, picked, n):
    """Of the first n slots of `picked`, the one holding the oldest chunk: what a probe resends."""
    probe = picked[0]
    for i in range(1, n):
        if fl[picked[i]].chunk < fl[probe].chunk:
            probe = picked[i]
    return probe


@njit(cache=True)
def overtaken(t, r, cw, rack, chunks, wire, fl, now, tx, iov, m, base, stats):
    """RACK: resend the chunks a later-sent, answered chunk of their pipe overtook by more than the
    allowance (or, among resent chunks, a later resend answered a round trip or more after it went).
    A held chunk so overtaken asks the switch again, with no window cut: every peer sent it before the
    later one, and a peer whose UPDATE was lost was told by the first PENDING, so the RESULT to this
    worker is the likelier loss (waiting out the hold instead, one lost RESULT on a lossy path held
    this worker's window, and then its peers', for milliseconds).  Its seq is the ask's: only a chunk
    sent after the ask asks again."""
    t.rack_at = math.inf
    allowance = reordering(r)
    slots, pipes = t.slots, t.pipes
    lost = np.empty(slots, np.int64)
    n = np.int64(0)  # not a literal 0: `_by_seq` would be compiled once more for Literal[int](0)
    for slot in range(slots):
        s = fl[slot]
        if s.chunk < 0:
            continue
        pipe = rack[(t.slot_base + slot) % pipes]
        # overtaken: a chunk of its pipe sent after it was answered, and came after it in the order the
        # switch completes them (a chunk before it in that order may still wait for a late peer)
        # (the fair-share rules' test; the delay rule's takes any chunk sent after it)
        if s.seq < pipe.fresh_seq and (s.chunk < pipe.fresh_chunk or not cw.fair):
            due = s.sent + pipe.fresh_rtt + allowance
        elif s.retries > 0 and s.seq < pipe.resent_seq and (s.chunk < pipe.resent_chunk or not cw.fair):
            due = s.sent + pipe.resent_rtt + allowance
        else:
            continue
        if now < due:
            t.rack_at = min(t.rack_at, due)
        else:
            lost[n] = slot
            n += 1
    if n == 0:
        return m
    for slot in _by_seq(fl, lost, n):
        if fl[slot].held:  # asks, and waits for its hold again
            m = _ask(t, chunks, wire, fl, slot, now, tx, iov, m, base, stats)
            continue
        window_loss(cw, fl[slot].sent, now, r.min_rtt)
        fl[slot].overtaken = True
        rtt_recovered(r)
        stats.fast_retransmissions += 1
        m = _resend(t, chunks, wire, fl, slot, now, tx, iov, m, base, stats)
    t.probe_at = now + probe_after(r)
    return m


@njit(cache=True)
def _duplicate(t, r, chunks, fl, frame, at, slot, pool_index, offset, stats):
    """A second answer to the chunk last answered in `slot`, which went exactly twice: both
    transmissions reached the switch, so the resend was spurious and the first answer answered the
    first transmission, whose round trip is then a sample (the switch answers a resend of a
    complete copy from that copy: DSACK's evidence, RFC 3708).  A queue that outgrew the timeout
    (another flow's) makes every chunk time out, and Karn's rule would keep srtt, and so the timeout,
    from ever learning the longer round trip; the answers that come too soon after a resend to be
    its own (`receive`) tell only of a queue shorter than the timeout."""
    if (frame[at + AT_MSG_TYPE] != _RESULT or slot < 0 or slot >= t.slots
            or get16(frame, at + AT_JOB_ID) != t.job or get16(frame, at + AT_PHASE) != t.tag):
        return
    s = fl[slot]
    done = s.done_chunk
    if (done < 0 or s.done_retries != 1 or s.done_version != pool_index >> _VERSION_SHIFT
            or offset != chunks[done].wire_offset):
        return
    s.done_retries = -1  # one sample per chunk
    stats.spurious_resends += 1
    rtt_sample(r, s.done_at - s.done_first)


@njit(cache=True)
def _moved_on(t, r, chunks, wire, fl, frame, at, slot, pool_index, offset, now, tx, iov, m, base, stats):
    """An answer in `slot`'s other copy for the slot's next chunk (a peer's PENDING, multicast the first time):
    the peers had this worker's chunk answered, since they sent the next one, so the RESULT to this worker was
    lost.  Asked again now (the switch answers from the complete copy), not after a timer, or a hold that
    may have grown long while a late peer held the copy; at most once a round trip."""
    s = fl[slot]
    nxt = s.chunk + t.slots
    if (frame[at + AT_MSG_TYPE] != _RESULT or get16(frame, at + AT_JOB_ID) != t.job
            or get16(frame, at + AT_PHASE) != t.tag or s.version == pool_index >> _VERSION_SHIFT
            or nxt >= t.chunks or offset != chunks[nxt].wire_offset or now - s.sent < _srtt(r)):
        return m
    if s.held:
        return _ask(t, chunks, wire, fl, slot, now, tx, iov, m, base, stats)
    stats.asked += 1
    return _resend(t, chunks, wire, fl, slot, now, tx, iov, m, base, stats)


@njit(cache=True)
def _pending(t, r, rack, chunks, wire, fl, slot, counted, now, tx, iov, m, base, stats):
    """The switch answered a repeated UPDATE of the chunk in `slot` with PENDING: its copy holds the members
    in `counted` and waits for the rest.  Counted, this worker stops resending the chunk: it is held, and
    asks again only after `hold`, which doubles each time (a peer that is late for seconds costs a few
    frames, not one per timeout; while other chunks are answered, to no more than a backed-off timeout).
    Not counted, its UPDATE was lost (the repeat that drew the answer was a peer's): sent again at once,
    unless it went too recently to have reached the switch yet (less than the least recent round trip ago:
    srtt may hold a late peer's waits, and a worker that took this answer for its own UPDATE still on its
    way was never told again)."""
    stats.pending += 1
    t.probe_answered = False
    s = fl[slot]
    s.counted = counted
    if counted >> t.worker & 1:
        if not s.held:
            s.held = True
            s.suppressed = False
            s.hold = min(_first_hold(r, s), t.deadline / HOLD_ASKS)
            s.due = now + s.hold  # the hold replaces the timer; an answer to an ask leaves the next ask's time
            if _pipe_head(t, fl, slot) == slot:
                _ask_soon(t, r, s, rack[(t.slot_base + slot) % t.pipes], now)
        return m
    if s.held or now - s.sent < _now_rtt(r):
        return m
    stats.asked += 1
    return _resend(t, chunks, wire, fl, slot, now, tx, iov, m, base, stats)


@njit(cache=True)
def _first_hold(r, s):
    """How long a chunk the switch holds first waits before it asks again: two round trips, at least its
    timeout and the host's tick."""
    return max(2.0 * _srtt(r), s.rto, r.tick)


@njit(cache=True)
def _srtt(r):
    """srtt, or 0 before any round trip."""
    return 0.0 if math.isnan(r.srtt) else r.srtt


@njit(cache=True)
def receive(t, r, cw, rack, version, chunks, wire, answers, fl, frame, at, length, now, tx, iov, m, base, stats):
    """Take in one frame (`frame[at : at + length]`); return the message count after the frames it
    lets out, and OK or STALE_RUN (then `t.stale_slot` names the slot, and nothing changed)."""
    if length < HEADER_BYTES:
        stats.ignored += 1
        return m, OK
    pool_index = get16(frame, at + AT_POOL_INDEX)
    slot = (pool_index & (VERSION_BIT - 1)) - t.slot_base
    if (frame[at + AT_MSG_TYPE] == _RESULT and frame[at + AT_FLAGS] & _STALE_RUN_FLAG
            and get16(frame, at + AT_JOB_ID) == t.job and get16(frame, at + AT_PHASE) == t.tag
            and 0 <= slot < t.slots):
        # the switch refused a chunk of this phase, ours or another worker's (it tells every member):
        # the run cannot finish, so stop now rather than wait for chunks that never complete
        t.stale_slot = slot
        return m, STALE_RUN
    offset = get32(frame, at + AT_OFFSET)
    if slot < 0 or slot >= t.slots or fl[slot].chunk < 0:
        _duplicate(t, r, chunks, fl, frame, at, slot, pool_index, offset, stats)
        stats.ignored += 1
        return m, OK
    s = fl[slot]
    chunk = s.chunk
    c = chunks[chunk]
    count = get16(frame, at + AT_COUNT)
    if (frame[at + AT_MSG_TYPE] != _RESULT or get16(frame, at + AT_JOB_ID) != t.job
            or get16(frame, at + AT_PHASE) != t.tag or s.version != pool_index >> _VERSION_SHIFT
            or offset != c.wire_offset or count != c.count or length < HEADER_BYTES + 4 * count):
        _duplicate(t, r, chunks, fl, frame, at, slot, pool_index, offset, stats)
        stats.ignored += 1
        return _moved_on(t, r, chunks, wire, fl, frame, at, slot, pool_index, offset, now, tx, iov, m, base,
                         stats), OK
    if frame[at + AT_FLAGS] & _STALE_RUN_FLAG:
        t.stale_slot = slot
        return m, STALE_RUN
    if frame[at + AT_FLAGS] & _PENDING_FLAG:
        return _pending(t, r, rack, chunks, wire, fl, slot, get32(frame, at + HEADER_BYTES), now, tx, iov, m, base,
                        stats), OK
    swap_copy(answers, 4 * c.offset, frame, at + HEADER_BYTES, 4 * count)
    rtt = now - s.sent
    min_rtt = r.min_rtt
    # the probe answered from a complete copy (its RESULT had been lost), as soon as the path's least round trip
    # allows: nothing queued and nothing waiting for a peer held it
    t.probe_answered = (s.seq == t.probe_seq and rtt < 2.0 * min_rtt
                        and frame[at + AT_FLAGS] & _RESEND_FLAG != 0)
    fresh = s.retries == 0
    # answered sooner after its resend than any round trip seen: it answers an earlier transmission.  Not so
    # an answer flagged RESEND: a switch answered a repeated UPDATE from the copy it holds (a leaf answers
    # from the total it stored, sooner than the whole tree's round trip), so it answers the resend
    late = not fresh and rtt < min_rtt / 2 < math.inf and not frame[at + AT_FLAGS] & _RESEND_FLAG
    if late and s.overtaken:
        # this answers the first transmission, which was late, not lost
        rtt_reordered(r)
    if late:
        stats.spurious_resends += 1
    pipe = rack[(t.slot_base + slot) % t.pipes]
    seq = s.seq
    if s.held:
        # the switch had said it held this chunk for its peers (PENDING, this worker counted): answered when
        # the last peer's UPDATE came, its round trip is that peer's lateness, not the path's, and no sample
        # (taken, a window of them held behind one late peer pulled srtt and the timeout up to seconds)
        fresh = False
    elif fresh:  # Karn: a resent chunk's answer may answer either transmission
        rtt_sample(r, rtt)
        t.probing = False  # chunks sent once are answered again: the flow is back
        if seq > pipe.fresh_seq:
            pipe.fresh_seq, pipe.fresh_rtt, pipe.fresh_chunk = seq, rtt, chunk
    elif late and s.retries == 1:
        # Karn's ambiguity does not hold here: sent twice, and answered too soon after the second, so
        # the first is answered, and its round trip is a sample.  A queue that grew past the timeout
        # (another flow's) makes every chunk time out: without these samples srtt, and so the
        # timeout, would never learn the longer round trip, and every chunk would go twice.
        rtt = now - s.first
        rtt_sample(r, rtt)
        fresh = True
    elif rtt >= (max(min_rtt, _now_rtt(r)) if cw.fair else min_rtt):
        # a resent chunk's answer, too late to answer its first transmission (the fair-share rules ask
        # for a round trip as the recent ones are: a standing queue, or the wait for a late peer,
        # lengthens them all, and an answer sooner than that may still be the first transmission's)
        if seq > pipe.resent_seq:
            pipe.resent_seq, pipe.resent_rtt, pipe.resent_chunk = seq, rtt, chunk
    window_result(cw, rtt if fresh else math.nan, r.min_rtt, now)
    t.received += 1
    t.last_progress = now
    t.probe_at = now + probe_after(r)
    if not t.heard:
        t.heard = True
        for other in range(t.slots):
            o = fl[other]
            if o.chunk >= 0 and o.suppressed:  # progress again: a full timeout first
                o.suppressed = False
                o.rto = r.rto
                o.due = now + r.rto
                t.earliest = min(t.earliest, o.due)
    s.held = False
    s.done_chunk, s.done_version = chunk, s.version
    s.done_retries = -1 if late else s.retries  # late: its sample is taken
    s.done_first, s.done_at = s.first, now
    version[slot] ^= 1
    s.chunk = -1
    t.in_flight -= 1
    _progress(t, r, fl, pipe, slot, chunk, now)
    m = overtaken(t, r, cw, rack, chunks, wire, fl, now, tx, iov, m, base, stats)
    return fill(t, r, cw, version, chunks, wire, fl, now, tx, iov, m, base, stats), OK


@njit(cache=True)
def _progress(t, r, fl, pipe, slot, chunk, now):
    """The switch completed `chunk` (in `slot`) now: the chunks after it in its pipe could not have been
    completed before it (every worker sends in the same order, and a pipe completes them in that order), so
    their timers count from now, not from when this worker sent them.  A window sent ahead of its peers
    (paced, or simply earlier) waits on them, not on a loss; RACK, not the timer, finds a chunk that a later
    one overtook.

    The next chunk of the pipe, if the switch holds it (PENDING), asks again soon: its last peer sent it
    right after this one, so it completes a pipe's pace after it (the gap between this answer and the one
    before), and a RESULT that does not come within twice that, and a recent round trip, was lost.  Without
    this, a lost RESULT of a held chunk (a phase's last, with nothing after it to overtake it) waited out a
    hold that had doubled while the late peer was on its way.  Too soon costs one ask and a PENDING answer."""
    pipes = t.pipes
    at = (t.slot_base + slot) % pipes
    pipe.gap, pipe.done_at = now - pipe.done_at, now
    head = NO_SLOT  # the pipe's least chunk in flight (`_pipe_head`), found in the same pass
    for other in range(t.slots):
        o = fl[other]
        if o.chunk < 0 or (t.slot_base + other) % pipes != at:
            continue
        if o.chunk > chunk and o.due < now + o.rto:
            o.due = now + o.rto
        if head == NO_SLOT or o.chunk < fl[head].chunk:
            head = other
    if head != NO_SLOT and fl[head].held and fl[head].chunk > chunk:  # one before it still waits: RACK's to find
        _ask_soon(t, r, fl[head], pipe, now)


@njit(cache=True)
def _pipe_head(t, fl, slot):
    """The slot of the least chunk in flight in `slot`'s pipe (NO_SLOT: none): the next one it completes."""
    pipes = t.pipes
    at = (t.slot_base + slot) % pipes
    head = NO_SLOT
    for other in range(t.slots):
        o = fl[other]
        if o.chunk >= 0 and (t.slot_base + other) % pipes == at and (head == NO_SLOT or o.chunk < fl[head].chunk):
            head = other
    return head


@njit(cache=True)
def _ask_soon(t, r, s, pipe, now):
    """A held chunk next in its pipe, while the pipe completes chunks at its pace (its last answer came no
    more than the pace ago), asks again once it is that late: a pace after the last answer, twice the gap
    before it and at least the median recent round trip, which a switch's queue raises (asked sooner, into a
    slow switch's queue, the chunk is not complete yet, and each answered PENDING is one more frame that
    queue must serve), and at least that round trip after now (`_progress`)."""
    median = recent_median(r)
    trip = max(r.min_rtt if math.isinf(median) else median, r.tick)
    pace = max(2.0 * pipe.gap, trip)
    if math.isinf(pace) or now - pipe.done_at > pace:
        return
    s.due = min(s.due, max(pipe.done_at + pace, now + trip))
    t.earliest = min(t.earliest, s.due)


@njit(cache=True)
def take(t, r, cw, rack, version, chunks, wire, answers, fl, rx, entry_bytes, lengths, start, n, now, tx, iov, m,
         base, capacity, stats):
    """`receive` for entries start..n-1 of a `recvmmsg` batch, while the ring keeps room for what one
    more frame may let out (`burst`); return the next
    entry to take, the message count and OK, or STALE_RUN at the entry that was refused."""
    room = burst(t.slots)
    i = start
    while i < n and m + room <= capacity:
        m, status = receive(t, r, cw, rack, version, chunks, wire, answers, fl, rx, i * entry_bytes,
                            np.int64(lengths[i]), now, tx, iov, m, base, stats)
        if status != OK:
            return i, m, status
        i += 1
    return i, m, OK


@njit(cache=True)
def poll(t, r, cw, rack, version, chunks, wire, fl, now, tx, iov, m, base, stats):
    """Retransmissions that are due, and new chunks the pacer held back; DEADLINE when a chunk has waited
    for its answer for the deadline since it first went (`t.stuck_slot` names its slot).  Progress is
    judged per chunk, not per transfer: a slot that never completes fails the transfer even while the
    others keep answering."""
    if t.received == t.chunks:
        return m, OK
    if now >= t.pace_at:
        m = fill(t, r, cw, version, chunks, wire, fl, now, tx, iov, m, base, stats)
    if now >= t.oldest + t.deadline:
        t.oldest, t.stuck_slot = math.inf, NO_SLOT
        for slot in range(t.slots):
            s = fl[slot]
            if s.chunk >= 0 and s.first < t.oldest:
                t.oldest, t.stuck_slot = s.first, slot
        if now >= t.oldest + t.deadline:
            return m, DEADLINE
    if now >= t.rack_at:
        m = overtaken(t, r, cw, rack, chunks, wire, fl, now, tx, iov, m, base, stats)
    if now >= t.probe_at:
        # Nothing answered and nothing sent for two round trips: the last answers or a resend may be
        # lost with nothing sent after them that could say so (a phase's tail; or a chunk whose slot
        # the next chunk waits for, so the window drained behind it).  One chunk, the oldest, goes
        # again without waiting for the timeout; if it is answered, RACK and the window resume.  Once
        # per silence (a timeout's probes own the stall once one fired), without backoff or a window
        # cut: on a late peer it costs one frame.
        t.probe_at = math.inf
        if t.in_flight > 0 and not t.probing:
            in_flight = np.empty(t.slots, np.int64)
            n = np.int64(0)
            for slot in range(t.slots):
                if fl[slot].chunk >= 0 and not fl[slot].held:  # a held chunk waits on its peers, not on us
                    in_flight[n] = slot
                    n += 1
            if n:
                stats.probes += 1
                if t.probe_answered:
                    # The last probe was answered at once and nothing else since: the path is clear, and what
                    # went before that probe waited two round trips more without an answer.  Their RESULTs
                    # were lost (a tail's, or all of them where a switch lost its state and drops them as
                    # stale), so all of them go again: one probe a silence would complete one chunk a
                    # silence.  A chunk waiting for a late peer is held (PENDING) and stays out of this.
                    for i in range(n):
                        if fl[in_flight[i]].sent < t.probe_sent:
                            m = _resend(t, chunks, wire, fl, in_flight[i], now, tx, iov, m, base, stats)
                else:
                    probe = _oldest(fl, in_flight, n)
                    m = _resend(t, chunks, wire, fl, probe, now, tx, iov, m, base, stats)
                    t.probe_seq = fl[probe].seq
                t.probe_sent = now
                t.probe_answered = False
    if now >= t.earliest:
        slots = t.slots
        due = np.empty(slots, np.int64)
        n = np.int64(0)
        for slot in range(slots):
            s = fl[slot]
            if s.chunk < 0 or now < s.due:
                continue
            if s.held:
                # held past its wait: ask the switch again (its answer says whether the copy still waits, or
                # completed and the RESULT to us was lost), and wait twice as long before the next time.  While
                # nothing else progresses (a peer late for seconds stalls every chunk) up to the estimator's
                # maximum; while other chunks are answered, no longer than a backed-off timeout: a peer's lost
                # UPDATE is the peer's to find then (its later chunks overtake it), so a chunk still held is
                # likelier to have lost its RESULT (doubled to seconds, one lost RESULT on a lossy path cost
                # seconds, and other workers' holds lengthened them in turn); never past an eighth of the deadline
                longest = max(backoff_cap(r), _first_hold(r, s)) if t.last_progress > s.sent else r.maximum
                s.hold = min(2.0 * s.hold, longest, t.deadline / HOLD_ASKS)
                m = _ask(t, chunks, wire, fl, slot, now, tx, iov, m, base, stats)
                continue
            due[n] = slot
            n += 1
        cap = backoff_cap(r)
        if n and t.probing and t.heard:
            # The last probe was answered, and these waited a full timeout after that progress
            # without being overtaken: the tail of the phase was lost.  All of it goes again.
            for slot in _by_seq(fl, due, n):
                window_expired(cw, fl[slot].sent, now, r.min_rtt)
                fl[slot].rto = min(2 * fl[slot].rto, cap)
                m = _resend(t, chunks, wire, fl, slot, now, tx, iov, m, base, stats)
            stats.timeouts += 1
            t.heard = False
        elif n:
            # Nothing overtook these: a tail, a late peer or a stalled path.  Resend the oldest
            # chunk only and back off; the rest wait, backing off alike, until a RESULT shows progress.
            probe = _oldest(fl, due, n)
            for i in range(n):
                slot = due[i]
                if slot != probe:
                    s = fl[slot]
                    s.rto = min(2 * s.rto, cap)
                    s.due = now + s.rto
                    s.suppressed = True
            window_expired(cw, fl[probe].sent, now, r.min_rtt)
            rtt_backoff(r)
            stats.timeouts += 1
            fl[probe].rto = min(2 * fl[probe].rto, cap)
            m = _resend(t, chunks, wire, fl, probe, now, tx, iov, m, base, stats)
            t.heard = False
            t.probing = True
        earliest = math.inf
        for slot in range(slots):
            if fl[slot].chunk >= 0:
                earliest = min(earliest, fl[slot].due)
        t.earliest = earliest
    return m, OK


@njit(cache=True)
def step(t, r, cw, rack, version, chunks, wire, answers, fl, rx, entry_bytes, lengths, start, n, now, tx, iov, m,
         base, capacity, segment, limit, stats):
    """A received batch's whole work, in one call from Python: entries start..n-1 taken (`take`: each RESULT
    checked, matched to its chunk, its words copied into the answers, the rules run), then the timers (`poll`),
    every frame they let out written into the ring; with `segment` > 0 the ring's messages then merged into
    runs of up to `limit` frames for UDP segmentation offload (`offload.coalesce`).  Returns (next entry,
    messages, status, the next timer): FULL when the ring has no room for what the next entry or `poll` may
    let out (send the messages and call again from the entry returned, with m = 0); DONE once every chunk is
    answered; else what `take` or `poll` said (OK, STALE_RUN, DEADLINE)."""
    i, m, status = take(t, r, cw, rack, version, chunks, wire, answers, fl, rx, entry_bytes, lengths, start, n,
                        now, tx, iov, m, base, capacity, stats)
    if status == OK:
        if t.received == t.chunks:
            status = DONE
        elif i < n or m + burst(t.slots) > capacity:
            status = FULL
        else:
            m, status = poll(t, r, cw, rack, version, chunks, wire, fl, now, tx, iov, m, base, stats)
    if segment > 0 and m > 1:
        m = coalesce(iov, m, segment, limit)
    return i, m, status, next_timer(t)


@njit(cache=True)
def next_timer(t):
    """When `poll` has something to do next: a timeout, RACK's timer, the tail probe, chunks the pacer
    held back or the deadline of the oldest chunk in flight."""
    return min(t.earliest, t.rack_at, t.probe_at, t.pace_at, t.oldest + t.deadline)


# -- what window.py calls: its record arrays as bytes ---------------------------------------------------
# A structured array passed from Python costs numba's dispatcher 0.1-0.15 us a call to type (a lookup keyed
# by its dtype), a plain array next to nothing: over the seven a RESULT takes, more than its rules cost.  So
# window.py hands each over as its bytes (a uint8 view of the same memory), and these name them again
# (`view`, about 30 ns each); below them everything is records.
@njit(cache=True)
def fill_bytes(t, r, cw, version, chunks, wire, fl, now, tx, iov, m, base, stats):
    """`fill`, from window.py."""
    return fill(t.view(TRANSFER)[0], r.view(RTT)[0], cw.view(WINDOW)[0], version, chunks.view(CHUNK), wire,
                fl.view(SLOT), now, tx, iov, m, base, stats.view(STATS)[0])


@njit(cache=True)
def receive_bytes(t, r, cw, rack, version, chunks, wire, answers, fl, frame, at, length, now, tx, iov, m, base,
                  stats):
    """`receive`, from window.py."""
    return receive(t.view(TRANSFER)[0], r.view(RTT)[0], cw.view(WINDOW)[0], rack.view(RACK), version,
                   chunks.view(CHUNK), wire, answers, fl.view(SLOT), frame, at, length, now, tx, iov, m, base,
                   stats.view(STATS)[0])


@njit(cache=True)
def take_bytes(t, r, cw, rack, version, chunks, wire, answers, fl, rx, entry_bytes, lengths, start, n, now, tx,
               iov, m, base, capacity, stats):
    """`take`, from window.py."""
    return take(t.view(TRANSFER)[0], r.view(RTT)[0], cw.view(WINDOW)[0], rack.view(RACK), version,
                chunks.view(CHUNK), wire, answers, fl.view(SLOT), rx, entry_bytes, lengths, start, n, now, tx, iov,
                m, base, capacity, stats.view(STATS)[0])


@njit(cache=True)
def step_bytes(t, r, cw, rack, version, chunks, wire, answers, fl, rx, entry_bytes, lengths, start, n, now, tx, iov,
               m, base, capacity, segment, limit, stats):
    """`step`, from window.py."""
    return step(t.view(TRANSFER)[0], r.view(RTT)[0], cw.view(WINDOW)[0], rack.view(RACK), version,
                chunks.view(CHUNK), wire, answers, fl.view(SLOT), rx, entry_bytes, lengths, start, n, now, tx, iov,
                m, base, capacity, segment, limit, stats.view(STATS)[0])


@njit(cache=True)
def poll_bytes(t, r, cw, rack, version, chunks, wire, fl, now, tx, iov, m, base, stats):
    """`poll`, from window.py."""
    return poll(t.view(TRANSFER)[0], r.view(RTT)[0], cw.view(WINDOW)[0], rack.view(RACK), version,
                chunks.view(CHUNK), wire, fl.view(SLOT), now, tx, iov, m, base, stats.view(STATS)[0])


@njit(cache=True)
def next_timer_bytes(t):
    """`next_timer`, from window.py."""
    return next_timer(t.view(TRANSFER)[0])

