"""A deterministic network for sans-I/O tests: workers' PhaseTransfers and the Pipeline on a virtual clock.

Packets take `latency` plus random jitter; jitter reorders packets of
different flows but each flow (one worker's UPDATEs, or the RESULTs to one
worker) stays in order, as on a network path.  Each packet is dropped with
probability `drop` and duplicated with probability `dup`.  With `service`
the switch is a slow one (BMv2): it serves one UPDATE per `service`
seconds from a queue of at most `queue` packets and drops what arrives
when the queue is full (counted in `overflows`).  `links` puts a flow's
packets through a `Link` (sim/links.py: a link of a given rate with a
drop-tail queue) before their latency, and a `RenoFlow` (a loss-based TCP
flow) can share that link with the aggregation.  Time is a `Clock`
(sim/clock.py).  No sockets, no threads, no sleeps: a run is a pure
function of its seed.
"""

from __future__ import annotations

import collections
import math

import numpy as np

from hina.codec.ops import reduce_words
from hina.emulator.pipeline import Pipeline
from hina.host.window import PhaseTransfer, Ring, RttEstimator, SlotPool
from hina.sim.clock import Clock
from hina.sim.links import Link, Server
from hina.wire.headers import max_words


class VirtualNetwork:
    """Workers and one `Pipeline` (subclasses add switches) on a `Clock`: what each packet meets on its way."""

    def __init__(self, pipeline: Pipeline, rng: np.random.Generator, *, drop=0.0, dup=0.0,
                 latency=1e-4, jitter=2e-4, service=0.0, queue=64, links=None):
        """links: {flow: Link}, flow ("up", worker) or ("down", ("w", worker))."""
        self.pipeline, self.rng = pipeline, rng
        self.links = links or {}
        self.service, self.queue = service, queue
        self._server = Server(queue)  # the slow switch's queue, with `service`
        self.drop, self.dup, self.latency, self.jitter = drop, dup, latency, jitter
        self.clock = Clock()
        self._flow_last: dict = {}
        self.sent = 0

    @property
    def now(self) -> float:
        return self.clock.now

    @property
    def overflows(self) -> int:
        """UPDATEs the slow switch dropped, its queue full."""
        return self._server.dropped

    def at(self, when: float, deliver) -> None:
        """Run `deliver` at `when`."""
        self.clock.at(when, deliver)

    def _schedule(self, flow, deliver, size: int = 0) -> None:
        self.sent += 1
        if self.rng.random() < self.drop:
            return
        copies = 2 if self.rng.random() < self.dup else 1
        link = self.links.get(flow)
        for _ in range(copies):
            at = self.now
            if link is not None:
                at = link.send(self.now, size, "hina")
                if at is None:
                    continue
            at += self.latency + self.rng.random() * self.jitter
            at = max(at, self._flow_last.get(flow, 0.0))  # a flow stays in order
            self._flow_last[flow] = at
            self.clock.at(at, deliver)

    def uplink(self, worker: int, frame: bytes) -> None:
        self._schedule(("up", worker), lambda: self._arrive(worker, frame), len(frame))

    def _arrive(self, worker: int, frame: bytes) -> None:
        if not self.service:
            return self._at_switch(worker, frame)
        done = self._server.serve(self.now, self.service)
        if done is not None:
            self.clock.at(done, self._at_switch, worker, frame)

    def _at_switch(self, worker: int, frame: bytes) -> None:
        emit = self.pipeline.update(frame, ("w", worker))
        if emit is not None:
            for dest in emit.dests:
                self._schedule(("down", dest), lambda d=dest, f=emit.frame: self.on_result(d[1], f), len(emit.frame))

    def on_result(self, worker: int, frame: bytes) -> None:  # set by run_transfers
        raise NotImplementedError

    def run(self, until: float) -> bool:
        """Deliver events until none are left before `until`; False if the queue ran dry."""
        return self.clock.run(until)


