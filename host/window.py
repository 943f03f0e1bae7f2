"""One phase's words through the switch, as a sans-I/O object: frames out, frames in, timers.

The phase's int32 words are cut into chunks of at most K words, each
segment of the round on its own (a chunk never straddles two segments, so
each packet carries one op); chunk c goes to slot c mod W of the job's W
slots, so every worker puts the same chunk in the same slot.  Each slot
alternates between its two copies: the copy is flipped after every RESULT,
for the whole life of the job (`SlotPool`), so consecutive uses of a slot
never meet in one copy.  Chunks go out in order while fewer than the
congestion window are in flight and the chunk's slot is free (chunk c - W
answered); the window (`CongestionWindow`, shared by a worker's transfers)
grows by one chunk per window of RESULTs and halves, once per round trip,
on a loss, so a slow switch (BMv2 forwards a few thousand packets a second)
is not flooded.

Loss detection fits aggregation: every worker sends the chunks in the same
order, so RESULTs come back in that order.  A chunk still waiting when a
chunk sent after it has been answered, and longer than that answer's round
trip plus a reordering allowance, is lost and sent again at once (RACK, RFC
8985).  The same holds among resent chunks: a resend answered a round trip
or more after it went (so not the first transmission's answer) shows that
the resends before it that are still waiting were lost again; on a lossy
link this, not a timer, ends most stalls.  A switch with pipes answers
each pipe's slots (slot mod P) in order but not in step with the other
pipes, so with `pipes` P a chunk is compared only with its own pipe's.
The allowance is a quarter of srtt, doubled when a resent chunk's first
answer comes sooner after the resend than half the least round trip (it
was late, not lost) and halved again after 8 recoveries without such
evidence.  Only a chunk nothing overtakes (a phase's tail, or a stall)
waits for the retransmission timeout (`RttEstimator`: RFC 6298, Karn's
rule: no RTT samples from resent chunks, but for a chunk that went twice
and was answered too soon after the resend, or answered twice, which time
its first transmission; on expiry the timeout doubles until a fresh
sample, to at most 50 ms, 8 least round trips or twice the least of the
last 4), and then only
the oldest such chunk is resent: a peer that is late delays everyone's
RESULTs alike and must not make the whole window go out again.
If nothing progresses for `deadline` seconds the transfer raises `AggregationTimeout`, naming job, phase and offset.  A
RESULT counts only if job, phase tag, slot, copy, offset and count all
match the chunk that slot is waiting for; anything else is ignored and
counted, so stale or duplicated RESULTs can never land in the wrong place.

Layering: the rules run compiled in `sendplane.py` (below: functions of
`now`, frames and arrays, importing nothing from here), over arrays these
objects own; `agent.py` (above) drives these objects with sockets.
`warm()` compiles the rules once per process by driving a tiny transfer.
"""

from __future__ import annotations

import collections
import math

import numpy as np

from hina.wire.headers import HEADER_BYTES

from . import sendplane as sp


class AggregationTimeout(RuntimeError):
    """No progress within the deadline: the switch or another worker is gone."""


class StaleSwitchState(RuntimeError):
    """The switch holds this job's slots from an earlier run: it refused our chunk (flag STALE_RUN),
    or answered our hello with another run's."""


def stale_message(job_id: int, worker_id: int, what: str) -> str:
    return (f"job {job_id}, worker {worker_id}: the switch {what}; clear the earlier run's state before "
            f"running the job again: join it through the emulator's control port (`hina worker --control`, "
            f"ControlClient(...).join: each joining worker empties what an earlier run left), or "
            f"ControlClient(...).reset_job({job_id}), or restart the emulator; BMv2: the controller's "
            f"reset_job({job_id})")


def _column(index: int, doc: str | None = None, kind: type = float) -> property:
    """An attribute kept in column `index` of the object's `state` array, read as `kind`."""
    def get(self):
        return kind(self.state[index])

    def set(self, value: float) -> None:
        self.state[index] = value

    return property(get, set, doc=doc)


