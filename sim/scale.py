"""The scale model's engine: the real sender and slot rules on modelled links, 8 to 1,024 workers.

No sockets, no CPU time in the figures: the simulator's clock
(sim/clock.py) on which frames cross links of a given rate and
propagation delay (sim/links.py) and switches of a given latency (and,
for a software switch, a service time per frame).  What runs on the clock
is hina's own code: the worker's `PhaseTransfer` (host/window.py, the
compiled rules of host/sendplane.py: slots and copies, the congestion
window with its slow start, RACK and the tail probe, the RTT estimator)
and the switch's `Pipeline` (switch_emulator/pipeline.py, the compiled
slot rules of controls.py, including the tree rule of docs/design.md
("Aggregation trees"): a complete copy goes up as one partial, the
parent's RESULT comes down and is multicast).  Frames are the real ones:
K words per UPDATE (every frame carries K words), the 16-byte hina
header, Ethernet/IPv4/UDP (42 bytes, as Mininet's shaper counts them)
and, on physical links, preamble, FCS and inter-frame gap (24 bytes).

The network is a `hina.control.Fabric` (its hosts' rate, every link's rate,
the packets a switch port queues), run with the settings beside it (`Setup`:
link delay, switch latency and service, K, W).  The abstraction that makes
1,024 workers cheap: workers are identical (the same words, sent at the same
instants on links of the same rate), so every switch's children deliver a
chunk's UPDATEs at the same instant and a copy completes when any one of them
arrives.  The model therefore runs ONE representative path (`PathModel`):
host 0's way up (`Setup.hops`), its leaf and every switch above it that its
slots reach, each a real `Pipeline` whose job has one member, the hop below,
and a parent per root it sends slots up to.  Every uplink on the way is a
link of its own, at its own rate: two 25 Gbit/s uplinks are not one of 50
(each carries half the slots, and a frame takes twice as long on it).  What
the other children change is represented explicitly: a software switch's
service time is charged for all its children's frames (a serial server, in
order of arrival), and bytes per link are counted per tier (`link_bytes`).  Per-packet-per-worker simulation would be N
times slower and give the same times.  A round of C chunks is run on the
clock for its first `cap` chunks; beyond that the sender is in its steady
state (window at its limit, links or window saturated, each chunk
answered a fixed interval after the one before), and the remaining chunks
are added at the interval measured over the second half of the simulated
ones (`tests/sim/test_scale_model.py` checks this against a full run).

What a round carries comes from the codec: for a Mininet validation run,
the codec is run on the very gradients the Mininet workers made
(`codec_rounds`, every round's segments, words exactly as sent); for the
projection to N workers (the codec's jobs stop at 32 workers), the union of
N workers' supports is drawn from each preset's own generators at a reduced
scale (`union_stats`), and the exact words per round of every encoding
follow from the codec's own sizing functions (`preset_rounds`: bitmap words,
union groups, |U|, the sketch's R), with `codec.auto.choose` picking the
encoding from the same union statistics the workers would ADD.  Counts
measured at the reduced scale are scaled up to the preset's full length
(fractions of groups occupied, so structure within an embedding row is
kept); the sketch's residual round is charged as the codec's cost model
charges it (its probability times one one-chunk round).

Beside hina: dense in-network aggregation (SwitchML-style; the codec's dense
mode on the same model) and a bandwidth-optimal ring allreduce on the
alpha-beta model (Thakur et al. 2005): 2 (N - 1) steps of alpha plus
(D / N) bytes each at the slowest link's rate (`ring_for`).

The model's domain: no switch port drops.  Its links queue without limit
and count the most each switch port held (as ns-3 counts a port's queue);
where one would have held more than the fabric's `queue`, a real port drops
there, every child of the leaf resends and sends the partial up again, the
workers' timers part, and identical workers cannot say what that costs.  So
the run says it is outside the domain (`in_domain`, `overflows`, `outside`)
and its seconds are what the round would take if the ports held: ns-3
(sim/ns3sim.py, benchmarks/ns3_scale.py) runs it with every worker.

Left out (docs/scale_model.md): random loss and stragglers (identical workers),
codec compute (encode, decode: measured separately; the validation adds
the Mininet run's own), cross-traffic, switch memory limits beyond the
slot count, and the 32-children limit of a real switch's bitmap (a star of
more than 32 workers is a hypothetical switch; trees are the real design).

The command line that runs presets, validates against Mininet runs and
writes, plots and tabulates the results is benchmarks/scale_model.py.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence

import numpy as np

from hina.codec import auto, bitmap, sketch
from hina.codec.blocks import BLOCK_ELEMENTS
from hina.codec.params import MAX_WORKERS, CodecParams
from hina.codec.session import WorkerSession
from hina.codec.simulate import aggregate_round, check_gradients
from hina.control import Fabric, JobConfig, Member
from hina.emulator import Pipeline
from hina.host.congestion import CongestionWindow
from hina.host.congestion_settings import CongestionSettings
from hina.host.window import PhaseTransfer, Ring, RttEstimator, SlotPool
from hina.host.workloads import Dense, preset
from hina.sim.clock import Clock
from hina.sim.links import Link, Server
from hina.wire.headers import AT_FLAGS, FRAME_OVERHEAD, IPV4_HEADER_BYTES, UDP_HEADER_BYTES, Flags, max_words

PHY_OVERHEAD = 8 + 4 + 12  # preamble, FCS, inter-frame gap: on a physical link, not in Mininet's counts
TCP_HEADERS = 20 + 20  # the ring's transport: IPv4 and TCP per frame
JOB = 1
STATS_WORDS = len(bitmap.GROUP_SIZES)  # the union statistics the first round ADDs (codec.auto)
# the emulator's seconds per frame handled (in or out) on one core of this machine: 150,000 frames a second
# (benchmarks/results/emulator_bench.json, packet_rate, 1 pipe); it matters only where links are faster
EMULATOR_SERVICE = 1 / 150_000


# -- what a round carries ------------------------------------------------------------------------
Round = tuple[int, ...]  # the words of each segment of one trip through the switch


def round_chunks(segments: Round, words: int) -> int:
    """Chunks (frames per worker) of one round: each segment cut into K-word chunks on its own, an empty
    one still one chunk (as `PhaseTransfer` cuts them)."""
    return sum(max(1, -(-w // words)) for w in segments)


def first_round() -> Round:
    """check (OR of the fingerprint and its complement), scale (MAX of exponent and count), stats (ADD)."""
    return (2, 2, STATS_WORDS)


def codec_rounds(grads: Sequence[np.ndarray], mode: str, link_gbps: float | None = None) -> dict:
    """Run the codec on these gradients (numpy for the switch, as `codec.simulate_allreduce`) and record
    every round's segment words; returns {"rounds": [...], "encoding", "group", "union", "residual",
    "compute": the slowest worker's encode + decode seconds}."""
    grads = check_gradients(grads)
    extra = {"link_gbps": link_gbps} if link_gbps else {}
    params = CodecParams(length=grads[0].size, workers=len(grads), dtype=grads[0].dtype.name, mode=mode, **extra)
    sessions = [WorkerSession(params, g) for g in grads]
    rounds: list[Round] = []
    while not sessions[0].done:
        phases = [s.next_phase() for s in sessions]
        rounds.append(tuple(seg.words.size for seg in phases[0].segments))
        aggregate = aggregate_round(phases)
        for s in sessions:
            s.receive(aggregate.copy())
    results = [s.result() for s in sessions]
    r = results[0]
    return {"rounds": rounds, "encoding": r.encoding, "group": r.group, "union": r.union, "residual": r.residual,
            "compute": max(sum(x.seconds.values()) for x in results)}