class RenoFlow:
    """A bulk TCP flow through `link` (TCP Reno: slow start, then one packet more per window; on a loss,
    seen a round trip later as duplicate ACKs would show it, the window halves once per round trip).
    Its ACKs come back `latency` after the link, uncongested.  It sends until `stop`.

    cap: at most this many bits per second (iperf3 -b): a token bucket of `burst` bytes (iperf3 writes
    128 KB blocks) refilled at `cap`; the window grows only while it, not the cap, held the flow back
    (Linux's cwnd validation: an application-limited flow's window does not grow).  window: the most
    packets in flight whatever the congestion window (the receiver's window; iperf3's is its socket
    buffer).

    then: a second link the packets cross `hop` seconds after leaving `link` (a flow between two
    workers' hosts: the sender's own uplink, then the switch's port to the receiver).  tsq: the most
    packets of the flow waiting in `link`'s queue at once (Linux's TCP small queues: a sender keeps
    about two packets, or 1 ms of its rate, in its own host's qdisc, and sends the next as one leaves),
    None: no limit (`link` is some router's queue, not the sender's own)."""

    def __init__(self, net: VirtualNetwork, link: Link, *, mss: int = 1500, latency: float = 2e-4,
                 cap: float | None = None, burst: int = 131072, window: float = float("inf"),
                 then: Link | None = None, hop: float = 1e-4, tsq: int | None = None):
        self.net, self.link, self.mss, self.latency = net, link, mss, latency
        self.cwnd, self.ssthresh = 2.0, float("inf")
        self.in_flight = self.seq = self.recover = 0
        self.delivered = self.cuts = 0
        self.running = False
        self.cap, self.burst, self.window = cap, max(burst, mss), window
        self.tokens, self.tokens_at, self._paced = float(self.burst), 0.0, False
        self.limited = True  # the last send stopped at the window (not at the cap or the small queue)
        self.then, self.hop, self.tsq = then, hop, tsq
        self.queued = 0  # packets waiting in `link`'s queue (the small-queue limit counts them)

    def start(self) -> None:
        self.running = True
        self.tokens_at = self.net.now
        self._send()

    def stop(self) -> None:
        self.running = False

    def _room(self) -> bool:
        """Whether the cap lets one more packet go now; if not, a send is scheduled for when it does."""
        if self.cap is None:
            return True
        now = self.net.now
        self.tokens = min(self.burst, self.tokens + (now - self.tokens_at) * self.cap / 8)
        self.tokens_at = now
        if self.tokens >= self.mss:
            return True
        if not self._paced:
            self._paced = True
            self.net.at(now + (self.mss - self.tokens) * 8 / self.cap, self._tick)
        return False

    def _tick(self) -> None:
        """The cap's wait is over: one packet's tokens are there (counted as such: at a late virtual time
        the wait can be shorter than the clock's resolution, and recounting it would never get there)."""
        self._paced = False
        now = self.net.now
        self.tokens = min(self.burst, self.tokens + (now - self.tokens_at) * self.cap / 8)
        self.tokens_at = now
        if self.mss - self.tokens < self.cap / 8 * 1e-9:
            self.tokens = max(self.tokens, float(self.mss))
        self._send()

    def _send(self) -> None:
        while self.running and self.in_flight < min(int(self.cwnd), self.window):
            if (self.tsq is not None and self.queued >= self.tsq) or not self._room():
                self.limited = False
                return
            if self.cap is not None:
                self.tokens -= self.mss
            seq, self.seq = self.seq, self.seq + 1
            self.in_flight += 1
            self._transmit(seq, self.net.now)
        self.limited = self.in_flight >= int(self.cwnd)  # not the receiver's window

    def _transmit(self, seq: int, now: float) -> None:
        """Packet `seq` onto `link` at `now`: dropped (the packets queued ahead of it carry the news back),
        or queued, then across `then`, or acknowledged (`_acked`) a `latency` after it leaves."""
        left = self.link.send(now, self.mss, "tcp")
        if left is None:
            self.net.at(max(now, self.link.free_at) + self.latency, lambda: self._lost(seq))
            return
        if self.tsq is not None:
            self.queued += 1
            self.net.at(left, self._left)
        if self.then is not None:
            self.net.at(left + self.hop, lambda: self._hop(seq))
        else:
            self.net.at(left + self.latency, lambda: self._acked(seq))

    def _left(self) -> None:
        """A packet left the first link's queue: room for the next (small queues)."""
        self.queued -= 1
        self._send()

    def _hop(self, seq: int) -> None:
        left = self.then.send(self.net.now, self.mss, "tcp")
        if left is None:
            self.net.at(max(self.net.now, self.then.free_at) + self.latency, lambda: self._lost(seq))
        else:
            self.net.at(left + self.latency, lambda: self._acked(seq))

    def _acked(self, seq: int) -> None:
        """Packet `seq` acknowledged (Reno counts it; BBR's override samples its delivery rate)."""
        self.in_flight -= 1
        self.delivered += self.mss
        if self.limited:
            self.cwnd += 1.0 if self.cwnd < self.ssthresh else 1.0 / self.cwnd
        self._send()

    def _lost(self, seq: int) -> None:
        self.in_flight -= 1
        if seq >= self.recover:  # not sent before the last cut: a new congestion event
            self.ssthresh = self.cwnd = max(2.0, self.cwnd / 2)
            self.recover = self.seq
            self.cuts += 1
        self._send()


