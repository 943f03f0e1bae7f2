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

The abstraction that makes 1,024 workers cheap: workers are identical (the
same words, sent at the same instants on links of the same rate), so every
switch's children deliver a chunk's UPDATEs at the same instant and a copy
completes when any one of them arrives.  The model therefore runs ONE
representative path (`PathModel`): one worker, one switch per tier (leaf,
spine, root), each a real `Pipeline` whose job has one member, the tier
below.  What the other children change is represented explicitly: a
software switch's service time is charged for all its children's frames
(a serial server, in order of arrival), and bytes per link are counted
per tier (`link_bytes`).  Per-packet-per-worker simulation would be N
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

Queues have no limit unless `Network.queue` gives every switch port a
drop-tail queue; then a resent UPDATE that sends a partial up again does so
once per child, as every child of the representative resends (what ns-3,
with every worker, shows: sim/ns3sim.py, docs/ns3.md).

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
import math
from collections.abc import Sequence

import numpy as np

from hina.codec import auto, bitmap, sketch
from hina.codec.blocks import BLOCK_ELEMENTS
from hina.codec.params import MAX_WORKERS, CodecParams
from hina.codec.session import WorkerSession
from hina.codec.simulate import aggregate_round, check_gradients
from hina.control import JobConfig, Member
from hina.emulator import Pipeline
from hina.host.window import CongestionWindow, PhaseTransfer, Ring, RttEstimator, SlotPool
from hina.host.workloads import Dense, preset
from hina.sim.clock import Clock
from hina.sim.links import Link, Server
from hina.wire.headers import FRAME_OVERHEAD, IPV4_HEADER_BYTES, UDP_HEADER_BYTES, max_words

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


