"""A deterministic network for sans-I/O tests: workers' PhaseTransfers and the Pipeline on a virtual clock.

Packets take `latency` plus random jitter; jitter reorders packets of
different flows but each flow (one worker's UPDATEs, or the RESULTs to one
worker) stays in order, as on a network path.  Each packet is dropped with
probability `drop` and duplicated with probability `dup`.  With `service`
the switch is a slow one (BMv2): it serves one UPDATE per `service`
seconds from a queue of at most `queue` packets and drops what arrives
when the queue is full (counted in `overflows`).  No sockets, no
threads, no sleeps: a run is a pure function of its seed.
"""

from __future__ import annotations

import heapq
import itertools

import numpy as np

from codec.ops import reduce_words
from host.window import PhaseTransfer, RttEstimator, SlotPool
from switch_emulator.pipeline import Pipeline


class VirtualNetwork:
    def __init__(self, pipeline: Pipeline, rng: np.random.Generator, *, drop=0.0, dup=0.0,
                 latency=1e-4, jitter=2e-4, service=0.0, queue=64):
        self.pipeline, self.rng = pipeline, rng
        self.service, self.queue = service, queue
        self._busy_until = 0.0
        self._in_service: list[float] = []  # when each queued packet's service ends
        self.overflows = 0
        self.drop, self.dup, self.latency, self.jitter = drop, dup, latency, jitter
        self.now = 0.0
        self._events: list = []
        self._seq = itertools.count()
        self._flow_last: dict = {}
        self.sent = 0

    def _schedule(self, flow, deliver) -> None:
        self.sent += 1
        if self.rng.random() < self.drop:
            return
        copies = 2 if self.rng.random() < self.dup else 1
        for _ in range(copies):
            at = self.now + self.latency + self.rng.random() * self.jitter
            at = max(at, self._flow_last.get(flow, 0.0))  # a flow stays in order
            self._flow_last[flow] = at
            heapq.heappush(self._events, (at, next(self._seq), deliver))

    def uplink(self, worker: int, frame: bytes) -> None:
        self._schedule(("up", worker), lambda: self._arrive(worker, frame))

    def _arrive(self, worker: int, frame: bytes) -> None:
        if not self.service:
            return self._at_switch(worker, frame)
        self._in_service = [t for t in self._in_service if t > self.now]
        if len(self._in_service) >= self.queue:
            self.overflows += 1
            return
        self._busy_until = max(self.now, self._busy_until) + self.service
        self._in_service.append(self._busy_until)
        heapq.heappush(self._events, (self._busy_until, next(self._seq), lambda: self._at_switch(worker, frame)))

    def _at_switch(self, worker: int, frame: bytes) -> None:
        emit = self.pipeline.update(frame, ("w", worker))
        if emit is not None:
            for dest in emit.dests:
                self._schedule(("down", dest), lambda d=dest, f=emit.frame: self.on_result(d[1], f))

    def on_result(self, worker: int, frame: bytes) -> None:  # set by run_transfers
        raise NotImplementedError

    def run(self, until: float) -> bool:
        """Deliver events until none are left before `until`; False if the queue ran dry."""
        while self._events and self._events[0][0] <= until:
            at, _, deliver = heapq.heappop(self._events)
            self.now = at
            deliver()
        return bool(self._events)


def run_transfers(pipeline: Pipeline, payloads: list[np.ndarray], op: int, *, job_id: int, words: int,
                  slot_base: int, slots: int, rng: np.random.Generator, drop=0.0, dup=0.0, rounds: int = 1,
                  deadline: float = 5.0, pools=None, rtts=None, windows=None,
                  net: VirtualNetwork | None = None) -> tuple[list[list[np.ndarray]], VirtualNetwork, list]:
    """Aggregate `payloads` (one per worker) `rounds` times in a row; return every worker's results.

    windows: each worker's CongestionWindow (default: all `slots` in flight, fixed).
    """
    n = len(payloads)
    net = net or VirtualNetwork(pipeline, rng, drop=drop, dup=dup)
    pools = pools or [SlotPool(slot_base, slots) for _ in range(n)]
    rtts = rtts or [RttEstimator(initial=2e-3, minimum=1e-3, maximum=0.05) for _ in range(n)]
    windows = windows or [None] * n
    results: list[list[np.ndarray]] = [[] for _ in range(n)]
    stats = []
    for r in range(rounds):
        xfers = [PhaseTransfer(job_id=job_id, worker_id=w, words=words, pool=pools[w], rtt=rtts[w], tag=r,
                               op=op, payload=payloads[w], name=f"round{r}", now=net.now, deadline=deadline,
                               window=windows[w])
                 for w in range(n)]

        def on_result(w: int, frame: bytes, xfers=xfers) -> None:
            for out in xfers[w].receive(frame, net.now):
                net.uplink(w, out)

        net.on_result = on_result
        for w, x in enumerate(xfers):
            for f in x.start(net.now):
                net.uplink(w, f)
        while not all(x.done for x in xfers):
            timer = min(x.next_timer() for x in xfers if not x.done)
            net.run(until=timer)
            net.now = max(net.now, timer)
            for w, x in enumerate(xfers):
                for f in x.poll(net.now):
                    net.uplink(w, f)
        for w, x in enumerate(xfers):
            results[w].append(x.result)
        stats.append([dict(x.stats) for x in xfers])
    net.run(until=float("inf"))  # let stray duplicates arrive: they must not disturb anything
    return results, net, stats


def expected(op: int, payloads: list[np.ndarray]) -> np.ndarray:
    return reduce_words(op, payloads)