def run_transfers(pipeline: Pipeline, payloads: list[np.ndarray], op: int, *, job_id: int, words: int,
                  slot_base: int, slots: int, rng: np.random.Generator, drop=0.0, dup=0.0, rounds: int = 1,
                  deadline: float = 5.0, pools=None, rtts=None, windows=None,
                  net: VirtualNetwork | None = None, flows=(), before_round=None,
                  ) -> tuple[list[list[np.ndarray]], VirtualNetwork, list]:
    """Aggregate `payloads` (one per worker) `rounds` times in a row; return every worker's results.

    windows: each worker's CongestionWindow (default: all `slots` in flight, fixed).
    flows: RenoFlows sharing the links, stopped once the last round is done.
    before_round: called with the round's number and the network before each round starts.
    """
    n = len(payloads)
    net = net or VirtualNetwork(pipeline, rng, drop=drop, dup=dup)
    pools = pools or [SlotPool(slot_base, slots) for _ in range(n)]
    rtts = rtts or [RttEstimator(initial=2e-3, minimum=1e-3, maximum=0.05) for _ in range(n)]
    windows = windows or [None] * n
    results: list[list[np.ndarray]] = [[] for _ in range(n)]
    stats = []
    for r in range(rounds):
        if before_round is not None:
            before_round(r, net)
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
            net.clock.advance(timer)
            for w, x in enumerate(xfers):
                for f in x.poll(net.now):
                    net.uplink(w, f)
        for w, x in enumerate(xfers):
            results[w].append(x.result)
        stats.append([dict(x.stats) for x in xfers])
    for flow in flows:
        flow.stop()
    net.run(until=float("inf"))  # let stray duplicates arrive: they must not disturb anything
    return results, net, stats


def expected(op: int, payloads: list[np.ndarray]) -> np.ndarray:
    return reduce_words(op, payloads)


