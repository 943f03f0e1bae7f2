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
rule: no RTT samples from resent chunks; on expiry the timeout doubles
until a fresh sample, to at most 50 ms or 8 least round trips), and then
only the oldest such chunk is resent: a peer that is late delays
everyone's RESULTs alike and must not make the whole window go out again.
If nothing progresses for `deadline` seconds the transfer raises `AggregationTimeout`, naming job, phase and offset.  A
RESULT counts only if job, phase tag, slot, copy, offset and count all
match the chunk that slot is waiting for; anything else is ignored and
counted, so stale or duplicated RESULTs can never land in the wrong place.
"""

from __future__ import annotations

import collections
import dataclasses
import math

import numpy as np

from switch_emulator.headers import HEADER_BYTES, VERSION_BIT, Flags, MsgType, pack_header, unpack_header

_UPDATE, _RESULT, _STALE_RUN = int(MsgType.UPDATE), int(MsgType.RESULT), int(Flags.STALE_RUN)


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


class RttEstimator:
    """Smoothed RTT and retransmission timeout (RFC 6298), shared by a worker's transfers.

    The timeout is srtt + 4 rttvar, at least `minimum`; an expiry doubles it until the next fresh
    sample; neither goes past `backoff_cap` (50 ms, or 8 least round trips on a slower path).  A
    switch that is up but loses packets answers the next probe: on a lossy link every doubling
    is a stall, and exponential backoff to seconds made heavy loss take minutes.  What backoff
    protects, a slow or congested switch, is protected by the congestion window and by
    resending one probe chunk per timeout, not the window.
    """

    REORDER_DECAY = 8  # loss recoveries without evidence of reordering after which the allowance halves

    def __init__(self, initial: float = 0.1, minimum: float = 0.02, maximum: float = 2.0,
                 backoff_limit: float = 0.05):
        self.rto = initial
        self.minimum, self.maximum, self.backoff_limit = minimum, maximum, backoff_limit
        self.srtt: float | None = None
        self.rttvar = 0.0
        self.min_rtt = math.inf
        self.reorder_scale = 1.0  # doubles on evidence that RESULTs reorder, halves without it
        self._recoveries = 0  # loss recoveries since the last evidence of reordering

    def sample(self, rtt: float) -> None:
        """One RTT measured on a chunk sent once (Karn: never on a resent one)."""
        if self.srtt is None:
            self.srtt, self.rttvar = rtt, rtt / 2
        else:
            self.rttvar = 0.75 * self.rttvar + 0.25 * abs(self.srtt - rtt)
            self.srtt = 0.875 * self.srtt + 0.125 * rtt
        self.min_rtt = min(self.min_rtt, rtt)
        self.rto = min(self.backoff_cap, max(self.minimum, self.srtt + 4 * self.rttvar))

    @property
    def backoff_cap(self) -> float:
        """The longest a timeout may be, backed off or not: `backoff_limit` (or `minimum`, if
        longer), or 8 least round trips on a slower path; at most `maximum`.  Round trips vary
        with other workers' losses (a chunk is answered once the last worker's UPDATE is in),
        which srtt + 4 rttvar would take for the path's."""
        return min(self.maximum, max(self.backoff_limit, self.minimum, 8 * self.min_rtt))

    def backoff(self) -> None:
        """A retransmission timer expired: double the timeout until the next fresh sample."""
        self.rto = min(self.backoff_cap, 2 * self.rto)

    @property
    def reordering(self) -> float:
        """How much later than a chunk sent after it a RESULT may come before its chunk counts as lost:
        a quarter of srtt (RACK's reo_wnd, RFC 8985 6.2) times the reordering seen, at least 0.1 ms."""
        return max(1e-4, self.reorder_scale * (self.srtt or 0.0) / 4)

    def reordered(self) -> None:
        """A chunk resent as overtaken was not lost: its first transmission's answer came after all
        (a switch with pipes answers each pipe's slots in its own time).  Allow twice as much, up
        to two round trips."""
        self.reorder_scale = min(8.0, 2 * self.reorder_scale)
        self._recoveries = 0

    def recovered(self) -> None:
        """A chunk was resent as overtaken.  After `REORDER_DECAY` of them with no evidence of
        reordering, the allowance halves: on a lossy path the evidence is sometimes wrong (another
        worker's resend completed the chunk just after ours), and a wide allowance delays every
        recovery (RFC 8985 resets its multiplier after 16 recoveries the same way)."""
        self._recoveries += 1
        if self._recoveries >= self.REORDER_DECAY:
            self._recoveries = 0
            self.reorder_scale = max(1.0, self.reorder_scale / 2)