# -- the network --------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Network:
    """A star (depth 1) or a tree of `depth` tiers of switches over `workers` identical workers.

    gbps: every worker's link (each direction); uplink_gbps: every switch-to-switch link (default:
    gbps); delay: propagation per link (seconds); switch_latency: a switch's pipeline latency;
    switch_service: seconds per frame a software switch spends (0: a hardware pipeline at line rate);
    words: K per frame; slots: the job's W; overhead: bytes per frame besides the hina frame;
    shape: the children per switch of each tier, leaf tier first (default: `fanins`' rule), for a
    fabric whose racks and pods are given (sim/ns3sim.py's leaf/spine and fat tree); queue: frames each
    switch port's drop-tail queue holds (None: no limit; a worker's own NIC never drops); parallel: the
    uplinks each switch below the root spreads its slots over, modelled as one link of `uplink_gbps`
    (their sum) with `parallel` queues.
    """

    workers: int
    gbps: float
    depth: int = 1
    uplink_gbps: float | None = None
    delay: float = 1e-6
    switch_latency: float = 1e-6
    switch_service: float = 0.0
    words: int = max_words(9000)
    slots: int = 64
    overhead: int = FRAME_OVERHEAD + PHY_OVERHEAD
    shape: tuple[int, ...] | None = None
    queue: int | None = None
    parallel: int = 1

    def __post_init__(self) -> None:
        if self.workers < 1 or self.depth < 1:
            raise ValueError(f"workers and depth must be >= 1, got {self.workers} and {self.depth}")
        if self.shape is not None and (len(self.shape) != self.depth or math.prod(self.shape) < self.workers
                                       or min(self.shape) < 1):
            raise ValueError(f"shape {self.shape} does not hold {self.workers} workers in {self.depth} tiers")

    @property
    def fanins(self) -> tuple[int, ...]:
        """Children per switch, leaf tier first: ceil(N^(1/depth)) below every tier but the root, whose
        fan-in makes up the rest."""
        if self.shape is not None:
            return tuple(self.shape)
        if self.depth == 1:
            return (self.workers,)
        k = math.ceil(round(self.workers ** (1 / self.depth), 9))
        below = [k] * (self.depth - 1)
        return (*below, max(1, -(-self.workers // math.prod(below))))

    @property
    def frame_bytes(self) -> int:
        """Bytes on a link per UPDATE or RESULT: the hina frame (K words, always) and the overhead."""
        return Ring.frame_size(self.words) + self.overhead

    def rate(self, tier: int) -> float:
        """bits/s of the links between tier `tier` - 1 and `tier` (tier 0: worker to leaf)."""
        gbps = self.gbps if tier == 0 else (self.uplink_gbps or self.gbps)
        return gbps * 1e9

    @property
    def oversubscription(self) -> tuple[float, ...]:
        """Each non-root switch's downlink capacity over its uplink's."""
        return tuple(k * self.rate(t) / self.rate(t + 1) for t, k in enumerate(self.fanins[:-1]))

    def port_queue(self, tier: int, up: bool) -> int | None:
        """Frames the links of tier `tier` queue, up or down: one switch port on tier 0 (down; up is the
        worker's own NIC: no limit), `parallel` ports above."""
        if self.queue is None or (tier == 0 and up):
            return None
        return self.queue * (self.parallel if tier else 1)

    def line_rate_seconds(self, chunks: int) -> float:
        """`chunks` frames at the worker's link rate: the least a round can take."""
        return chunks * self.frame_bytes * 8 / self.rate(0)


def link_bytes(net: Network, chunks: int, *, aggregate: bool = True) -> list[dict]:
    """Bytes that one round of `chunks` chunks puts on each tier's links, up and down, per link.

    With `aggregate` (hina, SwitchML) a switch sends one partial up per chunk; without, it forwards
    every worker's UPDATE below it (and the root's RESULT comes back once per worker below).
    """
    out, below = [], 1
    for tier in range(net.depth):
        streams = 1 if aggregate else below
        out.append({"tier": tier, "up": streams * chunks * net.frame_bytes, "down": streams * chunks * net.frame_bytes})
        below *= net.fanins[tier]
    return out


def _parent_field(parent: Member) -> dict:
    """The JobConfig keyword that names a switch's parent (`parents`, one per spine; `parent` before)."""
    fields = JobConfig.__dataclass_fields__
    if "parents" in fields:
        return {"parents": (parent,)}
    if "parent" in fields:
        return {"parent": parent}
    raise ValueError("this checkout's switch has no tree rule (JobConfig has no parent): star only")


def has_trees() -> bool:
    return bool({"parent", "parents"} & set(JobConfig.__dataclass_fields__))


class _Switch:
    """One tier's switch on the representative path: the real `Pipeline` (one member: the tier below;
    a parent unless it is the root) and, for a software switch, a serial server of `service` per frame."""

    def __init__(self, net: Network, tier: int):
        self.fanin = net.fanins[tier]
        self.root = tier == net.depth - 1
        self.pipeline = Pipeline()
        # the tree rule (docs/design.md, "Aggregation trees")
        tree = {} if self.root else _parent_field(Member(0, "parent"))
        self.pipeline.add_job(JobConfig(JOB, 1, net.words, 0, net.slots, (Member(0, "child"),), **tree))
        self.service, self.latency = net.switch_service, net.switch_latency
        self.server = Server()  # the frames it handles, one after another (no queue limit)

    def process(self, now: float, frame, source: str, frames_in: int):
        """(when its output leaves, the Emit or None, how many copies of it go up) for a frame that stands
        for `frames_in` arrivals.  A resent UPDATE that sends the partial up again stands for every child's
        resend, and each of them sends the partial up again (docs/design.md, "Aggregation trees"): the
        copies up are then `fanin`, each to meet the uplink's queue."""
        job = self.pipeline.jobs[JOB]
        before = job.resent_up
        emit = self.pipeline.update(frame, source)
        copies = 0
        if emit is not None:
            copies = (self.fanin if job.resent_up > before else 1) if emit.dests == ("parent",) else self.fanin
        return self.server.serve(now, (frames_in + copies) * self.service) + self.latency, emit, copies


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

    def __init__(self, net: Network, *, cap: int = 2048, initial_rtt: float = 0.1):
        self.net, self.cap = net, max(cap, 4 * net.slots)
        self.pool = SlotPool(0, net.slots)
        self.rtt = RttEstimator(initial=initial_rtt)
        self.window = CongestionWindow(net.slots)
        self.switches = [_Switch(net, t) for t in range(net.depth)]
        # into switch t from below, and from switch t to below, each behind the queue of its ports
        self.up = [Link(net.rate(t), net.delay, net.port_queue(t, True)) for t in range(net.depth)]
        self.down = [Link(net.rate(t), net.delay, net.port_queue(t, False)) for t in range(net.depth)]
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
            self._over(self.up[0], self.clock.now, size, 0, 0, f)

    def _over(self, link: Link, now: float, size: int, kind: int, tier: int, frame) -> None:
        """`frame` onto `link` at `now`, delivered at the far end unless the link's queue drops it."""
        at = link.send(now, size)
        if at is not None:
            self.clock.at(at, self._deliver, kind, tier, frame)

    def _deliver(self, kind: int, tier: int, frame) -> None:
        """A frame arrives at switch `tier` (kind 0: from below, 1: from above) or at the worker (2)."""
        size = self.net.frame_bytes
        if kind == 2:
            self._on_worker(frame)
            return
        sw = self.switches[tier]
        fanin_below = sw.fanin if kind == 0 else 1
        leave, emit, copies = sw.process(self.clock.now, frame, "child" if kind == 0 else "parent", fanin_below)
        if emit is None:
            return
        out = bytes(emit.frame)
        if emit.dests == ("parent",):
            for _ in range(copies):
                self._over(self.up[tier + 1], leave, size, 0, tier + 1, out)
        elif tier == 0:
            self._over(self.down[0], leave, size, 2, 0, out)
        else:
            self._over(self.down[tier], leave, size, 1, tier - 1, out)

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
            if not frame[5] & 1:  # the multicast RESULT of a chunk (not a unicast re-send)
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

    def run(self, rounds: Sequence[Round], residual_chance: float = 0.0) -> dict:
        """Every round in turn; the sketch's residual charged as `residual_chance` of a one-chunk round."""
        times = [self.run_round(round_chunks(r, self.net.words)) for r in rounds]
        seconds = sum(t.seconds for t in times)
        if residual_chance:
            extra = self.run_round(1).seconds * residual_chance
            seconds += extra
        return {"seconds": seconds, "rounds": [dataclasses.asdict(t) for t in times],
                "chunks": sum(t.chunks for t in times),
                "retransmissions": sum(t.retransmissions for t in times)}


def aggregation_seconds(net: Network, rounds: Sequence[Round], residual_chance: float = 0.0, *,
                        cap: int = 2048) -> dict:
    """The modelled seconds of one aggregation (a fresh worker, as a Mininet run's first)."""
    return PathModel(net, cap=cap).run(rounds, residual_chance)


def _ignore(frame: bytes) -> None:
    """A frame for the worker between rounds: a stray copy, nobody's."""


# -- the ring --------------------------------------------------------------------------------------
def ring_seconds(workers: int, gradient_bytes: float, rate: float, alpha: float) -> float:
    """Bandwidth-optimal ring allreduce (reduce-scatter then allgather), alpha-beta:
    2 (N - 1) alpha + 2 (N - 1) / N * bytes * 8 / rate."""
    if workers == 1:
        return 0.0
    return 2 * (workers - 1) * alpha + 2 * (workers - 1) / workers * gradient_bytes * 8 / rate


def ring_wire_bytes(net: Network, payload_bytes: float, mtu: int = 9000) -> float:
    """The ring's payload framed in MTU-sized TCP segments with the network's per-frame overhead."""
    per_frame = mtu - TCP_HEADERS
    return payload_bytes * (per_frame + TCP_HEADERS + net.overhead - IPV4_HEADER_BYTES - UDP_HEADER_BYTES) / per_frame


def ring_for(net: Network, length: int, host_alpha: float = 0.0) -> float:
    """The ring over `net`, float32 gradients: workers in rack order, so each uplink carries one flow per
    direction and the slowest hop crosses the root (2 depth links, 2 depth - 1 switches); every step
    waits for the slowest hop, so alpha is that hop's latency plus `host_alpha`, the rate the slowest link's."""
    rate = min(net.rate(t) for t in range(net.depth))
    hops = 2 * net.depth if net.workers > net.fanins[0] else 2
    alpha = host_alpha + hops * net.delay + (hops - 1) * net.switch_latency
    return ring_seconds(net.workers, ring_wire_bytes(net, 4.0 * length), rate, alpha)