class BbrFlow(RenoFlow):
    """A bulk TCP flow whose congestion control is BBR (v1, Cardwell et al., ACM Queue 2016; Linux's
    tcp_bbr.c, the default of the machine the Mininet runs were measured on): it paces at `gain` times
    the bottleneck rate it estimates (the most delivered in any of the last 10 round trips), with at most
    2 estimated BDPs (that rate times the least round trip of the last 10 s, at least 4 packets) in
    flight, and losses leave its rate alone.  Startup doubles the rate each round trip (gain 2.89)
    until the estimate stops growing by 25% for 3 rounds, Drain empties the queue that left, then
    ProbeBW cycles the gain through 1.25, 0.75 and six times 1, a phase per least round trip; a least
    round trip 10 s old sends 4 packets for 200 ms (ProbeRTT).  The path, cap and small queues as
    `RenoFlow`'s."""

    CYCLE = (1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0)

    def __init__(self, net: VirtualNetwork, link: Link, **kw):
        super().__init__(net, link, **kw)
        self.cwnd = 4.0
        self.btl_bw = 0.0  # bytes per second
        self.samples: collections.deque = collections.deque()  # (round, rate): the windowed max's samples
        self.rt_prop, self.rt_prop_at = float("inf"), 0.0
        self.round = 0
        self.round_end = 0  # delivered bytes at which the current round trip ends
        self.mode, self.full_bw, self.full_count = "startup", 0.0, 0
        self.phase, self.phase_at = 0, 0.0
        self.probe_rtt_until = 0.0
        self.next_send = 0.0
        self._pacing = False
        self.sent_info: dict[int, tuple[float, int, float]] = {}  # seq -> (sent at, delivered then, its time)
        self.delivered_at = 0.0

    @property
    def gain(self) -> float:
        if self.mode == "startup":
            return 2.89
        if self.mode == "drain":
            return 1 / 2.89
        if self.mode == "probe_rtt":
            return 1.0
        return self.CYCLE[self.phase]

    def _bdp_packets(self) -> float:
        if not self.btl_bw or math.isinf(self.rt_prop):
            return 4.0
        return self.btl_bw * self.rt_prop / self.mss

    def _send(self) -> None:
        now = self.net.now
        while self.running:
            limit = 4.0 if self.mode == "probe_rtt" else max(4.0, 2.0 * self._bdp_packets())
            if self.mode == "startup":
                limit = max(limit, 2.89 * self._bdp_packets())
            self.cwnd = limit
            if self.in_flight >= min(int(limit), self.window):
                return
            if self.tsq is not None and self.queued >= self.tsq:
                return
            if self.btl_bw and now < self.next_send:
                if not self._pacing:
                    self._pacing = True
                    self.net.at(self.next_send, self._paced_send)
                return
            if not self._room():
                return
            if self.cap is not None:
                self.tokens -= self.mss
            seq, self.seq = self.seq, self.seq + 1
            self.in_flight += 1
            self.sent_info[seq] = (now, self.delivered, self.delivered_at)
            if self.btl_bw:
                self.next_send = max(self.next_send, now) + self.mss / (self.gain * self.btl_bw)
            self._transmit(seq, now)

    def _paced_send(self) -> None:
        self._pacing = False
        self._send()

    def _acked(self, seq: int | None = None) -> None:
        now = self.net.now
        self.in_flight -= 1
        self.delivered += self.mss
        self.delivered_at = now
        sent, delivered, delivered_at = self.sent_info.pop(seq, (now, self.delivered, now))
        rtt = now - sent
        if rtt <= self.rt_prop or now - self.rt_prop_at > 10.0:
            if now - self.rt_prop_at > 10.0 and self.mode == "probe_bw":
                self.mode, self.probe_rtt_until = "probe_rtt", now + 0.2 + rtt
            self.rt_prop, self.rt_prop_at = min(rtt, self.rt_prop) if now - self.rt_prop_at <= 10.0 else rtt, now
        interval = max(now - delivered_at, now - sent, 1e-9)
        rate = (self.delivered - delivered) / interval
        if self.delivered - self.mss >= self.round_end:  # a round trip ended
            self.round += 1
            self.round_end = self.delivered + self.in_flight * self.mss
            if self.mode == "startup":
                if self.btl_bw >= 1.25 * self.full_bw:
                    self.full_bw, self.full_count = self.btl_bw, 0
                else:
                    self.full_count += 1
                    if self.full_count >= 3:
                        self.mode = "drain"
        self.samples.append((self.round, rate))
        while self.samples and self.samples[0][0] < self.round - 10:
            self.samples.popleft()
        self.btl_bw = max(r for _, r in self.samples)
        if self.mode == "drain" and self.in_flight <= self._bdp_packets():
            self.mode, self.phase, self.phase_at = "probe_bw", 2, now
        if self.mode == "probe_bw" and now - self.phase_at >= self.rt_prop:
            self.phase, self.phase_at = (self.phase + 1) % len(self.CYCLE), now
        if self.mode == "probe_rtt" and now >= self.probe_rtt_until:
            self.mode, self.phase, self.phase_at, self.rt_prop_at = "probe_bw", 2, now, now
        self._send()

    def _lost(self, seq: int) -> None:
        self.in_flight -= 1
        self.sent_info.pop(seq, None)
        self.cuts += 1  # counted, not acted on: BBR v1 keeps its rate
        self._send()