class RttEstimator:
    """Smoothed RTT and retransmission timeout (RFC 6298), shared by a worker's transfers.

    The timeout is srtt + 4 rttvar, at least `minimum`; an expiry doubles it until the next fresh
    sample; neither goes past `backoff_cap` (50 ms, or 8 least round trips or twice the least
    recent one on a slower path).  A
    switch that is up but loses packets answers the next probe: on a lossy link every doubling
    is a stall, and exponential backoff to seconds made heavy loss take minutes.  What backoff
    protects, a slow or congested switch, is protected by the congestion window and by
    resending one probe chunk per timeout, not the window.

    The state is one float64 array (`state`, columns `sendplane.R_*`), which the compiled sender
    updates in place; these methods call the same functions.
    """

    REORDER_DECAY = 8  # loss recoveries without evidence of reordering after which the allowance halves

    PROBE_FLOOR = 2e-3  # the least silence before a tail probe (`probe_after`)

    def __init__(self, initial: float = 0.1, minimum: float = 0.02, maximum: float = 2.0,
                 backoff_limit: float = 0.05, probe_floor: float = PROBE_FLOOR):
        """probe_floor: a silent path's probe goes after max(2 srtt, probe_floor); inf: never (the
        timeout alone)."""
        self.state = np.zeros(sp.R_SIZE)
        r = self.state
        r[sp.R_RTO], r[sp.R_SRTT], r[sp.R_MIN_RTT], r[sp.R_SCALE] = initial, math.nan, math.inf, 1.0
        r[sp.R_MINIMUM], r[sp.R_MAXIMUM], r[sp.R_BACKOFF_LIMIT] = minimum, maximum, backoff_limit
        r[sp.R_DECAY] = self.REORDER_DECAY
        r[sp.R_PROBE_FLOOR] = probe_floor
        r[sp.R_SAMPLE : sp.R_SAMPLE + sp.R_SAMPLES] = math.inf

    rto = _column(sp.R_RTO)
    rttvar = _column(sp.R_RTTVAR)
    min_rtt = _column(sp.R_MIN_RTT)
    minimum = _column(sp.R_MINIMUM)
    maximum = _column(sp.R_MAXIMUM)
    backoff_limit = _column(sp.R_BACKOFF_LIMIT)
    reorder_scale = _column(sp.R_SCALE, "doubles on evidence that RESULTs reorder, halves without it")
    probe_floor = _column(sp.R_PROBE_FLOOR, "the least silence before a tail probe")

    @property
    def probe_after(self) -> float:
        """How long a silent path waits before a tail probe: 2 srtt, at least `probe_floor` (inf before
        the first round trip)."""
        return float(sp.probe_after(self.state))

    @property
    def srtt(self) -> float | None:
        srtt = float(self.state[sp.R_SRTT])
        return None if math.isnan(srtt) else srtt

    def sample(self, rtt: float) -> None:
        """One RTT measured on a chunk sent once (Karn: never on a resent one)."""
        sp.rtt_sample(self.state, rtt)

    @property
    def backoff_cap(self) -> float:
        """The longest a timeout may be, backed off or not: `backoff_limit` (or `minimum`, if
        longer), or 8 least round trips on a slower path; at most `maximum`.  Round trips vary
        with other workers' losses (a chunk is answered once the last worker's UPDATE is in),
        which srtt + 4 rttvar would take for the path's.  But never under twice the least of the
        last 4 round trips: a queue that stands (another flow's) lengthens every round trip, and a
        timeout short of them would send every chunk twice; a chunk a late peer held up lengthens
        its own round trip only, and srtt, which the cap once followed, ratcheted up on those
        (each longer sample a longer timeout, each timeout a longer stall)."""
        return float(sp.backoff_cap(self.state))

    def backoff(self) -> None:
        """A retransmission timer expired: double the timeout until the next fresh sample."""
        sp.rtt_backoff(self.state)

    @property
    def reordering(self) -> float:
        """How much later than a chunk sent after it a RESULT may come before its chunk counts as lost:
        a quarter of srtt (RACK's reo_wnd, RFC 8985 6.2) times the reordering seen, at least 0.1 ms."""
        return float(sp.reordering(self.state))

    def reordered(self) -> None:
        """A chunk resent as overtaken was not lost: its first transmission's answer came after all
        (a switch with pipes answers each pipe's slots in its own time).  Allow twice as much, up
        to two round trips."""
        sp.rtt_reordered(self.state)

    def recovered(self) -> None:
        """A chunk was resent as overtaken.  After `REORDER_DECAY` of them with no evidence of
        reordering, the allowance halves: on a lossy path the evidence is sometimes wrong (another
        worker's resend completed the chunk just after ours), and a wide allowance delays every
        recovery (RFC 8985 resets its multiplier after 16 recoveries the same way)."""
        sp.rtt_recovered(self.state)


