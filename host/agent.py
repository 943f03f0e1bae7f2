"""A worker agent: run the codec's phases through the switch over a transport.

    worker = Worker(transport, JobSpec(job_id=1), worker_id=0)
    result = worker.aggregate(params, grad)    # a codec.WorkerResult, exact or an exception

The codec's `WorkerSession` refuses bad input (NaN, wrong length or dtype)
before anything is sent and checks that all workers share the job's
parameters before any gradient data is sent; `PhaseTransfer` moves each
phase through the switch; this module is the small loop that connects them
to a transport and a clock.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
import math
import os
import secrets
import select
import time

import numpy as np

from hina import codec
from hina.codec import CodecParams, WorkerResult
from hina.codec.ops import Op
from hina.wire.headers import MAX_WORKERS

from . import clock
from . import sendplane as sp
from .congestion import CongestionWindow
from .congestion_settings import CongestionSettings
from .job import JobSpec
from .window import (
    REFUSALS,
    AggregationTimeout,
    PhaseTransfer,
    Ring,
    RttEstimator,
    SlotPool,
    StaleSwitchState,
    SwitchUnreachable,
    stale_message,
    warm,
)

HELLO_TAG = 0xFFFF  # the phase tag of a worker's first transfer, before the run has its identity
# Worker.profile's keys that moving frames spends (the rest of an aggregation's CPU time is the codec's): in the
# compiled rules (the window, the frames written into the ring), the system calls that send and receive,
# waiting for a frame or a timer, and the frame-at-a-time path's Python.  CPU seconds of the worker's thread
# (time.thread_time): a worker descheduled on a busy machine is not charged for the wait
MOVING = ("rules", "send", "recv", "wait", "other")

QUIET = 1.0  # seconds of a first exchange unanswered before `Worker.silence` is asked (and again after as many)

__all__ = ["AggregationTimeout", "NotTheDataPort", "StaleSwitchState", "SwitchUnreachable", "Worker"]


class NotTheDataPort(SwitchUnreachable):
    """The worker sends to something that is not the switch's data port: a control port answered its first
    frames in JSON, or (`Worker.silence`, asking the control port) the switch never counted them."""


class FirstExchange:
    """What a worker watches in its first exchange (the hello), where a wrong address shows long before the
    deadline: ICMP port unreachable and nothing else (nothing listens there), a datagram in JSON (a control port
    answered), or the hello unanswered for `quiet` seconds, when `silence(seconds, heard)` is asked (`heard`: the
    datagrams that came, such as the switch's PENDING answers while it waits for the other workers), and again
    every `quiet` seconds while it stays unanswered (it may look elsewhere, the control port, and raise)."""

    def __init__(self, counts, xfer: PhaseTransfer, now: float, quiet: float, silence=None):
        self.counts = counts  # a transport or batch socket: `refused`, `received` (a raw transport has neither)
        self.xfer = xfer
        self.started = now
        self.quiet, self.silence = quiet, silence
        self.ask = now + quiet
        self.datagrams = 0

    def heard(self, datagram) -> None:
        """A datagram came: a switch's frame, unless it is a control port's JSON reply (its first byte, "{",
        is no hina message type)."""
        self.datagrams += 1
        if datagram[:1] != b"{":
            return
        try:
            reply = json.loads(bytes(datagram))
        except ValueError:
            return
        if isinstance(reply, dict) and "ok" in reply:
            raise NotTheDataPort(f"job {self.xfer.job_id}, worker {self.xfer.worker_id}: its first frames were "
                                 f"answered in JSON: that is a control port, not the switch's data port")

    def heard_batch(self, rx: np.ndarray, lengths: np.ndarray, entry_bytes: int, n: int) -> None:
        for i in range(n):
            at = i * entry_bytes
            self.heard(rx[at : at + int(lengths[i])].tobytes())

    def check(self, now: float) -> None:
        """Raise SwitchUnreachable once REFUSALS port-unreachable answers came and not one frame; ask `silence`
        each `quiet` seconds while the hello is unanswered."""
        counts = self.counts
        if getattr(counts, "refused", 0) >= REFUSALS and getattr(counts, "received", 1) == 0:
            raise SwitchUnreachable(f"job {self.xfer.job_id}, worker {self.xfer.worker_id}: nothing listens where "
                                    f"this worker sends (its {counts.refused} tries came back port unreachable): is "
                                    f"it the switch's data port, and is the switch running?")
        if self.silence is not None and now >= self.ask:
            self.ask = now + self.quiet
            self.silence(now - self.started, self.datagrams)

    def timed_out(self, exc: AggregationTimeout) -> AggregationTimeout:
        """The deadline's exception, naming the address's silence where not one datagram came back."""
        if self.datagrams:
            return exc
        return SwitchUnreachable(f"{exc}; not one datagram came back in {self.xfer.deadline:g} s: is it the "
                                 f"switch's data port?")


def profiling() -> bool:
    """Whether this process keeps a profile of where its time goes ($HINA_PROFILE=1)."""
    return os.environ.get("HINA_PROFILE") == "1"


def _no_clock() -> float:
    return 0.0


def load_kernels() -> None:
    """The codec's and the sender's compiled kernels in this process, before anything is timed: from
    this machine's cache, or compiled by one process while any other waits (`hina.kernels`)."""
    from hina.codec import kernels as _  # noqa: F401 - the codec's kernels compile as their modules load

    warm()

class Worker:
    """One rank of a job; keeps its slot copies and RTT estimate across aggregations."""

    def __init__(self, transport, job: JobSpec, worker_id: int, *, deadline: float = 10.0,
                 rtt: RttEstimator | None = None, pipes: int = 1, batch: bool = True,
                 congestion: CongestionSettings = CongestionSettings(), path_rtt: float | None = None):
        """pipes: the switch's pipes (what `ControlClient.join` returns on the emulator; 1 for BMv2):
        RESULTs are in order only within a pipe, and loss detection has to know.
        batch: move frames by the batch (recvmmsg / sendmmsg) where the transport offers it
        (`UdpTransport.batcher`); False: one `transport.send` / `recv` call per frame.
        congestion: the congestion window's and pacer's settings (`CongestionSettings`: by default the
        fair-share rules, unpaced); with the fair-share rules the RTT estimate is `RttEstimator.fair()`.
        path_rtt: the path's round trip as the join exchange measured it (`ControlClient.round_trip`): the first
        timers start from it instead of from the hello's round trip, which holds the wait for the last worker."""
        if not 0 <= worker_id < 32:
            raise ValueError(f"worker_id must be 0..31, got {worker_id}")
        self.transport = transport
        self.job = job
        self.worker_id = worker_id
        self.deadline = deadline
        self.pipes = pipes
        self.pool = SlotPool(job.first_slot, job.slots)
        # no timer shorter than this host wakes a waiting thread (`clock.tick`)
        tick = clock.tick()
        measured = path_rtt if path_rtt is not None and 0 < path_rtt < math.inf else None  # inf: none answered first
        self.rtt = rtt or (RttEstimator.fair if congestion.fair else RttEstimator)(tick=tick, path=measured)
        # chunks in flight: adapts to loss, at most W; and when new ones may leave
        self.window = CongestionWindow(job.slots, congestion)
        self._tag = 0
        self._salt: int | None = None  # the run's identity, from the hello
        # asked with the seconds its hello went unanswered (and the datagrams that came), every `quiet` seconds:
        # a caller that knows more (`hina worker` asks the control port) may raise there, long before the deadline
        self.silence = None
        self.quiet = QUIET
        self.workspace = codec.Workspace()  # the codec's buffers, reused across aggregations
        self.stats: collections.Counter[str] = collections.Counter()
        # CPU seconds by where they went (MOVING, codec), where $HINA_PROFILE is 1 (benchmarks/budget.py): a
        # clock read costs a system call, so a worker that is not asked reads none
        self.profile: collections.Counter[str] = collections.Counter()
        self._clock = time.thread_time if profiling() else _no_clock
        self.phase_seconds: dict[str, float] = {}
        # batched I/O where the transport has it: RESULTs in by the batch, the frames they let out
        # written by the compiled sender straight into the sendmmsg ring
        batcher = getattr(transport, "batcher", None) if batch else None
        self.batch_io = batcher(Ring.frame_size(job.words), Ring.frames_for(job.slots)) if batcher else None
        if self.batch_io is not None and pipes > 1:
            # a switch with pipes steers each datagram to its slot's pipe, by its first bytes: a super-frame of
            # several slots' chunks would reach one pipe whole; so frame by frame
            self.batch_io.segment = 0
        self._ring = (Ring(job.words, job.slots, tx=self.batch_io.tx_array, iov=self.batch_io.tx_iov,
                           base=self.batch_io.tx_address) if self.batch_io else Ring(job.words, job.slots))
        warm()

    def prepare(self, params: CodecParams, grad: np.ndarray | None = None, *, hello: bool = True) -> None:
        """What a first aggregation would otherwise spend before its first frame, done now: the codec's
        compiled kernels loaded for this job's dtype and mode (from numba's disk cache: about 0.7 s in a
        fresh process), the workspace's buffers for its length touched (`grad`, or zeros), and with `hello`
        the run's identity agreed with the other workers (which must prepare too).  So a job's first
        round costs what its later rounds do."""
        solo = dataclasses.replace(params, workers=1)  # one worker: the switch would hand back its own words
        grad = np.zeros(params.length, dtype=params.dtype) if grad is None else grad
        session = codec.WorkerSession(solo, grad, who=f"worker {self.worker_id}'s gradient", workspace=self.workspace)
        while (phase := session.next_phase()) is not None:
            # the phase's answers, where a transfer will put them: touched now, not in the first step
            self.workspace.buffer(f"answers:{phase.name}", phase.words.size, np.int32).fill(0)
            session.receive(phase.words)
        if hello:
            self.hello()

    def aggregate(self, params: CodecParams, grad: np.ndarray, *, out: np.ndarray | None = None) -> WorkerResult:
        """Sum `grad` with the other workers' through the switch; every round, retransmitting on loss.

        out: an int32 buffer of the gradient's size for the fixed-point sum (reuse it across steps).
        """
        clock = self._clock
        began = clock()
        moving = sum(self.profile[k] for k in MOVING)
        if out is None and isinstance(grad, np.ndarray):
            # the sum in memory of its own: the phases' answers live in the workspace, reused next time (a
            # tensor's sum is copied off them by the torch kernels anyway)
            out = np.empty(params.length, np.int32)
        session = codec.WorkerSession(params, grad, who=f"worker {self.worker_id}'s gradient", out=out,
                                      workspace=self.workspace)
        self.phase_seconds = {}
        while (phase := session.next_phase()) is not None:
            start = time.monotonic()
            aggregate = self.transfer(phase.name, phase.ops, phase.words)
            self.phase_seconds[phase.name] = self.phase_seconds.get(phase.name, 0.0) + time.monotonic() - start
            session.receive(aggregate)
        result = session.result()
        # the codec's share: the aggregation's time that moving frames did not take
        self.profile["codec"] += clock() - began - (sum(self.profile[k] for k in MOVING) - moving)
        return result

    def hello(self) -> int:
        """Agree on this run's identity with the other workers; once per Worker, before its first transfer.

        Every worker ORs a fresh random 64-bit nonce into its own two words of 2 x 32; the result,
        the same at every worker, names the run: a 32-bit salt added to every offset on the wire and
        the first phase tag.  A switch still holding an earlier run's slot copies can then never
        match this run's chunks (it refuses them, flag STALE_RUN); and a hello answered from an
        earlier run's copy lacks our nonce and is refused here, never taken.
        """
        if self._salt is None:
            nonce = np.frombuffer(secrets.token_bytes(8), dtype=np.int32)
            words = np.zeros(2 * MAX_WORKERS, dtype=np.int32)
            words[2 * self.worker_id : 2 * self.worker_id + 2] = nonce
            agreed = self._transfer("hello", ((int(Op.OR), 0, words.size),), words, HELLO_TAG, 0)
            if not np.array_equal(agreed[2 * self.worker_id : 2 * self.worker_id + 2], nonce):
                raise StaleSwitchState(stale_message(
                    self.job.job_id, self.worker_id, "answered this worker's hello with an earlier run's"))
            run = hashlib.blake2b(agreed.tobytes(), digest_size=6).digest()
            self._salt = int.from_bytes(run[:4], "big")
            self._tag = int.from_bytes(run[4:], "big")
        return self._salt

    def transfer(self, name: str, ops, words: np.ndarray) -> np.ndarray:
        """Aggregate one array of int32 words across the job's workers.

        ops: one op for all words, or (op, start, stop) per segment.
        """
        salt = self.hello()
        if isinstance(ops, int):
            ops = ((ops, 0, words.size),)
        tag, self._tag = self._tag, (self._tag + 1) & 0xFFFF
        return self._transfer(name, ops, words, tag, salt)

    def _transfer(self, name: str, ops, words: np.ndarray, tag: int, salt: int) -> np.ndarray:
        now = time.monotonic()
        xfer = PhaseTransfer(job_id=self.job.job_id, worker_id=self.worker_id, words=self.job.words,
                             pool=self.pool, rtt=self.rtt, tag=tag, ops=ops, payload=words,
                             name=name, now=now, deadline=self.deadline, salt=salt, window=self.window,
                             pipes=self.pipes, ring=self._ring, workspace=self.workspace)
        # on the first exchange, a wrong address shows at once, not at the deadline
        first = (FirstExchange(self.batch_io if self.batch_io is not None else self.transport, xfer, now, self.quiet,
                               self.silence) if self._salt is None else None)
        try:
            return self._move(xfer, now, first)
        except AggregationTimeout as exc:
            if first is None or isinstance(exc, SwitchUnreachable):
                raise
            raise first.timed_out(exc) from None

    def _move(self, xfer: PhaseTransfer, now: float, first: FirstExchange | None) -> np.ndarray:
        """The transfer's frames, in and out, until it is done: by the batch where the transport has it."""
        if self.batch_io is not None:
            try:
                self._batched(xfer, self.batch_io, first, self.profile, self._clock)
            finally:
                self.stats.update(xfer.stats)
            return xfer.result
        send, recv = self.transport.send, self.transport.recv
        clock, profile = self._clock, self.profile
        try:
            t = clock()
            for frame in xfer.start(now):
                send(frame)
            profile["other"] += clock() - t
            while not xfer.done:
                t = clock()
                frame = recv(xfer.next_timer() - time.monotonic())
                now = time.monotonic()
                if first is not None:
                    if frame is not None:
                        first.heard(frame)
                    first.check(now)
                t1 = clock()
                profile["recv"] += t1 - t  # waiting included: the frame-at-a-time path cannot tell them apart
                if frame is not None:
                    for out in xfer.receive(frame, now):
                        send(out)
                for out in xfer.poll(now):
                    send(out)
                profile["other"] += clock() - t1
        finally:
            self.stats.update(xfer.stats)
        return xfer.result

    @staticmethod
    def _batched(xfer: PhaseTransfer, io, first: FirstExchange | None = None, profile=None, clock=_no_clock) -> None:
        """The transfer's loop on a `BatchSocket`: each recvmmsg's RESULTs and the timers in one compiled call
        (`PhaseTransfer.step`), whatever they let out sent with one sendmmsg (merged for segmentation offload
        in the same call): Python's part of a batch is three calls, whatever the batch holds.  Once a
        receive has emptied the socket the loop waits for the next datagram (or the next timer) in select
        before it reads again, rather than trying an empty read first: a wake-up costs two system calls, not
        three.  `profile` sums the CPU seconds spent receiving, waiting, in the compiled rules and sending
        (`Worker.profile`) as `clock` tells them."""
        rx, lengths, entry_bytes, entries, fd = io.rx_array, io.rx_lengths, io.entry_bytes, io.entries, io.fd
        segment, limit = io.segment, io.segments
        spent = profile if profile is not None else collections.Counter()
        send, step = io.send, xfer.step
        t = clock()
        m = xfer.start_into(time.monotonic())
        t1 = clock()
        spent["rules"] += t1 - t
        if m:
            send(m)
        timer = xfer.next_timer()
        status = sp.DONE if xfer.done else sp.OK
        drained = True  # nothing came yet: wait for it
        t = clock()
        spent["send"] += t - t1
        while status != sp.DONE:
            t1 = t
            ready = True
            if drained:  # wait for a datagram, or until a timer is due (then read what came, if anything)
                wait = timer - time.monotonic()
                ready = wait <= 0 or bool(select.select((fd,), (), (), wait)[0])
                t1 = clock()
                spent["wait"] += t1 - t
            n = 0
            if ready:
                t = t1
                n = io.recv()
                drained = n < entries
                t1 = clock()
                spent["recv"] += t1 - t
            now = time.monotonic()
            if first is not None:  # the first exchange only: the rest never pays for it
                first.heard_batch(rx, lengths, entry_bytes, n)
                first.check(now)
            sending = 0.0
            i, m, status, timer = step(rx, entry_bytes, lengths, 0, n, now, segment, limit)
            while status == sp.FULL:  # the ring filled up: send it and go on
                t2 = clock()
                send(m, True)
                sending += clock() - t2
                i, m, status, timer = step(rx, entry_bytes, lengths, i, n, now, segment, limit)
            t2 = clock()
            spent["rules"] += t2 - t1 - sending
            if m:
                send(m, True)
            t = clock()
            spent["send"] += sending + t - t2