@dataclasses.dataclass(frozen=True)
class UnionStats:
    """What N workers' supports look like, at a gradient length `length`.

    terms: the sum of the workers' `auto.union_terms` (what the stats ADD returns); max_nnz: the
    largest worker's non-zeros; occupied[k]: the fraction of groups of GROUP_SIZES[k] elements that
    hold a union element (the true union, as the index round finds it).
    """

    length: int
    workers: int
    terms: tuple[int, ...]
    max_nnz: int
    occupied: tuple[float, ...]

    def estimate(self, length: int | None = None) -> auto.Estimate:
        """The estimate every worker derives from the scale round, at `length` (counts scaled with it)."""
        est = auto.Estimate.from_aggregates(self.length, self.max_nnz, np.array(self.terms))
        if length is None or length == self.length:
            return est
        factor = length / self.length
        return auto.Estimate(length, round(self.max_nnz * factor), est.occupied)

    def union_groups(self, group: int, length: int | None = None) -> int:
        """Union groups of `group` elements (the index's second level sends their bits), at `length`."""
        length = length or self.length
        k = bitmap.GROUP_SIZES.index(group)
        return min(bitmap.groups(length, group), round(self.occupied[k] * bitmap.groups(length, group)))

    @classmethod
    def from_supports(cls, supports: Sequence[np.ndarray], length: int) -> UnionStats:
        """From each worker's support (a bool array of `length`)."""
        union = np.zeros(length, np.bool_)
        for s in supports:
            union |= s
        return cls.from_ranges([_ranges(s) for s in supports], _ranges(union), length)

    @classmethod
    def from_ranges(cls, workers: Sequence[tuple[np.ndarray, np.ndarray]], union: tuple[np.ndarray, np.ndarray],
                    length: int) -> UnionStats:
        """From each worker's support and the union's, as sorted disjoint [start, stop) ranges of elements."""
        terms = np.zeros(STATS_WORDS, np.int64)
        for starts, stops in workers:
            terms += auto.union_terms(group_counts(starts, stops), length)
        max_nnz = max(int((stops - starts).sum()) for starts, stops in workers)
        occupied = tuple(int(c) / bitmap.groups(length, g) for c, g in zip(group_counts(*union), bitmap.GROUP_SIZES))
        return cls(length, len(workers), tuple(int(t) for t in terms), max_nnz, occupied)