class CongestionWindow:
    """How many chunks a worker keeps in flight, at most its job's W slots; shared by its transfers.

    Slow start from `initial` (one more chunk per RESULT) up to `ssthresh`, then one more chunk
    per window of RESULTs; a loss halves the window, at most once per round trip (losses of chunks
    sent before the last cut are the same congestion event).

    Whether a queue is building is read from the least of the last `SAMPLES` round trips, not
    from one: a queue that stands delays every packet, while a busy host's scheduler delays one
    now and then (on 2 shared cores, single samples 5 ms over the least are common and said
    nothing about the switch).  Few samples, so that a filling queue still stops the window
    before it overflows.  While one builds, the window stops growing, and a loss while it stands
    halves the window (a loss without one is the link's, and keeps it).

    That delay rule yields to any flow that keeps a queue standing: a loss-based TCP flow on a
    shared link fills the queue, no round trip comes back near the least again, so the window
    never grows, and each loss the flow causes halves it, down to its floor (TCP Vegas against
    Reno).  So the window tells its own queue from another flow's: at most cwnd of its chunks wait
    in a queue, which drains at least as fast as the fastest the RESULTs ever came (measured over 4
    round trips, two measurements in a row), so its own chunks queue at most cwnd / that rate.  When
    the recent round trips queue more than twice that (another flow holds more of the queue than we
    do) while the RESULTs come at under 3/4 of that fastest rate (something takes the link: a
    worker's round trip also holds the wait for the job's slowest worker, which its own window does
    not bound, but then the job still moves at its pace), for `CONTEST` windows of RESULTs in a
    row, the window is *contested*: it grows as TCP Reno's does,
    queue or not (the same slow start and one chunk per window), and a loss cuts it by 30%, as
    CUBIC (Linux's TCP) cuts, so it keeps a share of the link instead of its floor.  A round trip
    near the least (the queue drained), or a queue its own chunks could account for, hands it
    back to the delay rule (the mode switch of Copa, Arun and Balakrishnan, NSDI 2018).  Alone
    nothing changes: a queue of the window's own is never contested.  The state is one float64
    array (`state`, columns `sendplane.CW_*`).
    """

    QUEUE_DELAY = 5e-3  # queueing the window may add before it stops growing
    SAMPLES = sp.SAMPLES  # round trips whose least says whether a queue stands
    CONTEST = 8.0  # windows of RESULTs queued more than our own chunks could, after which the queue is contested

    def __init__(self, limit: int, initial: int = 16, minimum: int = 2, contest: float = CONTEST):
        """contest: windows of RESULTs queued more than the window's own chunks could after which the
        queue is contested (inf: never, the delay rule alone)."""
        self.state = np.zeros(sp.CW_SIZE)
        cw = self.state
        cw[sp.CW_LIMIT], cw[sp.CW_MINIMUM] = limit, min(minimum, limit)
        cw[sp.CW_CWND] = max(cw[sp.CW_MINIMUM], min(initial, limit))
        cw[sp.CW_SSTHRESH], cw[sp.CW_CUT_AT], cw[sp.CW_RECENT] = limit, -math.inf, math.nan
        cw[sp.CW_QUEUE_DELAY] = self.QUEUE_DELAY
        cw[sp.CW_CONTEST] = contest
        cw[sp.CW_RATE_AT] = math.nan

    cwnd = _column(sp.CW_CWND)
    ssthresh = _column(sp.CW_SSTHRESH)
    cut_at = _column(sp.CW_CUT_AT, "when the window was last cut")

    limit = _column(sp.CW_LIMIT, kind=int)
    minimum = _column(sp.CW_MINIMUM, kind=int)
    cuts = _column(sp.CW_CUTS, kind=int)
    chunks = _column(sp.CW_CWND, "whole chunks the window allows in flight", kind=int)
    contests = _column(sp.CW_CONTESTS, "how often another flow's standing queue made the window contested", kind=int)
    delivery_rate = _column(sp.CW_RATE, "the fastest RESULT rate two measurements in a row sustained, per second")
    recent_rate = _column(sp.CW_RATE_NOW, "the RESULT rate of the last measurement (4 round trips), per second")

    @property
    def contested(self) -> bool:
        """Whether the round trips have queued more than the window's own chunks could for `CONTEST`
        windows of RESULTs: another flow's queue, so the window grows as Reno's does rather than
        yield the link to it."""
        return bool(sp.contested(self.state))

    @property
    def recent_rtt(self) -> float | None:
        """The least of the last SAMPLES round trips."""
        recent = float(self.state[sp.CW_RECENT])
        return None if math.isnan(recent) else recent

    def queueing(self, rtt: float | None, min_rtt: float) -> bool:
        """Whether a round trip says a queue is building: `QUEUE_DELAY` (or the least RTT) over the least."""
        return bool(sp.queueing(self.state, math.nan if rtt is None else rtt, min_rtt))

    def on_result(self, rtt: float | None = None, min_rtt: float = math.inf, now: float = 0.0) -> None:
        """A RESULT came; `rtt`: its round trip if its chunk went once, `min_rtt`: the least seen.

        The window grows only while the recent round trips stay near the least: past that the
        switch's queue is filling, and a full queue drops (a drop-tail BMv2 switch); or while
        `contested`, when that queue is another flow's."""
        sp.window_result(self.state, math.nan if rtt is None else rtt, min_rtt, now)

    def on_loss(self, sent_at: float, now: float, min_rtt: float = 0.0) -> None:
        """The chunk sent at `sent_at` was lost (or timed out) at `now`.

        A loss while round trips show no queue is the link's, not congestion (the window is not
        what caused it, and halving it would only slow a lossy path down): the window stays."""
        sp.window_loss(self.state, sent_at, now, min_rtt)