class CongestionWindow:
    """How many chunks a worker keeps in flight, at most its job's W slots; shared by its transfers.

    Slow start from `initial` (one more chunk per RESULT) up to `ssthresh`, then one more chunk
    per window of RESULTs; a loss halves the window, at most once per round trip (losses of chunks
    sent before the last cut are the same congestion event).

    Whether a queue is building is read from the least of the last `SAMPLES` round trips, not
    from one: a queue that stands delays every packet, while a busy host's scheduler delays one
    now and then (on 2 shared cores, single samples 5 ms over the least are common and said
    nothing about the switch).  Few samples, so that a filling queue still stops the window
    before it overflows.
    """

    QUEUE_DELAY = 5e-3  # queueing the window may add before it stops growing
    SAMPLES = 3  # round trips whose least says whether a queue stands

    def __init__(self, limit: int, initial: int = 16, minimum: int = 2):
        self.limit, self.minimum = limit, min(minimum, limit)
        self.cwnd = float(max(self.minimum, min(initial, limit)))
        self.ssthresh = float(limit)
        self.cut_at = -math.inf  # when the window was last cut
        self.recent_rtt: float | None = None  # the least of the last SAMPLES round trips
        self._samples: collections.deque[float] = collections.deque(maxlen=self.SAMPLES)
        self.cuts = 0

    @property
    def chunks(self) -> int:
        return int(self.cwnd)

    def queueing(self, rtt: float | None, min_rtt: float) -> bool:
        """Whether a round trip says a queue is building: `QUEUE_DELAY` (or the least RTT) over the least."""
        return rtt is not None and rtt > min_rtt + max(self.QUEUE_DELAY, min_rtt)

    def on_result(self, rtt: float | None = None, min_rtt: float = math.inf) -> None:
        """A RESULT came; `rtt`: its round trip if its chunk went once, `min_rtt`: the least seen.

        The window grows only while the recent round trips stay near the least: past that the
        switch's queue is filling, and a full queue drops (a drop-tail BMv2 switch)."""
        if rtt is not None:
            self._samples.append(rtt)
            self.recent_rtt = min(self._samples)
        if self.queueing(self.recent_rtt, min_rtt):
            return
        self.cwnd = min(self.limit, self.cwnd + (1.0 if self.cwnd < self.ssthresh else 1.0 / self.cwnd))

    def on_loss(self, sent_at: float, now: float, min_rtt: float = 0.0) -> None:
        """The chunk sent at `sent_at` was lost (or timed out) at `now`.

        A loss while round trips show no queue is the link's, not congestion (the window is not
        what caused it, and halving it would only slow a lossy path down): the window stays."""
        if sent_at <= self.cut_at or not self.queueing(self.recent_rtt, min_rtt):
            return
        self.ssthresh = self.cwnd = max(float(self.minimum), self.cwnd / 2)
        self.cut_at = now
        self.cuts += 1


class SlotPool:
    """Which copy each of the job's slots uses next; lives as long as the worker's job."""

    def __init__(self, slot_base: int, slots: int):
        self.slot_base = slot_base
        self.version = [0] * slots

    @property
    def slots(self) -> int:
        return len(self.version)


@dataclasses.dataclass(slots=True)
class _Chunk:
    index: int
    version: int
    sent_at: float  # its latest transmission
    rto: float  # its own timeout (doubles with each timeout)
    due_at: float  # when its timeout expires
    seq: int  # the transfer's count of transmissions at its latest one
    retries: int = 0
    suppressed: bool = False  # due during a stall, not resent: restarts its timer on progress
    overtaken: bool = False  # resent because a later-sent chunk was answered first