def _ranges(support: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A bool support as sorted disjoint [start, stop) ranges of its True runs."""
    edges = np.flatnonzero(np.diff(np.concatenate(([0], support.view(np.int8), [0]))))
    return edges[0::2].astype(np.int64), edges[1::2].astype(np.int64)


def group_counts(starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """Non-empty groups at every size in GROUP_SIZES for a support of sorted disjoint [start, stop) ranges
    (what `codec.bitmap.group_counts` finds in the support's bitmap): each range covers groups
    start // G .. (stop - 1) // G, and consecutive ranges can share only their boundary group."""
    out = np.zeros(len(bitmap.GROUP_SIZES), np.int64)
    if starts.size == 0:
        return out
    for k, group in enumerate(bitmap.GROUP_SIZES):
        first, last = starts // group, (stops - 1) // group
        out[k] = int((last - first + 1).sum()) - int(np.count_nonzero(first[1:] == last[:-1]))
    return out


def _embedding_ranges(rows: np.ndarray, dim: int, at: int) -> tuple[np.ndarray, np.ndarray]:
    starts = at + rows.astype(np.int64) * dim
    return starts, starts + dim


def _merge(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Layers' ranges, in layer order (each sorted), as one sorted list (touching ranges left as two)."""
    if not parts:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def union_stats(name: str, workers: Sequence[int], scale: float = 1.0, seed: int = 0) -> list[UnionStats]:
    """UnionStats of the preset at `scale` for each worker count in `workers`, in one pass over
    max(workers) workers: each worker's support is drawn from the preset's own generators (dense layers
    whole, each embedding's `touched_rows`, seeded per (seed, rank) as `Workload.gradient` seeds), as
    element ranges (no array of the gradient's length), the union kept as a bit per table row."""
    w = preset(name, scale)
    layout, at = [], 0
    for layer in w.layers:
        layout.append((layer, at))
        at += layer.size
    seen = {i: np.zeros(layer.rows, np.bool_) for i, (layer, _) in enumerate(layout) if not isinstance(layer, Dense)}
    checkpoints = sorted(set(workers))
    per_worker_terms = np.zeros(STATS_WORDS, np.int64)
    max_nnz, out = 0, []
    for rank in range(checkpoints[-1]):
        rng = np.random.default_rng([seed, rank, 0x5EED])
        parts = []
        for i, (layer, start) in enumerate(layout):
            if isinstance(layer, Dense):
                parts.append((np.array([start]), np.array([start + layer.size])))
            else:
                rows = layer.touched_rows(rng)  # sorted, unique
                seen[i][rows] = True
                parts.append(_embedding_ranges(rows, layer.dim, start))
        starts, stops = _merge(parts)
        per_worker_terms += auto.union_terms(group_counts(starts, stops), w.size)
        max_nnz = max(max_nnz, int((stops - starts).sum()))
        if rank + 1 in checkpoints:
            union = _merge([(np.array([start]), np.array([start + layer.size])) if isinstance(layer, Dense)
                            else _embedding_ranges(np.flatnonzero(seen[i]), layer.dim, start)
                            for i, (layer, start) in enumerate(layout)])
            occupied = tuple(int(c) / bitmap.groups(w.size, g)
                             for c, g in zip(group_counts(*union), bitmap.GROUP_SIZES))
            out.append(UnionStats(w.size, rank + 1, tuple(int(t) for t in per_worker_terms), max_nnz, occupied))
    return out


def support_scale(name: str, workers: int, budget: float = 5e7) -> float:
    """The largest scale (at most 1) at which `workers` workers draw at most `budget` embedding lookups:
    1 for every preset but NCF, whose batch of a million pairs per table saturates the union anyway."""
    lookups = sum(layer.lookups for layer in preset(name).layers if not isinstance(layer, Dense))
    return min(1.0, budget / max(1, lookups * workers))


def preset_rounds(stats: UnionStats, length: int, mode: str, link_gbps: float, lanes: int | None = None) -> dict:
    """The rounds one worker sends for a gradient of `length` whose N-worker union looks like `stats`.

    The encoding and index group are `codec.auto.choose`'s, from the estimate the workers' stats ADD gives;
    the words per round are the codec's own sizes (bitmap words, the true union's groups and |U|, the
    sketch's R from `sketch.rows_for`).  The sketch's residual round is not a fixed size: its chance is
    returned as `residual_chance` (charged as that fraction of a one-chunk round).
    """
    extra = {"lanes": lanes} if lanes else {}
    params = CodecParams(length=length, workers=min(stats.workers, MAX_WORKERS), mode=mode, link_gbps=link_gbps,
                         **extra)
    est = stats.estimate(length)
    plan = auto.choose(params, est)
    union = min(length, round(stats.occupied[0] * length))
    rounds: list[Round] = [first_round()]
    out = {"encoding": plan.encoding, "group": 0, "union": union, "rows": 0, "residual_chance": 0.0}
    if plan.encoding == "dense":
        rounds.append((length,))
    elif plan.encoding == "blocks":
        nblocks = stats.union_groups(BLOCK_ELEMENTS, length)
        rounds.append((bitmap.words_for(bitmap.groups(length, BLOCK_ELEMENTS)),))
        if nblocks:
            rounds.append((nblocks * BLOCK_ELEMENTS,))
        out["union"] = nblocks * BLOCK_ELEMENTS
    else:
        group = plan.group
        out["group"] = group
        if group == 1:
            index, bound = [(bitmap.words_for(length),)], float(length)
        else:
            ngroups = stats.union_groups(group, length)
            index = [(bitmap.words_for(bitmap.groups(length, group)),)]
            if ngroups:
                index.append((bitmap.words_for(ngroups * group),))
            bound = float(min(length, ngroups * group))
        if plan.encoding == "aligned":
            rounds += index + ([(union,)] if union else [])
        else:
            rows = sketch.rows_for(params, min(est.union, bound))
            if len(index) == 2 or group == 1:
                index[-1] = index[-1] + (sketch.TABLES * rows * params.lanes,)
            rounds += index
            out["rows"] = rows
            out["residual_chance"] = auto.residual_chance(params, union, rows) if union else 0.0
    out["rounds"] = rounds
    return out


# A worker's congestion settings on a simulated host: its defaults, but for the queueing a busy host's scheduler
# adds to round trips, which a simulated host has none of (the delay rule's threshold is the least round trip)
SIMULATED_HOST = CongestionSettings(queue_delay=0.0)


# -- the network --------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Hop:
    """A switch on the representative worker's way up: its name, its tier (0: the worker's leaf), its
    fan-in (children in the tree of a job over every host), the hop below it (-1: the worker), the rate of
    the link from there (bits/s) and its parents' hops, one per root it sends slots up to (slot s goes to
    the (s mod len)-th, as on the switch)."""

    name: str
    tier: int
    fanin: int
    below: int
    rate: float
    parents: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class Setup:
    """What the scale model runs: a fabric (`hina.control.Fabric`: its hosts and switches, every link's rate,
    the packets each switch port queues) and what the run sets beside it.

    delay: propagation per link (seconds); switch_latency: a switch's pipeline latency; switch_service:
    seconds per frame a software switch spends (0: a hardware pipeline at line rate); words: K per frame;
    slots: the job's W; overhead: bytes per frame besides the hina frame.  The fabric must give its
    hosts' `rate`; a link without a rate of its own follows the fabric's rule (`Fabric.link_rates`).
    """

    fabric: Fabric
    delay: float = 1e-6
    switch_latency: float = 1e-6
    switch_service: float = 0.0
    words: int = max_words(9000)
    slots: int = 64
    overhead: int = FRAME_OVERHEAD + PHY_OVERHEAD

    def __post_init__(self) -> None:
        if self.fabric.rate is None:
            raise ValueError("the scale model needs the hosts' rate: give the fabric a rate (Mbit/s)")

    @functools.cached_property
    def hops(self) -> tuple[Hop, ...]:
        """Host 0's way up, leaf first: each switch once, each with the hop it came from (`Hop.below`).  Every
        uplink on the way is a link of its own, at its own rate: a leaf's four uplinks to four spines are four
        hops up, each carrying the slots of its root."""
        fabric = self.fabric
        rates = fabric.link_rates()
        order = [fabric.hosts[0].switch]
        came = {order[0]: (-1, fabric.rate, 0)}  # switch -> (the hop below, Mbit/s from there, tier)
        for i, sw in enumerate(order):  # grows as it goes: a breadth-first walk up
            for parent, _, _ in fabric.parents(sw):
                if parent not in came:
                    came[parent] = (i, rates[sw, parent], came[sw][2] + 1)
                    order.append(parent)
                elif came[parent][0] != i:
                    raise ValueError(f"the scale model runs one worker's way up as a tree: {parent} lies above both "
                                     f"{order[came[parent][0]]} and {sw} on it")
        at = {name: i for i, name in enumerate(order)}
        return tuple(Hop(name, came[name][2], len(fabric.children(name)), came[name][0], came[name][1] * 1e6,
                         tuple(at[p] for p, _, _ in fabric.parents(name))) for name in order)

    @property
    def workers(self) -> int:
        return len(self.fabric.hosts)

    @property
    def depth(self) -> int:
        """Tiers of switches on the way up."""
        return 1 + max(h.tier for h in self.hops)

    @property
    def fanins(self) -> tuple[int, ...]:
        """Children per switch of each tier on the way up, leaf first."""
        return tuple(next(h.fanin for h in self.hops if h.tier == t) for t in range(self.depth))

    @property
    def frame_bytes(self) -> int:
        """Bytes on a link per UPDATE or RESULT: the hina frame (K words, always) and the overhead."""
        return Ring.frame_size(self.words) + self.overhead

    def path_rtt(self) -> float:
        """What host 0's join exchange measures before its first chunk: a frame of the job's size to the root of
        its slot 0 and back on empty links (each hop its rate and the propagation delay, each switch its latency
        and service)."""
        hops, hop, seconds = self.hops, 0, 0.0
        while True:
            seconds += self.frame_bytes * 8 / hops[hop].rate + self.delay + self.switch_latency + self.switch_service
            if not hops[hop].parents:
                return 2 * seconds
            hop = hops[hop].parents[0]

    def line_rate_seconds(self, chunks: int) -> float:
        """`chunks` frames at the worker's link rate: the least a round can take."""
        return chunks * self.frame_bytes * 8 / self.hops[0].rate


def link_bytes(net: Setup, chunks: int, *, aggregate: bool = True) -> list[dict]:
    """Bytes that one round of `chunks` chunks puts on each tier's links, up and down: tier 0 a worker's
    link, tier t what one switch of tier t - 1 sends up over its uplinks (all of them) and takes back down.

    With `aggregate` (hina, SwitchML) a switch sends one partial up per chunk; without, it forwards
    every worker's UPDATE below it (and the root's RESULT comes back once per worker below).
    """
    out, below = [], 1
    for tier in range(net.depth):
        streams = 1 if aggregate else below
        out.append({"tier": tier, "up": streams * chunks * net.frame_bytes, "down": streams * chunks * net.frame_bytes})
        below *= net.fanins[tier]
    return out


class _Switch:
    """A switch on the representative path: the real `Pipeline` (one member, the hop below; a parent per root
    it sends slots up to, known by its name) and, for a software switch, a serial server of `service` per
    frame."""

    def __init__(self, net: Setup, hop: Hop):
        self.pipeline = Pipeline()
        parents = tuple(Member(0, net.hops[p].name) for p in hop.parents)  # the tree rule (docs/design.md)
        self.pipeline.add_job(JobConfig(JOB, 1, net.words, 0, net.slots, (Member(0, "child"),), parents=parents))
        self.fanin, self.service, self.latency = hop.fanin, net.switch_service, net.switch_latency
        self.server = Server()  # the frames it handles, one after another (no queue limit)

    def process(self, now: float, frame, source: str, frames_in: int):
        """(when its output leaves, the Emit or None) for a frame that stands for `frames_in` arrivals: a
        partial goes up as one frame, a RESULT down as one per child."""
        emit = self.pipeline.update(frame, source)
        out = 0 if emit is None else (self.fanin if emit.dests == ("child",) else 1)
        return self.server.serve(now, (frames_in + out) * self.service) + self.latency, emit


@dataclasses.dataclass
class RoundTime:
    chunks: int
    simulated: int
    seconds: float
    retransmissions: int


class PathModel:
    """The representative worker's path: its sender state (slots, RTT, window) lives as long as the
    model, as a `Worker`'s does across its rounds; `run` aggregates rounds one after another on one
    `Clock`."""

    def __init__(self, net: Setup, *, cap: int = 2048, congestion: CongestionSettings = SIMULATED_HOST):
        self.net, self.cap = net, max(cap, 4 * net.slots)
        self.pool = SlotPool(0, net.slots)
        # as a worker's: from its join exchange (timers fire when due on this clock: no tick)
        self.rtt = (RttEstimator.fair if congestion.fair else RttEstimator)(path=net.path_rtt())
        self.window = CongestionWindow(net.slots, congestion)
        self.switches = [_Switch(net, hop) for hop in net.hops]
        self.at = {hop.name: i for i, hop in enumerate(net.hops)}
        # into each hop's switch from below, and from it back down; no queue limit: what each port held is
        # measured instead (`ports`), and a port that would have dropped puts the run outside the model's domain
        self.up = [Link(hop.rate, net.delay) for hop in net.hops]
        self.down = [Link(hop.rate, net.delay) for hop in net.hops]
        self.clock = Clock()
        self.shift = 0.0  # seconds added by extrapolated chunks (the clock itself never ran them)
        self._on_worker = _ignore  # what a frame that reaches the worker is handed to
        self._tag = 0

    @property
    def now(self) -> float:
        return self.clock.now

    @property
    def seconds(self) -> float:
        return self.clock.now + self.shift

    def _send(self, frames: list[bytes]) -> None:
        size = self.net.frame_bytes
        for f in frames:
            self._over(self.up[0], self.clock.now, size, 0, "child", f)

    def _over(self, link: Link, now: float, size: int, to: int, source: str, frame) -> None:
        """`frame` onto `link` at `now`, delivered at hop `to` (-1: the worker) as from `source`."""
        at = link.send(now, size)
        if at is not None:
            self.clock.at(at, self._deliver, to, source, frame)

    def _deliver(self, to: int, source: str, frame) -> None:
        """A frame arrives at hop `to` from below ("child") or from the parent named `source`, or at the worker."""
        if to < 0:
            self._on_worker(frame)
            return
        hop = self.net.hops[to]
        leave, emit = self.switches[to].process(self.clock.now, frame, source, hop.fanin if source == "child" else 1)
        if emit is None:
            return
        out = bytes(emit.frame)
        if emit.dests == ("child",):
            self._over(self.down[to], leave, self.net.frame_bytes, hop.below, hop.name, out)
        else:
            up = self.at[emit.dests[0]]
            self._over(self.up[up], leave, self.net.frame_bytes, up, "child", out)

    def run_round(self, chunks: int) -> RoundTime:
        """Aggregate one round of `chunks` chunks; returns its time (extrapolated past `cap` chunks)."""
        k = self.net.words
        clock = self.clock
        simulated = min(chunks, self.cap)
        start = clock.now
        xfer = PhaseTransfer(job_id=JOB, worker_id=0, words=k, pool=self.pool, rtt=self.rtt, tag=self._tag, op=0,
                             payload=np.zeros(simulated * k, np.int32), name=f"round{self._tag}", now=clock.now,
                             deadline=1e9, window=self.window)
        self._tag = (self._tag + 1) & 0xFFFF
        answered: list[float] = []

        def on_worker(frame: bytes) -> None:
            if not frame[AT_FLAGS] & Flags.RESEND:  # the multicast RESULT of a chunk (not a unicast re-send)
                answered.append(clock.now)
            self._send(xfer.receive(frame, clock.now))

        self._on_worker = on_worker
        self._send(xfer.start(clock.now))
        while not xfer.done:
            timer = xfer.next_timer()
            if not clock.step(until=timer):  # one frame at a time: each can move the sender's timer
                clock.advance(timer)
                self._send(xfer.poll(clock.now))
        self._on_worker = _ignore
        clock.run()  # stray copies of resent frames: let them land before the next round
        seconds = clock.now - start
        if chunks > simulated:
            half = simulated // 2
            interval = (answered[-1] - answered[half]) / (len(answered) - 1 - half)
            extra = (chunks - simulated) * interval
            self.shift += extra
            seconds += extra
        return RoundTime(chunks, simulated, seconds, int(xfer.stats.get("retransmissions", 0)))

    def ports(self) -> list[dict]:
        """Every switch port on the way up and the most packets it queued so far, counted as ns-3 counts them
        (the one on the wire not included; a packet that finds the port idle counts 1)."""
        out = []
        for i, hop in enumerate(self.net.hops):
            below = "a worker" if hop.below < 0 else self.net.hops[hop.below].name
            if hop.below >= 0:  # a worker's own NIC is no switch port: Linux's 1,000 packets hold its window
                out.append({"port": f"{below} up to {hop.name}", "queued": _queued(self.up[i])})
            out.append({"port": f"{hop.name} down to {below}", "queued": _queued(self.down[i])})
        return out

    def run(self, rounds: Sequence[Round], residual_chance: float = 0.0) -> dict:
        """Every round in turn; the sketch's residual charged as `residual_chance` of a one-chunk round.  Where
        a switch port would have queued more than the fabric's `queue`, the run is outside the model's
        domain (`in_domain` False, `overflows` says where): there a real port drops, and the model's
        identical workers cannot say what the resends cost (ns-3 can: sim/ns3sim.py)."""
        times = [self.run_round(round_chunks(r, self.net.words)) for r in rounds]
        seconds = sum(t.seconds for t in times)
        if residual_chance:
            extra = self.run_round(1).seconds * residual_chance
            seconds += extra
        ports, queue = self.ports(), self.net.fabric.queue
        over = [p for p in ports if queue is not None and p["queued"] > queue]
        return {"seconds": seconds, "rounds": [dataclasses.asdict(t) for t in times],
                "chunks": sum(t.chunks for t in times),
                "retransmissions": sum(t.retransmissions for t in times),
                "deepest_queue": max(p["queued"] for p in ports), "queue": queue, "in_domain": not over,
                "overflows": over}


def _queued(link: Link) -> int:
    """The most packets `link`'s port queued, as ns-3 counts them: held less the one being sent, at least 1
    once it carried anything."""
    return max(link.deepest - 1, min(link.deepest, 1))


def outside(result: dict) -> str | None:
    """Why a run of `aggregation_seconds` lies outside the model's domain, in a phrase; None where it does not."""
    if result["in_domain"]:
        return None
    worst = max(result["overflows"], key=lambda p: p["queued"])
    more = len(result["overflows"]) - 1
    return (f"{worst['port']} would queue {worst['queued']} packets, a port holds {result['queue']}"
            + (f" ({more} more port{'s' if more > 1 else ''} would drop too)" if more else ""))


def aggregation_seconds(net: Setup, rounds: Sequence[Round], residual_chance: float = 0.0, *,
                        cap: int = 2048, congestion: CongestionSettings = SIMULATED_HOST) -> dict:
    """The modelled seconds of one aggregation (a fresh worker, as a Mininet run's first); `congestion`: the
    worker's settings (a real host's, `CongestionSettings()`, to stand beside a Mininet run)."""
    return PathModel(net, cap=cap, congestion=congestion).run(rounds, residual_chance)


def _ignore(frame: bytes) -> None:
    """A frame for the worker between rounds: a stray copy, nobody's."""


# -- the ring --------------------------------------------------------------------------------------
def ring_seconds(workers: int, gradient_bytes: float, rate: float, alpha: float) -> float:
    """Bandwidth-optimal ring allreduce (reduce-scatter then allgather), alpha-beta:
    2 (N - 1) alpha + 2 (N - 1) / N * bytes * 8 / rate."""
    if workers == 1:
        return 0.0
    return 2 * (workers - 1) * alpha + 2 * (workers - 1) / workers * gradient_bytes * 8 / rate


def ring_wire_bytes(net: Setup, payload_bytes: float, mtu: int = 9000) -> float:
    """The ring's payload framed in MTU-sized TCP segments with the network's per-frame overhead."""
    per_frame = mtu - TCP_HEADERS
    return payload_bytes * (per_frame + TCP_HEADERS + net.overhead - IPV4_HEADER_BYTES - UDP_HEADER_BYTES) / per_frame


def ring_for(net: Setup, length: int, host_alpha: float = 0.0) -> float:
    """The ring over `net`, float32 gradients: workers in rack order, so each uplink carries one flow per
    direction and the slowest hop crosses the root (2 depth links, 2 depth - 1 switches); every step
    waits for the slowest hop, so alpha is that hop's latency plus `host_alpha`, the rate the slowest link's."""
    rate = min(hop.rate for hop in net.hops)
    hops = 2 * net.depth if net.workers > net.fanins[0] else 2
    alpha = host_alpha + hops * net.delay + (hops - 1) * net.switch_latency
    return ring_seconds(net.workers, ring_wire_bytes(net, 4.0 * length), rate, alpha)