class SlotPool:
    """Which copy each of the job's slots uses next; lives as long as the worker's job."""

    def __init__(self, slot_base: int, slots: int):
        self.slot_base = slot_base
        self.version = np.zeros(slots, np.int64)

    @property
    def slots(self) -> int:
        return len(self.version)


class PhaseTransfer:
    """Aggregate one phase's words (int32) with `op` through the switch's slots.

    Sans-I/O: `start`, `receive` and `poll` return the frames to send as bytes; `take` and the
    `*_into` methods write them into a `sendmmsg` ring instead (`Worker` with a batching transport).
    Both run the compiled rules in `sendplane`.
    """

    def __init__(self, *, job_id: int, worker_id: int, words: int, pool: SlotPool, rtt: RttEstimator,
                 tag: int, op: int | None = None, payload: np.ndarray, name: str, now: float, deadline: float,
                 ops: tuple[tuple[int, int, int], ...] | None = None, salt: int = 0,
                 window: CongestionWindow | None = None, pipes: int = 1, ring: Ring | None = None):
        """`ops`: (op, start, stop) of each segment of `payload`; or one `op` for all of it.

        salt: added (mod 2^32) to every offset on the wire: the run's identity (`Worker` agrees
        on it in its hello), so that a copy an earlier run left on the switch never matches.
        window: the worker's congestion window; by default all W slots, fixed.
        pipes: the switch's pipes (the emulator's `--pipes`): slot s is answered by pipe s mod pipes,
        in order within each pipe only, so loss detection compares chunks within a pipe.
        ring: where the frames go (a `Ring` of this job's K and W); by default one of its own.
        """
        self.pipes = max(1, int(pipes))
        self.job_id, self.worker_id, self.words = job_id, worker_id, words
        self.pool, self.rtt = pool, rtt
        self.window = window or CongestionWindow(pool.slots, initial=pool.slots, minimum=pool.slots)
        self.tag, self.name = tag & 0xFFFF, name
        self.deadline = deadline
        self.length = int(payload.size)
        if ops is None:
            ops = ((int(op), 0, self.length),)
        # chunk i: words [offset, offset + count) combined with op, sent at offset + salt
        parts = []
        for seg_op, start, stop in ops:
            offsets = np.arange(start, max(stop, start + 1), words, dtype=np.int64)
            part = np.empty((offsets.size, 4), np.int64)
            part[:, 0] = offsets
            part[:, 1] = np.minimum(words, stop - offsets)
            part[:, 2] = int(seg_op)
            part[:, 3] = (offsets + salt) & 0xFFFFFFFF
            parts.append(part)
        self._chunks = np.concatenate(parts) if parts else np.zeros((0, 4), np.int64)
        self.chunks = len(self._chunks)
        wire = np.zeros(self.length + words, dtype=">i4")  # a last chunk reads K words
        wire[: self.length] = payload
        self._wire = wire.view(np.uint8)
        # RESULT words land here as they came (big-endian), one byte copy each; `result` converts once
        self._answers = np.zeros(self.length, dtype=">i4")
        self._answer_bytes = self._answers.view(np.uint8)
        self._result: np.ndarray | None = None
        slots = pool.slots
        self._t = np.zeros(sp.T_SIZE, np.int64)
        t = self._t
        t[sp.T_CHUNKS], t[sp.T_WORDS], t[sp.T_JOB], t[sp.T_WORKER] = self.chunks, words, job_id, worker_id
        t[sp.T_TAG], t[sp.T_SLOT_BASE], t[sp.T_SLOTS], t[sp.T_PIPES] = self.tag, pool.slot_base, slots, self.pipes
        # last progress, earliest timeout, RACK timer, deadline, tail probe
        self._f = np.array([now, math.inf, math.inf, deadline, math.inf])
        self._fl_i = np.full((slots, sp.I_SIZE), -1, np.int64)  # slot -> the chunk in flight there
        self._fl_f = np.zeros((slots, sp.L_SIZE))
        # RACK, per pipe: the latest transmission answered of a chunk sent once and its round trip,
        # then the same for resent chunks answered late enough
        self._rack = np.tile(np.array([-1.0, 0.0, -1.0, 0.0]), (self.pipes, 1))
        self._stats = np.zeros(len(sp.STATS), np.int64)
        self.ring = ring or Ring(words, slots)
        if self.ring.frame_bytes != Ring.frame_size(words) or not self.room(0):
            raise ValueError(f"a ring of {self.ring.capacity} frames of {self.ring.frame_bytes} bytes does not fit "
                             f"{sp.burst(slots)} frames of K = {words} words")

    @property
    def stats(self) -> collections.Counter[str]:
        """frames, bytes, retransmissions (fast_retransmissions, timeouts, probes), spurious_resends, ignored."""
        return collections.Counter({k: int(v) for k, v in zip(sp.STATS, self._stats) if v})

    @property
    def done(self) -> bool:
        return self._t[sp.T_RECEIVED] == self.chunks

    @property
    def result(self) -> np.ndarray:
        """The aggregated words (int32), once `done`."""
        if self._result is None:
            if not self.done:
                answered = self._t[sp.T_RECEIVED]
                raise RuntimeError(f"phase {self.name!r}: {answered}/{self.chunks} chunks answered so far")
            self._result = self._answers.astype(np.int32)
        return self._result

    def next_timer(self) -> float:
        """When `poll` has something to do next (a retransmission or the deadline)."""
        f = self._f
        return min(f[sp.F_EARLIEST], f[sp.F_RACK_AT], f[sp.F_PROBE_AT], f[sp.F_LAST_PROGRESS] + f[sp.F_DEADLINE])

    # -- sans-I/O: frames as bytes ------------------------------------------------------------
    def start(self, now: float) -> list[bytes]:
        """The first window."""
        return self.ring.frames(self.start_into(now))

    def receive(self, frame: bytes, now: float) -> list[bytes]:
        """Take in one frame from the switch; return the frames it lets us send."""
        data = np.frombuffer(frame, np.uint8)
        m, status = sp.receive(self._t, self._f, self.rtt.state, self.window.state, self._rack,
                               self.pool.version, self._chunks, self._wire, self._answer_bytes, self._fl_i,
                               self._fl_f, data, 0, data.size, now, self.ring.tx, self.ring.iov, 0,
                               self.ring.base, self._stats)
        self._check(status)
        return self.ring.frames(m)

    def poll(self, now: float) -> list[bytes]:
        """Retransmissions that are due; raises AggregationTimeout past the deadline."""
        return self.ring.frames(self.poll_into(now, 0))

    # -- batched: frames into the ring --------------------------------------------------------
    def start_into(self, now: float) -> int:
        """The first window, as ring messages 0..m-1; returns m."""
        return sp.fill(self._t, self._f, self.rtt.state, self.window.state, self.pool.version, self._chunks,
                       self._wire, self._fl_i, self._fl_f, now, self.ring.tx, self.ring.iov, 0, self.ring.base,
                       self._stats)

    def take(self, rx: np.ndarray, entry_bytes: int, lengths: np.ndarray, start: int, n: int, now: float,
             m: int = 0) -> tuple[int, int]:
        """Take in received entries start..n-1 (entry i: `rx[i * entry_bytes:]`, `lengths[i]` bytes)
        while the ring has room; returns (the next entry to take, ring messages so far)."""
        i, m, status = sp.take(self._t, self._f, self.rtt.state, self.window.state, self._rack, self.pool.version,
                               self._chunks, self._wire, self._answer_bytes, self._fl_i, self._fl_f, rx,
                               entry_bytes, lengths, start, n, now, self.ring.tx, self.ring.iov, m, self.ring.base,
                               self.ring.capacity, self._stats)
        self._check(status)
        return i, m

    def room(self, m: int) -> bool:
        """Whether the ring, holding m messages, has room for what one RESULT or one `poll` may let out."""
        return m + sp.burst(self.pool.slots) <= self.ring.capacity

    def poll_into(self, now: float, m: int) -> int:
        """`poll`, appending to ring messages 0..m-1 (`room(m)` must hold); returns the new message count."""
        m, status = sp.poll(self._t, self._f, self.rtt.state, self.window.state, self._rack, self._chunks,
                            self._wire, self._fl_i, self._fl_f, now, self.ring.tx, self.ring.iov, m,
                            self.ring.base, self._stats)
        self._check(status)
        return m

    def _check(self, status: int) -> None:
        if status == sp.STALE_RUN:
            slot = int(self._t[sp.T_STALE_SLOT])
            chunk, version = self._fl_i[slot, sp.I_CHUNK], self._fl_i[slot, sp.I_VERSION]
            what = f"at offset {self._chunks[chunk, 0]}" if chunk >= 0 else "(another worker's chunk)"
            raise StaleSwitchState(stale_message(
                self.job_id, self.worker_id, f"holds slot {self.pool.slot_base + slot} (copy {version}) "
                f"from an earlier run of this job, so it refused phase {self.name!r} {what}"))
        if status == sp.DEADLINE:
            waiting = np.flatnonzero(self._fl_i[:, sp.I_CHUNK] >= 0)
            slot = waiting[np.argmin(self._fl_i[waiting, sp.I_CHUNK])]
            chunk, version = self._fl_i[slot, sp.I_CHUNK], self._fl_i[slot, sp.I_VERSION]
            received = int(self._t[sp.T_RECEIVED])
            raise AggregationTimeout(
                f"job {self.job_id}, worker {self.worker_id}: phase {self.name!r} (tag {self.tag}) got no "
                f"RESULT for offset {self._chunks[chunk, 0]} (slot {self.pool.slot_base + slot}, "
                f"copy {version}) within {self.deadline:g} s; {received}/{self.chunks} chunks done"
                + ("" if received else " (is the job on the switch, and are all its workers running?)"))


