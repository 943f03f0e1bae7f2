"""One phase's words through the switch, as a sans-I/O object: frames out, frames in, timers.

The phase's int32 words are cut into chunks of at most K words, each
segment of the round on its own (a chunk never straddles two segments, so
each packet carries one op); chunk c goes to slot c mod W of the job's W
slots, so every worker puts the same chunk in the same slot.  Each slot
alternates between its two copies: the copy is flipped after every RESULT,
for the whole life of the job (`SlotPool`), so consecutive uses of a slot
never meet in one copy.  Chunks go out in order while fewer than the
congestion window are in flight and the chunk's slot is free (chunk c - W
answered); the window (`CongestionWindow`, shared by a worker's transfers,
and its pacer: `congestion.py`) grows by one chunk per window of RESULTs
and halves, once per round trip, on a loss, so a slow switch (BMv2
forwards a few thousand packets a second) is not flooded.

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
sample, to at most 50 ms, 8 least round trips or twice the median of
the last 4), and then only
the oldest such chunk is resent: a peer that is late delays everyone's
RESULTs alike and must not make the whole window go out again.
If nothing progresses for `deadline` seconds the transfer raises `AggregationTimeout`, naming job, phase and offset.  A
RESULT counts only if job, phase tag, slot, copy, offset and count all
match the chunk that slot is waiting for; anything else is ignored and
counted, so stale or duplicated RESULTs can never land in the wrong place.

Layering: the rules run compiled in `sendplane.py` (below: functions of
`now`, frames and records, importing nothing from here), over records
(numpy structured arrays of its dtypes: `records.py`) these objects own;
the window and pacer they tell of RESULTs, losses and timeouts are the
congestion room's (`congestion.py`); `agent.py` (above) drives these
objects with sockets.
`warm()` compiles the rules once per process by driving a tiny transfer.
"""

from __future__ import annotations

import collections
import math
import threading

import numpy as np

from hina import kernels
from hina.wire.headers import HEADER_BYTES

from . import sendplane as sp
from .congestion import CongestionWindow
from .congestion_settings import CongestionSettings
from .records import field, records


class AggregationTimeout(RuntimeError):
    """No progress within the deadline: the switch or another worker is gone."""


class SwitchUnreachable(AggregationTimeout):
    """Nothing listens where the worker sends: every frame of its first exchange came back as ICMP port
    unreachable (a wrong data port, or a switch that is not running)."""