class PhaseTransfer:
    """Aggregate one phase's words (int32) with `op` through the switch's slots."""

    def __init__(self, *, job_id: int, worker_id: int, words: int, pool: SlotPool, rtt: RttEstimator,
                 tag: int, op: int | None = None, payload: np.ndarray, name: str, now: float, deadline: float,
                 ops: tuple[tuple[int, int, int], ...] | None = None, salt: int = 0,
                 window: CongestionWindow | None = None, pipes: int = 1):
        """`ops`: (op, start, stop) of each segment of `payload`; or one `op` for all of it.

        salt: added (mod 2^32) to every offset on the wire: the run's identity (`Worker` agrees
        on it in its hello), so that a copy an earlier run left on the switch never matches.
        window: the worker's congestion window; by default all W slots, fixed.
        pipes: the switch's pipes (the emulator's `--pipes`): slot s is answered by pipe s mod pipes,
        in order within each pipe only, so loss detection compares chunks within a pipe.
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
        # chunk i: words [offset, offset + count) combined with op
        self._offset, self._count, self._op = [], [], []
        for seg_op, start, stop in ops:
            for offset in range(start, max(stop, start + 1), words):
                self._offset.append(offset)
                self._count.append(min(words, stop - offset))
                self._op.append(int(seg_op))
        self.chunks = len(self._offset)
        self._wire_offset = [(offset + salt) & 0xFFFFFFFF for offset in self._offset]
        wire = np.zeros(self.length + words, dtype=">i4")  # a last chunk reads K words
        wire[: self.length] = payload
        self._wire = memoryview(wire.view(np.uint8))
        # RESULT words land here as they came (big-endian), one byte copy each; `result` converts once
        self._answers = np.zeros(self.length, dtype=">i4")
        self._answer_bytes = memoryview(self._answers.view(np.uint8))
        self._result: np.ndarray | None = None
        # slot index (0..W-1) -> chunk in flight, in the order of their latest transmissions
        self._flight: collections.OrderedDict[int, _Chunk] = collections.OrderedDict()
        self._next = 0  # the next chunk never sent
        self._received = 0
        self._last_progress = now
        self._earliest = math.inf  # the earliest retransmission timeout
        self._seq = 0  # transmissions so far
        # RACK, per pipe (one unless the switch has pipes): the latest transmission answered of a
        # chunk sent once and its round trip, then the same for resent chunks answered late enough
        self._rack = [[-1, 0.0, -1, 0.0] for _ in range(self.pipes)]
        self._rack_at = math.inf  # when the next chunk the answers overtook counts as lost
        self._heard = False  # a RESULT arrived since the last timeout
        self._probing = False  # a timeout's probe went out, and no chunk sent once was answered since
        self.stats: collections.Counter[str] = collections.Counter()

    @property
    def done(self) -> bool:
        return self._received == self.chunks

    @property
    def result(self) -> np.ndarray:
        """The aggregated words (int32), once `done`."""
        if self._result is None:
            if not self.done:
                raise RuntimeError(f"phase {self.name!r}: {self._received}/{self.chunks} chunks answered so far")
            self._result = self._answers.astype(np.int32)
        return self._result

    def start(self, now: float) -> list[bytes]:
        """The first window."""
        return self._fill(now)

    def receive(self, frame: bytes, now: float) -> list[bytes]:
        """Take in one frame from the switch; return the frames it lets us send."""
        if len(frame) < HEADER_BYTES:
            self.stats["ignored"] += 1
            return []
        msg_type, _op, job_id, _wid, flags, pool_index, offset, count, phase = unpack_header(frame)
        slot = (pool_index & (VERSION_BIT - 1)) - self.pool.slot_base
        chunk = self._flight.get(slot)
        if (msg_type != _RESULT or job_id != self.job_id or phase != self.tag or chunk is None
                or chunk.version != pool_index >> 15 or offset != self._wire_offset[chunk.index]
                or count != self._count[chunk.index] or len(frame) < HEADER_BYTES + 4 * count):
            self.stats["ignored"] += 1
            return []
        if flags & _STALE_RUN:
            raise StaleSwitchState(stale_message(
                self.job_id, self.worker_id, f"holds slot {self.pool.slot_base + slot} (copy {chunk.version}) "
                f"from an earlier run of this job, so it refused phase {self.name!r} at offset "
                f"{self._offset[chunk.index]}"))
        offset = self._offset[chunk.index]
        self._answer_bytes[4 * offset : 4 * (offset + count)] = frame[HEADER_BYTES : HEADER_BYTES + 4 * count]
        rtt = now - chunk.sent_at
        if chunk.overtaken and rtt < self.rtt.min_rtt / 2:
            # answered sooner after its resend than half the least round trip: this answers the
            # first transmission, which was late, not lost
            self.rtt.reordered()
            self.stats["spurious_resends"] += 1
        rack = self._rack[(self.pool.slot_base + slot) % self.pipes]
        if chunk.retries == 0:  # Karn: a resent chunk's answer may answer either transmission
            self.rtt.sample(rtt)
            self._probing = False  # chunks sent once are answered again: the flow is back
            if chunk.seq > rack[0]:
                rack[0], rack[1] = chunk.seq, rtt
        elif rtt >= self.rtt.min_rtt:
            # a resent chunk's answer, too late to answer its first transmission: among resent
            # chunks it says which were lost again (during a stall nothing else is sent to say it)
            if chunk.seq > rack[2]:
                rack[2], rack[3] = chunk.seq, rtt
        self.window.on_result(rtt if chunk.retries == 0 else None, self.rtt.min_rtt)
        self._received += 1
        self._last_progress = now
        if not self._heard:
            self._heard = True
            for waiting in self._flight.values():
                if waiting.suppressed:  # progress again: a full timeout before anyone resends them
                    waiting.suppressed = False
                    waiting.rto = self.rtt.rto
                    waiting.due_at = now + waiting.rto
                    self._earliest = min(self._earliest, waiting.due_at)
        self.pool.version[slot] ^= 1
        del self._flight[slot]
        out = self._overtaken(now)
        out += self._fill(now)
        return out

    def poll(self, now: float) -> list[bytes]:
        """Retransmissions that are due; raises AggregationTimeout past the deadline."""
        if self.done:
            return []
        if now - self._last_progress >= self.deadline:
            oldest = min(self._flight.values(), key=lambda c: c.index)
            raise AggregationTimeout(
                f"job {self.job_id}, worker {self.worker_id}: phase {self.name!r} (tag {self.tag}) got no "
                f"RESULT for offset {self._offset[oldest.index]} (slot {self.pool.slot_base + oldest.index % self.pool.slots}, "
                f"copy {oldest.version}) within {self.deadline:g} s; {self._received}/{self.chunks} chunks done"
                + ("" if self._received else " (is the job on the switch, and are all its workers running?)"))
        out = self._overtaken(now) if now >= self._rack_at else []
        if now >= self._earliest:
            due = [c for c in self._flight.values() if now >= c.due_at]
            if due and self._probing and self._heard:
                # The last probe was answered, and these waited a full timeout after that progress
                # without being overtaken: the tail of the phase was lost.  All of it goes again.
                for chunk in due:
                    self.window.on_loss(chunk.sent_at, now, self.rtt.min_rtt)
                    chunk.rto = min(2 * chunk.rto, self.rtt.backoff_cap)
                    out.append(self._resend(chunk, now))
                self.stats["timeouts"] += 1
                self._heard = False
            elif due:
                # Nothing overtook these: a tail, a late peer or a stalled path.  Resend the oldest
                # only and back off; the rest wait, backing off alike, until a RESULT shows progress.
                probe = min(due, key=lambda c: c.index)
                for chunk in due:
                    if chunk is not probe:
                        chunk.rto = min(2 * chunk.rto, self.rtt.backoff_cap)
                        chunk.due_at = now + chunk.rto
                        chunk.suppressed = True
                self.window.on_loss(probe.sent_at, now, self.rtt.min_rtt)
                self.rtt.backoff()
                self.stats["timeouts"] += 1
                probe.rto = min(2 * probe.rto, self.rtt.backoff_cap)
                out.append(self._resend(probe, now))
                self._heard = False
                self._probing = True
            self._earliest = min((c.due_at for c in self._flight.values()), default=math.inf)
        return out

    def next_timer(self) -> float:
        """When `poll` has something to do next (a retransmission or the deadline)."""
        return min(self._earliest, self._rack_at, self._last_progress + self.deadline)

    # -- internals --------------------------------------------------------------
    def _fill(self, now: float) -> list[bytes]:
        """Send the next chunks while the window has room and their slots are free."""
        out = []
        room = self.window.chunks - len(self._flight)
        while room > 0 and self._next < self.chunks:
            slot = self._next % self.pool.slots
            if slot in self._flight:  # chunk next - W still waits: in order, as every worker sends
                break
            chunk = _Chunk(self._next, self.pool.version[slot], now, self.rtt.rto, now + self.rtt.rto, self._seq)
            self._seq += 1
            self._flight[slot] = chunk
            self._earliest = min(self._earliest, chunk.due_at)
            out.append(self._frame(chunk))
            self._next += 1
            room -= 1
        return out

    def _overtaken(self, now: float) -> list[bytes]:
        """RACK: resend the chunks that a later-sent, answered chunk overtook by more than the allowance.

        With pipes, each pipe answers its own slots in order but not in step with the others: a
        chunk is compared only with chunks of its own pipe (slot mod pipes)."""
        self._rack_at = math.inf
        single = self.pipes == 1
        if single:
            fresh_seq, fresh_rtt, resent_seq, resent_rtt = self._rack[0]
            last = max(fresh_seq, resent_seq)
            if last < 0:
                return []
        reordering = self.rtt.reordering
        lost = []
        for chunk in self._flight.values():  # oldest transmission first
            if single:
                if chunk.seq >= last:
                    break
            else:
                fresh_seq, fresh_rtt, resent_seq, resent_rtt = \
                    self._rack[(self.pool.slot_base + chunk.index % self.pool.slots) % self.pipes]
            if chunk.seq < fresh_seq:
                due = chunk.sent_at + fresh_rtt + reordering
                if now < due:
                    self._rack_at = min(self._rack_at, due)
                    if single and chunk.retries == 0:
                        break  # every later transmission is due later
                    continue
            elif chunk.retries and chunk.seq < resent_seq:
                due = chunk.sent_at + resent_rtt + reordering
                if now < due:
                    self._rack_at = min(self._rack_at, due)
                    continue
            else:
                continue
            lost.append(chunk)
        out = []
        for chunk in lost:
            self.window.on_loss(chunk.sent_at, now, self.rtt.min_rtt)
            chunk.overtaken = True
            self.rtt.recovered()
            self.stats["fast_retransmissions"] += 1
            out.append(self._resend(chunk, now))
        return out

    def _resend(self, chunk: _Chunk, now: float) -> bytes:
        chunk.retries += 1
        chunk.sent_at = now
        chunk.due_at = now + chunk.rto
        chunk.seq, self._seq = self._seq, self._seq + 1
        chunk.suppressed = False
        self._flight.move_to_end(chunk.index % self.pool.slots)
        self._earliest = min(self._earliest, chunk.due_at)
        self.stats["retransmissions"] += 1
        return self._frame(chunk)

    def _frame(self, chunk: _Chunk) -> bytes:
        slot = chunk.index % self.pool.slots
        pool_index = (chunk.version << 15) | (self.pool.slot_base + slot)
        offset = self._offset[chunk.index]
        header = pack_header(_UPDATE, self._op[chunk.index], self.job_id, self.worker_id, 0, pool_index,
                             self._wire_offset[chunk.index], self._count[chunk.index], self.tag)
        start = offset * 4
        frame = header + self._wire[start : start + self.words * 4]
        self.stats["frames"] += 1
        self.stats["bytes"] += len(frame)
        return frame
