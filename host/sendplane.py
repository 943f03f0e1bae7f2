"""The sender's rules, compiled: what `PhaseTransfer` does per RESULT, per chunk sent and per timer.

Layering: this module is the bottom layer, rules over arrays that take
`now` and frames and nothing else; `window.py` above it owns the arrays,
drives these functions and explains the rules (slots and copies, the
congestion window, RACK loss detection per pipe, the retransmission
timeout).  This module imports nothing from `window.py` or `agent.py`;
the rules run here, as the switch's rules run in `switch_emulator/dataplane.py`.
Per chunk the Python sender spent about 10 us parsing, bookkeeping and
building the frame, as much as the kernel's UDP path; on a host that runs
several workers (Mininet, a training job's ranks) that was the bound.  Here
a batch of RESULTs that one `recvmmsg` brought (`take`) is checked, copied
into place and answered with the frames it lets out, written into a
`sendmmsg` ring: no Python runs per packet.  The sans-I/O methods of
`PhaseTransfer` (one frame in, a list of frames out) call the same
functions, so every window test exercises them.

State lives in numpy arrays the Python objects own (column names below):
the transfer's scalars `t` (int64) and `f` (float64), its chunk table, and
per slot the chunk in flight (`fl_i`, `fl_f`); the worker's RTT estimate
`r` and congestion window `cw` (shared by its transfers), and its slot
copies (`SlotPool.version`).  Outgoing frames are written one after another
into `tx`, and message m's (address, length) into `iov[2 m : 2 m + 2]`,
the address being `base` plus the frame's offset (`base` 0 gives offsets).

RACK and the timers look at every slot: each RESULT costs O(W) compares
(W = 64 by default, well under a microsecond; a job with thousands of
slots pays a few microseconds per RESULT).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

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
    HEADER_BYTES,
    VERSION_BIT,
    Flags,
    MsgType,
)

# the wire's codes as plain integers, which the kernels compile in as constants
_UPDATE, _RESULT, _STALE_RUN_FLAG = int(MsgType.UPDATE), int(MsgType.RESULT), int(Flags.STALE_RUN)
_VERSION_SHIFT = VERSION_BIT.bit_length() - 1

# t: the transfer's integers
(T_NEXT, T_RECEIVED, T_SEQ, T_HEARD, T_PROBING, T_CHUNKS, T_WORDS, T_JOB, T_WORKER, T_TAG, T_SLOT_BASE,
 T_SLOTS, T_PIPES, T_IN_FLIGHT, T_STALE_SLOT) = range(15)
T_SIZE = 15
# f: the transfer's times
F_LAST_PROGRESS, F_EARLIEST, F_RACK_AT, F_DEADLINE, F_PROBE_AT = range(5)
F_SIZE = 5
# fl_i[slot]: the chunk in flight in that slot (-1: none) and its integers; then the last chunk answered
# there, its copy and how often it went (-1 once a duplicate answer was taken)
I_CHUNK, I_VERSION, I_SEQ, I_RETRIES, I_SUPPRESSED, I_OVERTAKEN, I_DONE_CHUNK, I_DONE_VERSION, I_DONE_RETRIES = range(9)
I_SIZE = 9
# fl_f[slot]: its latest transmission, its own timeout, when that expires, its first transmission; the
# last chunk answered there: its first transmission, when its answer came
L_SENT, L_RTO, L_DUE, L_FIRST, L_DONE_FIRST, L_DONE_AT = range(6)
L_SIZE = 6
# rack[pipe]: the latest transmission answered of a chunk sent once, its round trip; same for resent chunks
K_FRESH_SEQ, K_FRESH_RTT, K_RESENT_SEQ, K_RESENT_RTT = range(4)
# r: the RTT estimator (RttEstimator)
(R_RTO, R_SRTT, R_RTTVAR, R_MIN_RTT, R_SCALE, R_RECOVERIES, R_MINIMUM, R_MAXIMUM, R_BACKOFF_LIMIT,
 R_DECAY, R_PROBE_FLOOR, R_NEXT, R_SAMPLE) = range(13)
R_SAMPLES = 4  # the last round trips whose least a standing queue raises (from R_SAMPLE on)
R_SIZE = R_SAMPLE + R_SAMPLES
# cw: the congestion window (CongestionWindow); the last SAMPLES round trips from CW_SAMPLE on
(CW_CWND, CW_SSTHRESH, CW_CUT_AT, CW_RECENT, CW_LIMIT, CW_MINIMUM, CW_CUTS, CW_COUNT, CW_NEXT,
 CW_QUEUE_DELAY, CW_QUEUED, CW_CONTEST, CW_CONTESTS, CW_RATE_AT, CW_RATE_N, CW_RATE, CW_RATE_NOW,
 CW_RATE_PREV, CW_SAMPLE) = range(19)
SQUEEZED = 0.75  # a delivery rate under this share of the fastest seen: something else takes the link
RATE_RTTS = 4  # round trips a delivery rate is measured over
SAMPLES = 3
CW_SIZE = CW_SAMPLE + SAMPLES
# stats, in the order of STATS
STATS = ("frames", "bytes", "retransmissions", "fast_retransmissions", "timeouts", "spurious_resends", "ignored",
         "probes")
S_FRAMES, S_BYTES, S_RETRANSMISSIONS, S_FAST, S_TIMEOUTS, S_SPURIOUS, S_IGNORED, S_PROBES = range(len(STATS))

# what a call reports besides its frames
OK, STALE_RUN, DEADLINE = 0, 1, 2


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
        least = min(least, r[R_SAMPLE + i])
    return least


@njit(cache=True)
def backoff_cap(r):
    recent = recent_least(r)
    return min(r[R_MAXIMUM], max(r[R_BACKOFF_LIMIT], r[R_MINIMUM], 8.0 * r[R_MIN_RTT],
                                 0.0 if math.isinf(recent) else 2.0 * recent))


@njit(cache=True)
def rtt_sample(r, rtt):
    if math.isnan(r[R_SRTT]):
        r[R_SRTT], r[R_RTTVAR] = rtt, rtt / 2
    else:
        r[R_RTTVAR] = 0.75 * r[R_RTTVAR] + 0.25 * abs(r[R_SRTT] - rtt)
        r[R_SRTT] = 0.875 * r[R_SRTT] + 0.125 * rtt
    r[R_MIN_RTT] = min(r[R_MIN_RTT], rtt)
    r[R_SAMPLE + int(r[R_NEXT])] = rtt
    r[R_NEXT] = (r[R_NEXT] + 1) % R_SAMPLES
    r[R_RTO] = min(backoff_cap(r), max(r[R_MINIMUM], r[R_SRTT] + 4 * r[R_RTTVAR]))


@njit(cache=True)
def rtt_backoff(r):
    r[R_RTO] = min(backoff_cap(r), 2 * r[R_RTO])


@njit(cache=True)
def probe_after(r):
    """How long a silent path (no answer, nothing sent) waits before one chunk goes again as a probe:
    two smoothed round trips, at least the floor (RACK's tail loss probe, RFC 8985 7.2); never without
    a round trip measured."""
    return math.inf if math.isnan(r[R_SRTT]) else max(2 * r[R_SRTT], r[R_PROBE_FLOOR])


@njit(cache=True)
def reordering(r):
    srtt = 0.0 if math.isnan(r[R_SRTT]) else r[R_SRTT]
    return max(1e-4, r[R_SCALE] * srtt / 4)


@njit(cache=True)
def rtt_reordered(r):
    r[R_SCALE] = min(8.0, 2 * r[R_SCALE])
    r[R_RECOVERIES] = 0.0


@njit(cache=True)
def rtt_recovered(r):
    r[R_RECOVERIES] += 1
    if r[R_RECOVERIES] >= r[R_DECAY]:
        r[R_RECOVERIES] = 0.0
        r[R_SCALE] = max(1.0, r[R_SCALE] / 2)


# -- the congestion window -------------------------------------------------------------------
@njit(cache=True)
def queueing(cw, rtt, min_rtt):
    """NaN (no sample) is never queueing; neither is anything against an infinite least RTT."""
    return rtt > min_rtt + max(cw[CW_QUEUE_DELAY], min_rtt)


@njit(cache=True)
def contested(cw):
    """Whether another flow holds the queue: for `CW_CONTEST` windows of RESULTs in a row the round
    trips showed more queueing than the window's own chunks could make (`foreign`)."""
    return cw[CW_QUEUED] >= cw[CW_CONTEST]


@njit(cache=True)
def foreign(cw, min_rtt):
    """Whether another flow holds the queue: the recent round trips queued more than twice what the
    window's own chunks could (at most cwnd of them wait in a queue, which drains at least as fast
    as the fastest the RESULTs ever came, `CW_RATE`), and the RESULTs now come at under `SQUEEZED`
    of that fastest rate (`CW_RATE_NOW`, the last round trip's).  The second condition tells another
    flow from the job's own peers: a worker's round trip also holds the wait for the slowest
    worker's UPDATE, which its own window does not bound, but a job waiting on its own workers still
    keeps its links busy, while a flow that takes a share of a link slows the RESULTs down.  Never
    before a rate is measured."""
    return (cw[CW_RATE] > 0 and cw[CW_RECENT] - min_rtt > 2.0 * cw[CW_CWND] / cw[CW_RATE]
            and cw[CW_RATE_NOW] < SQUEEZED * cw[CW_RATE])


@njit(cache=True)
def window_result(cw, rtt, min_rtt, now):
    # the delivery rate: RESULTs over RATE_RTTS round trips (a batch shares one `now`).  The fastest
    # rate counts only what two intervals in a row sustained: RESULTs held up come in a burst (a
    # phase's first window, the end of a stall), which one interval would take for the path's.
    # An interval over an idle gap (between phases or steps) measures the gap: dropped.
    cw[CW_RATE_N] += 1
    recent = cw[CW_RECENT]
    if math.isnan(cw[CW_RATE_AT]) or now < cw[CW_RATE_AT] or (
            not math.isnan(recent) and now - cw[CW_RATE_AT] > 4 * RATE_RTTS * recent + 0.01):
        cw[CW_RATE_AT], cw[CW_RATE_N], cw[CW_RATE_NOW] = now, 0.0, 0.0
    elif not math.isnan(recent) and now - cw[CW_RATE_AT] >= RATE_RTTS * recent > 0:
        cw[CW_RATE_PREV], cw[CW_RATE_NOW] = cw[CW_RATE_NOW], cw[CW_RATE_N] / (now - cw[CW_RATE_AT])
        cw[CW_RATE] = max(cw[CW_RATE], min(cw[CW_RATE_PREV], cw[CW_RATE_NOW]))
        cw[CW_RATE_AT], cw[CW_RATE_N] = now, 0.0
    if not math.isnan(rtt):
        cw[CW_SAMPLE + int(cw[CW_NEXT])] = rtt
        cw[CW_NEXT] = (cw[CW_NEXT] + 1) % SAMPLES
        cw[CW_COUNT] = min(SAMPLES, cw[CW_COUNT] + 1)
        least = math.inf
        for i in range(int(cw[CW_COUNT])):
            least = min(least, cw[CW_SAMPLE + i])
        cw[CW_RECENT] = least
        if queueing(cw, least, min_rtt) and foreign(cw, min_rtt):
            was = contested(cw)
            cw[CW_QUEUED] += 1.0 / cw[CW_CWND]  # a window of such RESULTs: about one round trip
            if contested(cw) and not was:
                cw[CW_CONTESTS] += 1
        else:
            cw[CW_QUEUED] = 0.0  # no queue, or one our own chunks could hold: the delay rule's case
    if queueing(cw, cw[CW_RECENT], min_rtt) and not contested(cw):
        return
    grow = 1.0 if cw[CW_CWND] < cw[CW_SSTHRESH] else 1.0 / cw[CW_CWND]
    cw[CW_CWND] = min(cw[CW_LIMIT], cw[CW_CWND] + grow)


@njit(cache=True)
def window_loss(cw, sent_at, now, min_rtt):
    if sent_at <= cw[CW_CUT_AT] or not queueing(cw, cw[CW_RECENT], min_rtt):
        return
    # contested, give back what CUBIC (Linux's TCP) does, 30%; else half, as Reno
    keep = 0.7 if contested(cw) else 0.5
    cw[CW_SSTHRESH] = cw[CW_CWND] = max(cw[CW_MINIMUM], cw[CW_CWND] * keep)
    cw[CW_CUT_AT] = now
    cw[CW_CUTS] += 1


# -- frames ------------------------------------------------------------------------------------
@njit(cache=True)
def _put16(buf, at, value):
    buf[at] = (value >> 8) & 0xFF
    buf[at + 1] = value & 0xFF


@njit(cache=True)
def _get16(buf, at):
    return (np.int64(buf[at]) << 8) | np.int64(buf[at + 1])


@njit(cache=True)
def _copy(dst, d, src, s, n):
    """dst[d : d + n] = src[s : s + n], a word at a time where everything is word-aligned (frames are:
    16 header bytes and K words); a byte loop runs about 4x slower on jumbo frames."""
    if (d | s | n) & 3 == 0 and dst.size & 3 == 0 and src.size & 3 == 0:
        dst.view(np.uint32)[d >> 2 : (d + n) >> 2] = src.view(np.uint32)[s >> 2 : (s + n) >> 2]
    else:
        dst[d : d + n] = src[s : s + n]


@njit(cache=True)
def _frame(t, chunks, wire, slot, chunk, version, tx, iov, m, base, stats):
    """UPDATE for `chunk` in `slot`, copy `version`, as message m, at byte m (16 + 4 K) of `tx`."""
    words = t[T_WORDS]
    size = HEADER_BYTES + 4 * words
    at = m * size  # every frame of a worker's job is K words long
    if at + size > tx.size or 2 * m + 1 >= iov.size:
        return m  # never past the ring (callers leave room; were one not to, the chunk counts as lost)
    tx[at + AT_MSG_TYPE] = _UPDATE
    tx[at + AT_OP] = chunks[chunk, 2]
    _put16(tx, at + AT_JOB_ID, t[T_JOB])
    tx[at + AT_WORKER_ID] = t[T_WORKER]
    tx[at + AT_FLAGS] = 0
    _put16(tx, at + AT_POOL_INDEX, (version << _VERSION_SHIFT) | (t[T_SLOT_BASE] + slot))
    wire_offset = chunks[chunk, 3]
    _put16(tx, at + AT_OFFSET, wire_offset >> 16)
    _put16(tx, at + AT_OFFSET + 2, wire_offset & 0xFFFF)
    _put16(tx, at + AT_COUNT, chunks[chunk, 1])
    _put16(tx, at + AT_PHASE, t[T_TAG])
    _copy(tx, at + HEADER_BYTES, wire, 4 * chunks[chunk, 0], 4 * words)
    iov[2 * m] = base + at
    iov[2 * m + 1] = size
    stats[S_FRAMES] += 1
    stats[S_BYTES] += size
    return m + 1


@njit(cache=True)
def _send_new(t, f, fl_i, fl_f, slot, chunk, version, now, rto):
    fl_i[slot, I_CHUNK] = chunk
    fl_i[slot, I_VERSION] = version
    fl_i[slot, I_SEQ] = t[T_SEQ]
    fl_i[slot, I_RETRIES] = 0
    fl_i[slot, I_SUPPRESSED] = 0
    fl_i[slot, I_OVERTAKEN] = 0
    fl_f[slot, L_SENT] = fl_f[slot, L_FIRST] = now
    fl_f[slot, L_RTO] = rto
    fl_f[slot, L_DUE] = now + rto
    t[T_SEQ] += 1
    t[T_IN_FLIGHT] += 1
    f[F_EARLIEST] = min(f[F_EARLIEST], now + rto)


@njit(cache=True)
def _resend(t, f, chunks, wire, fl_i, fl_f, slot, now, tx, iov, m, base, stats):
    fl_i[slot, I_RETRIES] += 1
    fl_f[slot, L_SENT] = now
    fl_f[slot, L_DUE] = now + fl_f[slot, L_RTO]
    fl_i[slot, I_SEQ] = t[T_SEQ]
    t[T_SEQ] += 1
    fl_i[slot, I_SUPPRESSED] = 0
    f[F_EARLIEST] = min(f[F_EARLIEST], fl_f[slot, L_DUE])
    stats[S_RETRANSMISSIONS] += 1
    return _frame(t, chunks, wire, slot, fl_i[slot, I_CHUNK], fl_i[slot, I_VERSION], tx, iov, m, base, stats)


@njit(cache=True)
def fill(t, f, r, cw, version, chunks, wire, fl_i, fl_f, now, tx, iov, m, base, stats):
    """Send the next chunks while the window has room and their slots are free (in order: chunk
    c waits for chunk c - W, as every worker's does)."""
    room = np.int64(cw[CW_CWND]) - t[T_IN_FLIGHT]
    slots = t[T_SLOTS]
    first = t[T_NEXT]
    while room > 0 and t[T_NEXT] < t[T_CHUNKS]:
        chunk = t[T_NEXT]
        slot = chunk % slots
        if fl_i[slot, I_CHUNK] >= 0:
            break
        _send_new(t, f, fl_i, fl_f, slot, chunk, version[slot], now, r[R_RTO])
        m = _frame(t, chunks, wire, slot, chunk, version[slot], tx, iov, m, base, stats)
        t[T_NEXT] += 1
        room -= 1
    if t[T_NEXT] > first:
        f[F_PROBE_AT] = now + probe_after(r)
    return m


@njit(cache=True)
def _by_seq(fl_i, picked, n):
    """The first n slots of `picked`, oldest transmission first."""
    order = np.argsort(fl_i[picked[:n], I_SEQ], kind="mergesort")
    return picked[:n][order]


@njit(cache=True)
def _oldest(fl_i, picked, n):
    """Of the first n slots of `picked`, the one holding the oldest chunk: what a probe resends."""
    probe = picked[0]
    for i in range(1, n):
        if fl_i[picked[i], I_CHUNK] < fl_i[probe, I_CHUNK]:
            probe = picked[i]
    return probe


@njit(cache=True)
def overtaken(t, f, r, cw, rack, chunks, wire, fl_i, fl_f, now, tx, iov, m, base, stats):
    """RACK: resend the chunks a later-sent, answered chunk of their pipe overtook by more than the
    allowance (or, among resent chunks, a later resend answered a round trip or more after it went)."""
    f[F_RACK_AT] = math.inf
    allowance = reordering(r)
    slots, pipes = t[T_SLOTS], t[T_PIPES]
    lost = np.empty(slots, np.int64)
    n = 0
    for slot in range(slots):
        if fl_i[slot, I_CHUNK] < 0:
            continue
        p = (t[T_SLOT_BASE] + slot) % pipes
        seq = fl_i[slot, I_SEQ]
        if seq < rack[p, K_FRESH_SEQ]:
            due = fl_f[slot, L_SENT] + rack[p, K_FRESH_RTT] + allowance
        elif fl_i[slot, I_RETRIES] > 0 and seq < rack[p, K_RESENT_SEQ]:
            due = fl_f[slot, L_SENT] + rack[p, K_RESENT_RTT] + allowance
        else:
            continue
        if now < due:
            f[F_RACK_AT] = min(f[F_RACK_AT], due)
        else:
            lost[n] = slot
            n += 1
    if n == 0:
        return m
    for slot in _by_seq(fl_i, lost, n):
        window_loss(cw, fl_f[slot, L_SENT], now, r[R_MIN_RTT])
        fl_i[slot, I_OVERTAKEN] = 1
        rtt_recovered(r)
        stats[S_FAST] += 1
        m = _resend(t, f, chunks, wire, fl_i, fl_f, slot, now, tx, iov, m, base, stats)
    f[F_PROBE_AT] = now + probe_after(r)
    return m


@njit(cache=True)
def _duplicate(t, r, chunks, fl_i, fl_f, frame, at, slot, pool_index, offset, stats):
    """A second answer to the chunk last answered in `slot`, which went exactly twice: both
    transmissions reached the switch, so the resend was spurious and the first answer answered the
    first transmission, whose round trip is then a sample (the switch answers a resend of a
    complete copy from that copy: DSACK's evidence, RFC 3708).  A queue that outgrew the timeout
    (another flow's) makes every chunk time out, and Karn's rule would keep srtt, and so the timeout,
    from ever learning the longer round trip; the answers that come too soon after a resend to be
    its own (`receive`) tell only of a queue shorter than the timeout."""
    if (frame[at + AT_MSG_TYPE] != _RESULT or slot < 0 or slot >= t[T_SLOTS]
            or _get16(frame, at + AT_JOB_ID) != t[T_JOB] or _get16(frame, at + AT_PHASE) != t[T_TAG]):
        return
    done = fl_i[slot, I_DONE_CHUNK]
    if (done < 0 or fl_i[slot, I_DONE_RETRIES] != 1 or fl_i[slot, I_DONE_VERSION] != pool_index >> _VERSION_SHIFT
            or offset != chunks[done, 3]):
        return
    fl_i[slot, I_DONE_RETRIES] = -1  # one sample per chunk
    stats[S_SPURIOUS] += 1
    rtt_sample(r, fl_f[slot, L_DONE_AT] - fl_f[slot, L_DONE_FIRST])


@njit(cache=True)
def receive(t, f, r, cw, rack, version, chunks, wire, answers, fl_i, fl_f, frame, at, length, now,
            tx, iov, m, base, stats):
    """Take in one frame (`frame[at : at + length]`); return the message count after the frames it
    lets out, and OK or STALE_RUN (then t[T_STALE_SLOT] names the slot, and nothing changed)."""
    if length < HEADER_BYTES:
        stats[S_IGNORED] += 1
        return m, OK
    pool_index = _get16(frame, at + AT_POOL_INDEX)
    slot = (pool_index & (VERSION_BIT - 1)) - t[T_SLOT_BASE]
    if (frame[at + AT_MSG_TYPE] == _RESULT and frame[at + AT_FLAGS] & _STALE_RUN_FLAG
            and _get16(frame, at + AT_JOB_ID) == t[T_JOB] and _get16(frame, at + AT_PHASE) == t[T_TAG]
            and 0 <= slot < t[T_SLOTS]):
        # the switch refused a chunk of this phase, ours or another worker's (it tells every member):
        # the run cannot finish, so stop now rather than wait for chunks that never complete
        t[T_STALE_SLOT] = slot
        return m, STALE_RUN
    offset = (_get16(frame, at + AT_OFFSET) << 16) | _get16(frame, at + AT_OFFSET + 2)
    if slot < 0 or slot >= t[T_SLOTS] or fl_i[slot, I_CHUNK] < 0:
        _duplicate(t, r, chunks, fl_i, fl_f, frame, at, slot, pool_index, offset, stats)
        stats[S_IGNORED] += 1
        return m, OK
    chunk = fl_i[slot, I_CHUNK]
    count = _get16(frame, at + AT_COUNT)
    if (frame[at + AT_MSG_TYPE] != _RESULT or _get16(frame, at + AT_JOB_ID) != t[T_JOB]
            or _get16(frame, at + AT_PHASE) != t[T_TAG] or fl_i[slot, I_VERSION] != pool_index >> _VERSION_SHIFT
            or offset != chunks[chunk, 3] or count != chunks[chunk, 1] or length < HEADER_BYTES + 4 * count):
        _duplicate(t, r, chunks, fl_i, fl_f, frame, at, slot, pool_index, offset, stats)
        stats[S_IGNORED] += 1
        return m, OK
    if frame[at + AT_FLAGS] & _STALE_RUN_FLAG:
        t[T_STALE_SLOT] = slot
        return m, STALE_RUN
    _copy(answers, 4 * chunks[chunk, 0], frame, at + HEADER_BYTES, 4 * count)
    rtt = now - fl_f[slot, L_SENT]
    min_rtt = r[R_MIN_RTT]
    fresh = fl_i[slot, I_RETRIES] == 0
    # answered sooner after its resend than any round trip seen: it answers an earlier transmission
    late = not fresh and rtt < min_rtt / 2 < math.inf
    if late and fl_i[slot, I_OVERTAKEN]:
        # this answers the first transmission, which was late, not lost
        rtt_reordered(r)
    if late:
        stats[S_SPURIOUS] += 1
    p = (t[T_SLOT_BASE] + slot) % t[T_PIPES]
    seq = fl_i[slot, I_SEQ]
    if fresh:  # Karn: a resent chunk's answer may answer either transmission
        rtt_sample(r, rtt)
        t[T_PROBING] = 0  # chunks sent once are answered again: the flow is back
        if seq > rack[p, K_FRESH_SEQ]:
            rack[p, K_FRESH_SEQ], rack[p, K_FRESH_RTT] = seq, rtt
    elif late and fl_i[slot, I_RETRIES] == 1:
        # Karn's ambiguity does not hold here: sent twice, and answered too soon after the second, so
        # the first is answered, and its round trip is a sample.  A queue that grew past the timeout
        # (another flow's) makes every chunk time out: without these samples srtt, and so the
        # timeout, would never learn the longer round trip, and every chunk would go twice.
        rtt = now - fl_f[slot, L_FIRST]
        rtt_sample(r, rtt)
        fresh = True
    elif rtt >= min_rtt:
        # a resent chunk's answer, too late to answer its first transmission
        if seq > rack[p, K_RESENT_SEQ]:
            rack[p, K_RESENT_SEQ], rack[p, K_RESENT_RTT] = seq, rtt
    window_result(cw, rtt if fresh else math.nan, r[R_MIN_RTT], now)
    t[T_RECEIVED] += 1
    f[F_LAST_PROGRESS] = now
    f[F_PROBE_AT] = now + probe_after(r)
    if not t[T_HEARD]:
        t[T_HEARD] = 1
        for s in range(t[T_SLOTS]):
            if fl_i[s, I_CHUNK] >= 0 and fl_i[s, I_SUPPRESSED]:  # progress again: a full timeout first
                fl_i[s, I_SUPPRESSED] = 0
                fl_f[s, L_RTO] = r[R_RTO]
                fl_f[s, L_DUE] = now + r[R_RTO]
                f[F_EARLIEST] = min(f[F_EARLIEST], fl_f[s, L_DUE])
    fl_i[slot, I_DONE_CHUNK], fl_i[slot, I_DONE_VERSION] = chunk, fl_i[slot, I_VERSION]
    fl_i[slot, I_DONE_RETRIES] = -1 if late else fl_i[slot, I_RETRIES]  # late: its sample is taken
    fl_f[slot, L_DONE_FIRST], fl_f[slot, L_DONE_AT] = fl_f[slot, L_FIRST], now
    version[slot] ^= 1
    fl_i[slot, I_CHUNK] = -1
    t[T_IN_FLIGHT] -= 1
    m = overtaken(t, f, r, cw, rack, chunks, wire, fl_i, fl_f, now, tx, iov, m, base, stats)
    return fill(t, f, r, cw, version, chunks, wire, fl_i, fl_f, now, tx, iov, m, base, stats), OK


@njit(cache=True)
def take(t, f, r, cw, rack, version, chunks, wire, answers, fl_i, fl_f, rx, entry_bytes, lengths, start, n,
         now, tx, iov, m, base, capacity, stats):
    """`receive` for entries start..n-1 of a `recvmmsg` batch, while the ring keeps room for what one
    more frame may let out (`burst`); return the next
    entry to take, the message count and OK, or STALE_RUN at the entry that was refused."""
    room = burst(t[T_SLOTS])
    i = start
    while i < n and m + room <= capacity:
        m, status = receive(t, f, r, cw, rack, version, chunks, wire, answers, fl_i, fl_f, rx,
                            i * entry_bytes, np.int64(lengths[i]), now, tx, iov, m, base, stats)
        if status != OK:
            return i, m, status
        i += 1
    return i, m, OK


@njit(cache=True)
def poll(t, f, r, cw, rack, chunks, wire, fl_i, fl_f, now, tx, iov, m, base, stats):
    """Retransmissions that are due; DEADLINE when nothing progressed for the deadline."""
    if t[T_RECEIVED] == t[T_CHUNKS]:
        return m, OK
    if now - f[F_LAST_PROGRESS] >= f[F_DEADLINE]:
        return m, DEADLINE
    if now >= f[F_RACK_AT]:
        m = overtaken(t, f, r, cw, rack, chunks, wire, fl_i, fl_f, now, tx, iov, m, base, stats)
    if now >= f[F_PROBE_AT]:
        # Nothing answered and nothing sent for two round trips: the last answers or a resend may be
        # lost with nothing sent after them that could say so (a phase's tail; or a chunk whose slot
        # the next chunk waits for, so the window drained behind it).  One chunk, the oldest, goes
        # again without waiting for the timeout; if it is answered, RACK and the window resume.  Once
        # per silence (a timeout's probes own the stall once one fired), without backoff or a window
        # cut: on a late peer it costs one frame.
        f[F_PROBE_AT] = math.inf
        if t[T_IN_FLIGHT] > 0 and not t[T_PROBING]:
            in_flight = np.flatnonzero(fl_i[:, I_CHUNK] >= 0)
            stats[S_PROBES] += 1
            m = _resend(t, f, chunks, wire, fl_i, fl_f, _oldest(fl_i, in_flight, in_flight.size), now, tx, iov, m,
                        base, stats)
    if now >= f[F_EARLIEST]:
        slots = t[T_SLOTS]
        due = np.empty(slots, np.int64)
        n = 0
        for slot in range(slots):
            if fl_i[slot, I_CHUNK] >= 0 and now >= fl_f[slot, L_DUE]:
                due[n] = slot
                n += 1
        cap = backoff_cap(r)
        if n and t[T_PROBING] and t[T_HEARD]:
            # The last probe was answered, and these waited a full timeout after that progress
            # without being overtaken: the tail of the phase was lost.  All of it goes again.
            for slot in _by_seq(fl_i, due, n):
                window_loss(cw, fl_f[slot, L_SENT], now, r[R_MIN_RTT])
                fl_f[slot, L_RTO] = min(2 * fl_f[slot, L_RTO], cap)
                m = _resend(t, f, chunks, wire, fl_i, fl_f, slot, now, tx, iov, m, base, stats)
            stats[S_TIMEOUTS] += 1
            t[T_HEARD] = 0
        elif n:
            # Nothing overtook these: a tail, a late peer or a stalled path.  Resend the oldest
            # chunk only and back off; the rest wait, backing off alike, until a RESULT shows progress.
            probe = _oldest(fl_i, due, n)
            for i in range(n):
                slot = due[i]
                if slot != probe:
                    fl_f[slot, L_RTO] = min(2 * fl_f[slot, L_RTO], cap)
                    fl_f[slot, L_DUE] = now + fl_f[slot, L_RTO]
                    fl_i[slot, I_SUPPRESSED] = 1
            window_loss(cw, fl_f[probe, L_SENT], now, r[R_MIN_RTT])
            rtt_backoff(r)
            stats[S_TIMEOUTS] += 1
            fl_f[probe, L_RTO] = min(2 * fl_f[probe, L_RTO], cap)
            m = _resend(t, f, chunks, wire, fl_i, fl_f, probe, now, tx, iov, m, base, stats)
            t[T_HEARD] = 0
            t[T_PROBING] = 1
        earliest = math.inf
        for slot in range(slots):
            if fl_i[slot, I_CHUNK] >= 0:
                earliest = min(earliest, fl_f[slot, L_DUE])
        f[F_EARLIEST] = earliest
    return m, OK