class Ring:
    """Where a transfer writes the frames it sends: `capacity` frames of K words, one after another.

    Message m is `tx[m * frame_bytes:]`, and `iov[2 m : 2 m + 2]` holds its (address, length) with
    address `base` + offset: a `sendmmsg` ring when `base` is the buffer's address
    (`hina.wire.mmsg.BatchSocket`'s transmit side), plain offsets when it is 0.
    """

    HEADROOM = 64  # frames beyond what one RESULT may let out (`sendplane.burst`): a batch's usual output

    def __init__(self, words: int, slots: int, *, tx: np.ndarray | None = None, iov: np.ndarray | None = None,
                 base: int = 0):
        self.frame_bytes = self.frame_size(words)
        self.capacity = (self.frames_for(slots) if tx is None
                         else min(len(tx) // self.frame_bytes, len(iov) // 2))
        self.tx = np.zeros(self.capacity * self.frame_bytes, np.uint8) if tx is None else tx
        self.iov = np.zeros(2 * self.capacity, np.uint64) if iov is None else iov
        self.base = base

    @staticmethod
    def frame_size(words: int) -> int:
        """Bytes of every UPDATE of a job with K = `words`: the header and K words."""
        return HEADER_BYTES + 4 * words

    @classmethod
    def frames_for(cls, slots: int) -> int:
        """The frames a ring for W = `slots` holds: whatever one RESULT or one timer may let out
        (`sendplane.burst`), and `HEADROOM` more."""
        return sp.burst(slots) + cls.HEADROOM

    def frames(self, m: int) -> list[bytes]:
        """Messages 0..m-1 as bytes."""
        size = self.frame_bytes
        return [self.tx[i * size : (i + 1) * size].tobytes() for i in range(m)]


_warm = False


def warm() -> None:
    """Compile (or load from the disk cache) the kernels before the first chunk goes: once per process."""
    global _warm
    if _warm:
        return
    _warm = True
    x = PhaseTransfer(job_id=1, worker_id=0, words=2, pool=SlotPool(0, 2), rtt=RttEstimator(),
                      window=CongestionWindow(2), tag=0, op=0, payload=np.zeros(3, np.int32), name="warm",
                      now=0.0, deadline=1.0)
    sent = x.start(0.0)
    x.poll(0.5)
    x.receive(sent[0][:HEADER_BYTES], 0.5)
    rx = np.zeros(4 * HEADER_BYTES, np.uint8)
    lengths = np.zeros(4, np.uint32)[::2]  # strided, as the mmsghdr lengths are
    x.take(rx, HEADER_BYTES, lengths, 0, 1, 0.5)