class _WindowSampler:
    """Every worker's window every `period` virtual seconds from `start()` until `stop()` (a flow of
    `run_transfers`, so stopped with them): the least and most each took."""

    def __init__(self, net: VirtualNetwork, windows, period: float = 1e-3):
        self.net, self.windows, self.period = net, windows, period
        self.least = [float("inf")] * len(windows)
        self.most = [0.0] * len(windows)
        self.running = False

    def start(self) -> None:
        if not self.running:
            self.running = True
            self._sample()

    def stop(self) -> None:
        self.running = False

    def _sample(self) -> None:
        if not self.running:
            return
        for w, window in enumerate(self.windows):
            self.least[w] = min(self.least[w], window.cwnd)
            self.most[w] = max(self.most[w], window.cwnd)
        self.net.at(self.net.now + self.period, self._sample)


def beside_reno(contest: float | None, seed: int, *, fair: bool = False, queue: int = 128, flow: bool = True,
                rounds: int = 3,
                chunks: int = 300, rate_mbps: float = 85.0, workers: int = 4, slots: int = 64,
                cap: float | None = None, flow_window: float = float("inf"), warmup: float | None = None,
                path: str = "downlink", tcp: str = "reno", windows=None) -> dict:
    """Dense aggregation of `workers` over `rounds` rounds, rank 0's downlink a `rate_mbps` link with a
    `queue`-packet drop-tail queue (Mininet's star with 9000-byte frames: K = 2239 words); a Reno flow of
    8,948-byte segments shares that link (`flow`), capped at `cap` Mbit/s (None: as fast as its window
    lets it) with at most `flow_window` packets in flight (the receiver's window).  By default the flow
    starts with round 1 and round 0 runs alone, so the least round trip is the empty path's; with
    `warmup` it starts that many seconds before round 0 (as `cross_traffic.py`'s iperf3 flow does, 1 s
    before the aggregation), so the workers never see the path empty, and every round is beside it.

    *The contested link* is where the aggregation's packets and the flow's wait in one queue: rank 0's
    downlink (the RESULTs to rank 0), and with "hosts" rank 1's uplink too (its UPDATEs), where the flow
    then queues (its sender's own qdisc), the downlink receiving both at no more than its rate.  All
    links have one rate, and every RESULT to rank 0 crosses the downlink once, so hina's `share` of the
    contested link is its goodput there: the RESULT bytes of the rounds beside the flow (each chunk once;
    resent answers not counted) over what the link could carry in their time (alone it is about 1);
    `flow_share` the same for the flow's bytes over the downlink.

    Returns round 0's seconds (`alone`; with `warmup` it ran beside the flow too), the mean of the
    rounds beside the flow (`later`) and each round's seconds (`seconds`), `share`, `flow_share`, the
    share hina's frames took of the downlink, resent answers and all (`carried`), rank
    0's window after each round beside the flow (`cwnds`), every worker's least and most window while the
    flow ran (sampled each ms: `least`, `most`), the cuts each worker's window took in those rounds
    (`cuts`), rank 0's `window`, the `flow`, the frames resent per round beside it (`resent`) and each
    round's `PhaseTransfer.stats` per worker (`stats`); every
    worker's sum is checked.  windows: the workers' `CongestionWindow`s (default: `CongestionWindow(slots,
    CongestionSettings(fair=fair, contest=contest))` each; contest None: the rules' default); fair: the
    fair-share rules (and `RttEstimator.fair()`)."""
    from hina.codec.ops import Op
    from hina.control import JobConfig, Member
    from hina.host.congestion import CongestionWindow
    from hina.host.congestion_settings import CongestionSettings
    from hina.host.window import RttEstimator

    words = max_words(9000)  # Mininet's jumbo frames
    rng = np.random.default_rng(seed)
    p = Pipeline()
    p.add_job(JobConfig(5, workers, words, 0, slots, tuple(Member(w, ("w", w)) for w in range(workers))))
    payloads = [rng.integers(-(2**20), 2**20, size=chunks * words).astype(np.int32) for _ in range(workers)]
    link = Link(rate_mbps * 1e6, queue=queue)
    links = {("down", ("w", 0)): link}
    flow_kw = {"mss": 8948, "cap": None if cap is None else cap * 1e6, "window": flow_window}
    if path == "hosts":
        links[("up", 1)] = uplink = Link(rate_mbps * 1e6, queue=queue)
        flow_kw.update(then=link, tsq=2)
    elif path != "downlink":
        raise ValueError(f"path must be downlink or hosts, got {path!r}")
    net = VirtualNetwork(p, rng, latency=1e-4, jitter=5e-5, links=links)
    if tcp not in ("reno", "bbr"):
        raise ValueError(f"tcp must be reno or bbr, got {tcp!r}")
    tcp = (BbrFlow if tcp == "bbr" else RenoFlow)(net, uplink if path == "hosts" else link, **flow_kw)
    windows = windows or [CongestionWindow(slots, CongestionSettings(fair=fair, contest=contest))
                          for _ in range(workers)]
    sampler = _WindowSampler(net, windows)
    first = 0 if warmup is not None else 1  # the first round beside the flow
    marks, cwnds, cuts = [], [], []

    def before_round(r, net):
        if r == first:
            if flow:
                tcp.start()
            if warmup:
                until = net.now + warmup
                net.run(until=until)
                net.clock.advance(until)
            sampler.start()
        marks.append((net.now, link.carried.get("hina", 0), link.carried.get("tcp", 0)))
        cwnds.append(windows[0].cwnd)
        cuts.append([w.cuts for w in windows])

    results, net, stats = run_transfers(p, payloads, Op.ADD, job_id=5, words=words, slot_base=0, slots=slots,
                                        rng=rng, rounds=rounds, deadline=60.0, net=net, windows=windows,
                                        rtts=[RttEstimator.fair() if fair else RttEstimator() for _ in range(workers)],
                                        flows=[tcp, sampler],
                                        before_round=before_round)
    want = expected(Op.ADD, payloads)
    assert all(np.array_equal(r, want) for per_worker in results for r in per_worker)
    marks.append((net.now, link.carried.get("hina", 0), link.carried.get("tcp", 0)))
    cwnds.append(windows[0].cwnd)
    span = marks[-1][0] - marks[first][0]
    capacity = span * link.rate / 8
    goodput = (rounds - first) * chunks * Ring.frame_size(words)  # every chunk's RESULT to rank 0, once
    return {"alone": marks[1][0] - marks[0][0], "later": span / (rounds - first),
            "seconds": [b[0] - a[0] for a, b in zip(marks, marks[1:])],
            "share": goodput / capacity, "carried": (marks[-1][1] - marks[first][1]) / capacity,
            "flow_share": (marks[-1][2] - marks[first][2]) / capacity,
            "cwnds": cwnds[first + 1:], "least": sampler.least, "most": sampler.most,
            "cuts": [w.cuts - c for w, c in zip(windows, cuts[first])], "window": windows[0], "flow": tcp,
            "resent": sum(s.get("retransmissions", 0) for rnd in stats[first:] for s in rnd) / (rounds - first),
            "stats": stats}