REFUSALS = 5  # port-unreachable answers, with no frame received, that end a worker's first exchange


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

    The timeout is srtt + 4 rttvar, at least `minimum` (the fair-share sender's, `fair()`: srtt +
    max(4 rttvar, srtt / 2), since a queue that stands steady leaves rttvar near 0, and a timeout
    just past srtt fired on every round trip a little longer); an expiry doubles it until the next fresh
    sample; neither goes past `backoff_cap` (50 ms, or 8 least round trips or twice the median
    recent one on a slower path).  A
    switch that is up but loses packets answers the next probe: on a lossy link every doubling
    is a stall, and exponential backoff to seconds made heavy loss take minutes.  What backoff
    protects, a slow or congested switch, is protected by the congestion window and by
    resending one probe chunk per timeout, not the window.

    The state is one record (`state`, a structured array of one `sendplane.RTT`; `state_bytes`, its
    bytes, which the compiled sender takes and updates in place); these methods call the same functions
    on the record (`state[0]`).
    """

    REORDER_DECAY = 8  # loss recoveries without evidence of reordering after which the allowance halves

    def __init__(self, initial: float = 0.1, minimum: float = 0.0, maximum: float = 2.0,
                 backoff_limit: float = 0.0, probe_floor: float = 0.0, rto_srtt: float = 0.0, tick: float = 0.0,
                 path: float | None = None):
        """probe_floor: a silent path's probe goes after max(2 srtt, probe_floor); inf: never (the
        timeout alone).  rto_srtt: the timeout's least margin past srtt, as a share of srtt.  tick: the
        host's timer granularity (`hina.host.clock.tick`; 0 on a virtual clock), under which no timer is set.
        path: the path's round trip as measured before any chunk (`measured`); None: the first chunk's."""
        self.state, self.state_bytes = records(
            sp.RTT, rto=max(initial, tick), srtt=math.nan, min_rtt=math.inf, reorder_scale=1.0, minimum=minimum,
            maximum=maximum, backoff_limit=backoff_limit, decay=self.REORDER_DECAY, probe_floor=probe_floor,
            recent=math.inf, rto_srtt=rto_srtt, tick=tick)
        if path is not None:
            self.measured(path)

    @classmethod
    def fair(cls, **kwargs) -> RttEstimator:
        """The fair-share sender's estimator: half a smoothed round trip of margin (`sendplane.RTO_SRTT`)
        and a cap of 8 s, past the round trips a host's queue can stand (1000 frames of 9 KB at 30
        Mbit/s: 2.4 s); the cap that usually binds is `backoff_cap`'s."""
        return cls(**{"maximum": 8.0, "rto_srtt": sp.RTO_SRTT, **kwargs})

    rto = field("rto")
    rttvar = field("rttvar")
    min_rtt = field("min_rtt")
    minimum = field("minimum")
    maximum = field("maximum")
    backoff_limit = field("backoff_limit")
    reorder_scale = field("reorder_scale", "doubles on evidence that RESULTs reorder, halves without it")
    probe_floor = field("probe_floor", "the least silence before a tail probe")
    tick = field("tick", "the host's timer granularity: no timer is set shorter")

    @property
    def probe_after(self) -> float:
        """How long a silent path waits before a tail probe: 2 srtt, at least `probe_floor` (inf before
        the first round trip)."""
        return float(sp.probe_after(self.state[0]))

    @property
    def srtt(self) -> float | None:
        srtt = float(self.state["srtt"][0])
        return None if math.isnan(srtt) else srtt

    def measured(self, rtt: float) -> None:
        """The path's round trip, measured before any chunk went (the join exchange, with no peer to wait
        for and nothing queued): the first estimate of srtt and the timeout, and the least round trip the
        delay rule measures queueing from, until the chunks' own round trips say otherwise."""
        if not 0 < rtt < math.inf:
            raise ValueError(f"a path's round trip must be a positive number of seconds, got {rtt!r}")
        sp.rtt_sample(self.state[0], rtt)

    def sample(self, rtt: float) -> None:
        """One RTT measured on a chunk sent once (Karn: never on a resent one)."""
        sp.rtt_sample(self.state[0], rtt)

    @property
    def backoff_cap(self) -> float:
        """The longest a timeout may be, backed off or not: `backoff_limit` (or `minimum`, if
        longer), or 8 least round trips on a slower path; at most `maximum`.  Round trips vary
        with other workers' losses (a chunk is answered once the last worker's UPDATE is in),
        which srtt + 4 rttvar would take for the path's.  But never under twice the median of the
        last 4 round trips: a queue that stands (another flow's) lengthens every round trip, and a
        timeout short of them would send every chunk twice; so does a slow switch's queue, which
        fills and drains, its round trips long but for a short one when it ran empty (the least of
        the last 4, which the cap once followed, then fell to a few short round trips and the
        timeout with it, under the queue: a resend every few of them, each one more frame in the
        queue); a chunk a late peer held up lengthens its own round trip only, and srtt, which the
        cap followed before that, ratcheted up on those (each longer sample a longer timeout, each
        timeout a longer stall)."""
        return float(sp.backoff_cap(self.state[0]))

    def backoff(self) -> None:
        """A retransmission timer expired: double the timeout until the next fresh sample."""
        sp.rtt_backoff(self.state[0])

    @property
    def reordering(self) -> float:
        """How much later than a chunk sent after it a RESULT may come before its chunk counts as lost:
        a quarter of srtt (RACK's reo_wnd, RFC 8985 6.2) times the reordering seen, at least 0.1 ms."""
        return float(sp.reordering(self.state[0]))

    def reordered(self) -> None:
        """A chunk resent as overtaken was not lost: its first transmission's answer came after all
        (a switch with pipes answers each pipe's slots in its own time).  Allow twice as much, up
        to two round trips."""
        sp.rtt_reordered(self.state[0])

    def recovered(self) -> None:
        """A chunk was resent as overtaken.  After `REORDER_DECAY` of them with no evidence of
        reordering, the allowance halves: on a lossy path the evidence is sometimes wrong (another
        worker's resend completed the chunk just after ours), and a wide allowance delays every
        recovery (RFC 8985 resets its multiplier after 16 recoveries the same way)."""
        sp.rtt_recovered(self.state[0])


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
    `*_into` methods write them into a `sendmmsg` ring instead, and `step` does all of a received
    batch's work, timers included, in one call (`Worker` with a batching transport).  All run the
    compiled rules in `sendplane`.
    """

    def __init__(self, *, job_id: int, worker_id: int, words: int, pool: SlotPool, rtt: RttEstimator,
                 tag: int, op: int | None = None, payload: np.ndarray, name: str, now: float, deadline: float,
                 ops: tuple[tuple[int, int, int], ...] | None = None, salt: int = 0,
                 window: CongestionWindow | None = None, pipes: int = 1, ring: Ring | None = None,
                 workspace=None):
        """`ops`: (op, start, stop) of each segment of `payload`; or one `op` for all of it.

        salt: added (mod 2^32) to every offset on the wire: the run's identity (`Worker` agrees
        on it in its hello), so that a copy an earlier run left on the switch never matches.
        window: the worker's congestion window; by default all W slots, fixed.
        pipes: the switch's pipes (the emulator's `--pipes`): slot s is answered by pipe s mod pipes,
        in order within each pipe only, so loss detection compares chunks within a pipe.
        ring: where the frames go (a `Ring` of this job's K and W); by default one of its own.
        workspace: where the answers go (`codec.Workspace`, reused across a worker's aggregations: `result` is
        then valid until the next transfer of the same name); by default fresh memory.
        """
        warm()  # kernels compiled from the current rules (once per process)
        self.pipes = max(1, int(pipes))
        self.job_id, self.worker_id, self.words = job_id, worker_id, words
        self.pool, self.rtt = pool, rtt
        # by default a fixed window: all W slots in flight, whatever the round trips say
        self.window = window or CongestionWindow(
            pool.slots, CongestionSettings(fair=False, initial=pool.slots, minimum=pool.slots))
        self.tag, self.name = tag & 0xFFFF, name
        self.deadline = deadline
        self.length = int(payload.size)
        if ops is None:
            ops = ((int(op), 0, self.length),)
        # chunk i: words [offset, offset + count) combined with op, sent at offset + salt (`sendplane.CHUNK`)
        parts = []
        for seg_op, start, stop in ops:
            offsets = np.arange(start, max(stop, start + 1), words, dtype=np.int64)
            part = np.empty(offsets.size, sp.CHUNK)
            part["offset"] = offsets
            part["count"] = np.minimum(words, stop - offsets)
            part["op"] = int(seg_op)
            part["wire_offset"] = (offsets + salt) & 0xFFFFFFFF
            parts.append(part)
        self._chunks = np.concatenate(parts) if parts else np.zeros(0, sp.CHUNK)
        self._chunk_bytes = self._chunks.view(np.uint8)
        self.chunks = len(self._chunks)
        # the words sent, as the codec made them (native int32: a frame gets them byte-swapped to big-endian)
        self._payload = np.ascontiguousarray(payload, dtype=np.int32)
        self._wire = self._payload.view(np.uint8)
        # RESULT words land here, native again (every word of the phase is answered before `result`); from the
        # worker's workspace, one buffer per phase name, so that a step pays no fresh memory
        self._answers = (workspace.buffer(f"answers:{name}", self.length, np.int32) if workspace is not None
                         else np.empty(self.length, np.int32))
        self._answer_bytes = self._answers.view(np.uint8)
        self._result: np.ndarray | None = None
        slots = pool.slots
        # the compiled sender's records (`sendplane`), each with its bytes, which it takes
        self._t, self._t_bytes = records(  # the transfer's scalars
            sp.TRANSFER, chunks=self.chunks, words=words, job=job_id, worker=worker_id, tag=self.tag,
            slot_base=pool.slot_base, slots=slots, pipes=self.pipes, last_progress=now, earliest=math.inf,
            rack_at=math.inf, deadline=deadline, probe_at=math.inf, pace_at=math.inf, probe_seq=-1,
            oldest=math.inf, stuck_slot=sp.NO_SLOT)
        # slot -> the chunk in flight there (-1: none), and the last one answered there
        self._fl, self._fl_bytes = records(sp.SLOT, slots, chunk=-1, version=-1, seq=-1, retries=-1, done_chunk=-1,
                                            done_version=-1, done_retries=-1)
        # RACK, per pipe: the latest transmission answered of a chunk sent once and its round trip,
        # then the same for resent chunks answered late enough; when the pipe last completed a chunk (never yet)
        self._rack, self._rack_bytes = records(sp.RACK, self.pipes, fresh_seq=-1, resent_seq=-1, done_at=-math.inf)
        self._stats, self._stats_bytes = records(sp.STATS)
        self.ring = ring or Ring(words, slots)
        if self.ring.frame_bytes != Ring.frame_size(words) or not self.room(0):
            raise ValueError(f"a ring of {self.ring.capacity} frames of {self.ring.frame_bytes} bytes does not fit "
                             f"{sp.burst(slots)} frames of K = {words} words")

    @property
    def stats(self) -> collections.Counter[str]:
        """frames, bytes, retransmissions (fast_retransmissions, timeouts, probes), spurious_resends, ignored."""
        return collections.Counter({k: v for k, v in zip(sp.STATS.names, self._stats.tolist()[0]) if v})

    @property
    def done(self) -> bool:
        return self._t["received"][0] == self.chunks

    @property
    def result(self) -> np.ndarray:
        """The aggregated words (int32), once `done`."""
        if self._result is None:
            if not self.done:
                answered = self._t["received"][0]
                raise RuntimeError(f"phase {self.name!r}: {answered}/{self.chunks} chunks answered so far")
            self._result = self._answers
        return self._result

    def next_timer(self) -> float:
        """When `poll` has something to do next (a retransmission or the deadline)."""
        return sp.next_timer_bytes(self._t_bytes)

    # -- sans-I/O: frames as bytes ------------------------------------------------------------
    def start(self, now: float) -> list[bytes]:
        """The first window."""
        return self.ring.frames(self.start_into(now))

    def receive(self, frame: bytes, now: float) -> list[bytes]:
        """Take in one frame from the switch; return the frames it lets us send."""
        data = np.frombuffer(frame, np.uint8)
        if not data.flags.writeable:  # bytes: the kernels are compiled for writable frames alone (one variant)
            data = data.copy()
        m, status = sp.receive_bytes(self._t_bytes, self.rtt.state_bytes, self.window.state_bytes, self._rack_bytes,
                                     self.pool.version, self._chunk_bytes, self._wire, self._answer_bytes,
                                     self._fl_bytes, data, 0, data.size, now, self.ring.tx, self.ring.iov, 0,
                                     self.ring.base, self._stats_bytes)
        self._check(status)
        return self.ring.frames(m)

    def poll(self, now: float) -> list[bytes]:
        """Retransmissions that are due; raises AggregationTimeout past the deadline."""
        return self.ring.frames(self.poll_into(now, 0))

    # -- batched: frames into the ring --------------------------------------------------------
    def start_into(self, now: float) -> int:
        """The first window, as ring messages 0..m-1; returns m."""
        return sp.fill_bytes(self._t_bytes, self.rtt.state_bytes, self.window.state_bytes, self.pool.version,
                             self._chunk_bytes, self._wire, self._fl_bytes, now, self.ring.tx, self.ring.iov, 0,
                             self.ring.base, self._stats_bytes)

    def take(self, rx: np.ndarray, entry_bytes: int, lengths: np.ndarray, start: int, n: int, now: float,
             m: int = 0) -> tuple[int, int]:
        """Take in received entries start..n-1 (entry i: `rx[i * entry_bytes:]`, `lengths[i]` bytes)
        while the ring has room; returns (the next entry to take, ring messages so far)."""
        i, m, status = sp.take_bytes(self._t_bytes, self.rtt.state_bytes, self.window.state_bytes, self._rack_bytes,
                                     self.pool.version, self._chunk_bytes, self._wire, self._answer_bytes,
                                     self._fl_bytes, rx, entry_bytes, lengths, start, n, now, self.ring.tx,
                                     self.ring.iov, m, self.ring.base, self.ring.capacity, self._stats_bytes)
        self._check(status)
        return i, m

    def step(self, rx: np.ndarray, entry_bytes: int, lengths: np.ndarray, start: int, n: int, now: float,
             segment: int = 0, limit: int = 0) -> tuple[int, int, int, float]:
        """A received batch's whole work in one compiled call (`sendplane.step`): entries start..n-1 taken, the
        timers run, the frames they let out written into the ring from message 0 (and with `segment`, merged
        into runs of `limit` for segmentation offload).  Returns (the next entry, the ring's messages, the
        status, when `poll` has something to do next): `sendplane.FULL` when the ring filled (send it, then
        step again from that entry), `sendplane.DONE` once every chunk is answered, else `sendplane.OK`;
        raises where a RESULT said the switch holds an earlier run, or a chunk waited past the deadline."""
        i, m, status, timer = sp.step_bytes(
            self._t_bytes, self.rtt.state_bytes, self.window.state_bytes, self._rack_bytes, self.pool.version,
            self._chunk_bytes, self._wire, self._answer_bytes, self._fl_bytes, rx, entry_bytes, lengths, start, n,
            now, self.ring.tx, self.ring.iov, 0, self.ring.base, self.ring.capacity, segment, limit,
            self._stats_bytes)
        if status == sp.STALE_RUN or status == sp.DEADLINE:
            self._check(status)
        return i, m, status, timer

    def room(self, m: int) -> bool:
        """Whether the ring, holding m messages, has room for what one RESULT or one `poll` may let out."""
        return m + sp.burst(self.pool.slots) <= self.ring.capacity

    def poll_into(self, now: float, m: int) -> int:
        """`poll`, appending to ring messages 0..m-1 (`room(m)` must hold); returns the new message count."""
        m, status = sp.poll_bytes(self._t_bytes, self.rtt.state_bytes, self.window.state_bytes, self._rack_bytes,
                                  self.pool.version, self._chunk_bytes, self._wire, self._fl_bytes, now, self.ring.tx,
                                  self.ring.iov, m, self.ring.base, self._stats_bytes)
        self._check(status)
        return m

    def _check(self, status: int) -> None:
        if status == sp.STALE_RUN:
            slot = int(self._t["stale_slot"][0])
            chunk, version = self._fl["chunk"][slot], self._fl["version"][slot]
            what = f"at offset {self._chunks['offset'][chunk]}" if chunk >= 0 else "(another worker's chunk)"
            raise StaleSwitchState(stale_message(
                self.job_id, self.worker_id, f"holds slot {self.pool.slot_base + slot} (copy {version}) "
                f"from an earlier run of this job, so it refused phase {self.name!r} {what}"))
        if status == sp.DEADLINE:
            slot = int(self._t["stuck_slot"][0])
            chunk, version = self._fl["chunk"][slot], self._fl["version"][slot]
            received = int(self._t["received"][0])
            raise AggregationTimeout(
                f"job {self.job_id}, worker {self.worker_id}: phase {self.name!r} (tag {self.tag}) got no "
                f"RESULT for offset {self._chunks['offset'][chunk]} (slot {self.pool.slot_base + slot}, "
                f"copy {version}) within {self.deadline:g} s; {received}/{self.chunks} chunks done"
                + self._why(slot, received))

    def _why(self, slot: int, received: int) -> str:
        """What the switch said of a chunk that waited past the deadline: whose UPDATEs its copy held (a
        PENDING answer), or nothing at all."""
        if self._fl["held"][slot]:
            counted = int(self._fl["counted"][slot])
            ids = [w for w in range(32) if counted >> w & 1]
            return (f"; the switch holds this worker's UPDATE and waits for the others (it had counted "
                    f"worker_id{'s' if len(ids) != 1 else ''} {', '.join(map(str, ids))}: is every worker "
                    f"of the job running?)")
        return "" if received else " (is the job on the switch, and are all its workers running?)"


class Ring:
    """Where a transfer writes the frames it sends: `capacity` frames of K words, one after another.

    Message m is `tx[m * frame_bytes:]`, and `iov[2 m : 2 m + 2]` holds its (address, length) with
    address `base` + offset: a `sendmmsg` ring when `base` is the buffer's address
    (`hina.wire.sockio.BatchSocket`'s transmit side), plain offsets when it is 0.
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
_warming = threading.RLock()  # re-entered by `_drive`'s own transfer; a second thread waits on it


def warm() -> None:
    """Compile (or load from the disk cache) the kernels before the first chunk goes: once per process.
    On a machine that has not compiled them, one process does while any other waits (`hina.kernels`),
    and in a process, one thread while any other waits: a worker in a second thread (the emulator and
    its workers in one process) whose kernels were still compiling would start its limits with them.

    Every `PhaseTransfer` calls it, not only a `Worker`: numba checks a cached kernel against its own
    file alone, so after an edit to `congestion_rules.py` (or `wire/headers.py`) the sender's cached
    kernels still hold the old rules they compiled in; `hina.kernels`' stamp names those files and clears
    the cache, and a simulation or a test would otherwise run the old rules."""
    global _warm
    with _warming:
        if _warm:
            return
        _warm = True  # `_drive`'s own transfer must not warm again
        try:
            kernels.ensure("sender", _drive)
        except BaseException:
            _warm = False
            raise


def _drive() -> None:
    """A tiny transfer through every kernel the sender calls (each compiled, or loaded, as it is called)."""
    x = PhaseTransfer(job_id=1, worker_id=0, words=2, pool=SlotPool(0, 2), rtt=RttEstimator(),
                      window=CongestionWindow(2, CongestionSettings()), tag=0, op=0, payload=np.zeros(3, np.int32),
                      name="warm", now=0.0, deadline=1.0)
    sent = x.start(0.0)
    x.next_timer()
    x.poll(0.5)
    x.receive(sent[0][:HEADER_BYTES], 0.5)
    rx = np.zeros(4 * HEADER_BYTES, np.uint8)
    lengths = np.zeros(4, np.uint32)[::2]  # strided, as the mmsghdr lengths are
    x.take(rx, HEADER_BYTES, lengths, 0, 1, 0.5)
    x.step(rx, HEADER_BYTES, lengths, 0, 1, 0.5, HEADER_BYTES, 2)
