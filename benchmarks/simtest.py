"""Simulation testing as FoundationDB does it: a seed draws a scenario, ns-3 runs it, its sums and time are checked.

    python benchmarks/simtest.py --runs 200 --seed 1 [--jobs N] [--json] [--out PATH]
    python benchmarks/simtest.py --replay SEED [--trace RANK ...] [--chunk N ...] [--between T0 T1]
    python benchmarks/simtest.py --table RESULT_JSON
    python benchmarks/simtest.py --compare BASE NEW

The campaign's seed draws one seed per run (the first N of a longer campaign's are the N of a shorter one),
and each run's seed draws its scenario (`draw`): a fabric (star, leaf/spine, fat tree, 4 to 256 workers,
skewed towards small), the hosts' rate and the leaves' oversubscription, the switch ports' queue, frames
of MTU 1500 or 9000, the job's slots, its rounds of a model-shaped gradient's real words, and what goes
wrong: loss, duplication and reordering on some links (`ns3sim.Impairment`), starts spread out, a
straggler (late, or on a slower link), a worker killed mid-round, a switch restarted mid-run (bare, or its
jobs installed again), several jobs at once on disjoint slots.  The run is `hina.sim.ns3sim` with every
worker's own sender (a `hina.host.Worker`'s default rules) and every switch's own pipeline, every RESULT
and every worker's result checked against numpy's sum.  Everything that happens follows from the seed:
`--replay SEED` runs that scenario alone and says what happened to every worker; with `--trace`, the workers on
the hosts of those ranks write every frame they receive and send as they go, and their estimator and window,
and with `--chunk` every switch writes what it made of each frame of those chunks (`ns3sim.Trace`; `--between`
T0 T1 milliseconds: only then), which is how a run over its bound is read.

Before the run its time bound is stated (`state_bound`, docs/reliability.md "The simulation campaign"):
the scale model's lossless time on the same fabric, grown by the loss and a bounded number of
retransmission timeouts of a timer fit to the path.  A run is **inexact** when a worker's sum is not
numpy's or a worker ends otherwise than the docs promise (a refusal where nobody restarted a switch), and
**over its bound** when a worker sums after its bound, times out in a run where the sum is promised, or,
where a worker was killed or a switch restarted, ends only after the deadline that follows the fault.

`--json` prints one line per run and last `{"runs": N, "inexact": 0, "over_bound": 0, "failures": [...]}`
(each failure: its seed, what failed, the command that replays it).  Exit status 1 when a run is inexact or
over its bound, 2 on bad arguments.  Results go to hina-results/simtest.json unless --out says otherwise.
Needs ns-3's Python bindings: pip install 'hina[ns3]' (`make install` does).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import multiprocessing
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator

import numpy as np

from hina.cliargs import OneLineParser, between, existing_file
from hina.control import Fabric
from hina.host.window import Ring
from hina.host.workloads import PRESETS
from hina.progress import Progress
from hina.provenance import command_line, default_out, out_help, out_path, write_result
from hina.sim import ns3sim
from hina.sim.scale import PHY_OVERHEAD, Setup, aggregation_seconds
from hina.wire.headers import FRAME_OVERHEAD, max_words

GBIT = 1000  # Mbit/s: a fabric's unit
SCRIPT = "benchmarks/simtest.py"

# -- what a scenario draws from (`draw`) -------------------------------------------------------------------
WORKERS = (4, 8, 16, 32, 64, 128, 256)  # a size class each: 4, 5 to 8, 9 to 16, ... 129 to 256 workers
WORKER_WEIGHTS = (26, 24, 18, 13, 9, 6, 4)  # most runs small: a second or less of wall time each
HOST_GBPS = (1, 10, 25, 100)
QUEUES = (8, 16, 32, 64, 100, None)  # packets per switch port (None: no limit)
MTUS = (1500, 9000)
SLOTS = (8, 16, 32, 64)
DELAYS_US = (0.5, 1.0, 2.0, 10.0)  # propagation per link
SWITCH_LATENCY = 1e-6
FRAME_BUDGET = 40_000  # UPDATEs per run (workers x chunks of every round and job): about a second of wall time
WORD_BUDGET = 1 << 24  # words of results held at once (every worker's round): 64 MiB
MAX_CHUNKS = 400  # per round
REORDER_FRAMES = 8  # a held frame waits up to this many of its link's frame times
# the chance a scenario has each thing go wrong
P_IMPAIRED, P_SPREAD, P_STRAGGLER, P_KILL, P_RESTART, P_JOBS = 0.45, 0.5, 0.15, 0.1, 0.1, 0.15

# -- the bound (`state_bound`; docs/reliability.md says why each) ------------------------------------------
MODEL_SLACK = 1.5  # the scale model's lossless time may grow by half: the spread case's own bar
RTO_RTTS = 3  # a timeout fit to the path waits this many loaded round trips ...
RTO_FLOOR = 200e-6  # ... and at least this long (a datacenter's fine-grained timer)
RESTART_RTOS = 2  # timeouts a restart may add to a sum: the lost copies' contributors resend, once more if lost
DEADLINE_FLOOR = 0.25  # seconds a chunk may wait before its worker gives up: far past a timer fit to the path ...
DEADLINE_BOUNDS = 4  # ... and past this many times the run's bound


@dataclasses.dataclass(frozen=True)
class Scenario:
    """One run, as drawn from its seed: the fabric, the jobs (a preset and its rounds' chunks each) and what goes
    wrong.  JSON-ready (`to_dict`, `from_dict`): a regression test keeps the scenario itself, not only its seed."""

    seed: int
    fabric: str  # star, leaf_spine, fat_tree
    workers: int
    gbps: float  # the hosts' links
    queue: int | None
    mtu: int
    slots: int
    delay_us: float
    jobs: tuple[tuple[str, tuple[int, ...]], ...]  # (preset, chunks of each round)
    rack: int = 0  # leaf_spine
    spines: int = 0  # leaf_spine
    k: int = 0  # fat_tree
    oversubscription: float = 1.0  # a leaf's (an edge's) hosts' rate over its uplinks'
    start_spread_us: float = 0.0
    impair: dict | None = None  # {"scope", "drop", "dup", "reorder"}: the level; each link's drawn around it
    straggler: dict | None = None  # {"rank", "late_us"} or {"rank", "slow"} (its link's rate divided by slow)
    kill: dict | None = None  # {"rank", "job", "at"}: "at" a fraction of the bound's start and lossless time
    restart: dict | None = None  # {"switch", "at", "down_us", "reinstall"}

    def to_dict(self) -> dict:
        return json.loads(json.dumps(dataclasses.asdict(self)))

    @classmethod
    def from_dict(cls, d: dict) -> Scenario:
        d = dict(d)
        d["jobs"] = tuple((name, tuple(chunks)) for name, chunks in d["jobs"])
        return cls(**d)

    @property
    def words(self) -> int:
        return max_words(self.mtu)

    @property
    def faulted(self) -> str | None:
        """"kill" or "restart" where one is drawn: what the docs promise then is a clean end, not a sum."""
        return "kill" if self.kill else "restart" if self.restart else None

    def describe(self) -> str:
        """The scenario in one line."""
        shape = {"star": "star", "leaf_spine": f"leaf/spine, racks of {self.rack}, {self.spines} spines",
                 "fat_tree": f"fat tree k={self.k}"}[self.fabric]
        parts = [f"{self.workers} workers, {shape}, {self.gbps:g} Gbit/s"
                 + (f" {self.oversubscription:g}:1" if self.oversubscription != 1 else "")
                 + f", queues {self.queue or 'unlimited'}, MTU {self.mtu}, W {self.slots}",
                 " + ".join(f"{name} {'/'.join(map(str, chunks))} chunks" for name, chunks in self.jobs)]
        if self.impair:
            im = self.impair
            parts.append(f"{im['scope']}: drop {im['drop']:.2%} dup {im['dup']:.2%} reorder {im['reorder']:.2%}")
        if self.start_spread_us:
            parts.append(f"starts over {self.start_spread_us:.1f} us")
        if self.straggler:
            s = self.straggler
            parts.append(f"worker {s['rank']} " + (f"{s['late_us']:.1f} us late" if "late_us" in s
                                                   else f"on a link {s['slow']}x slower"))
        if self.kill:
            parts.append(f"worker {self.kill['rank']} of job {self.kill['job']} killed at {self.kill['at']:.0%}")
        if self.restart:
            r = self.restart
            parts.append(f"switch {r['switch']} restarted at {r['at']:.0%}, down {r['down_us']:.1f} us"
                         + (", jobs installed again" if r["reinstall"] else ", bare"))
        return "; ".join(parts)


# -- drawing -------------------------------------------------------------------------------------------
def seeds(campaign_seed: int, runs: int) -> list[int]:
    """Each run's seed: the first `runs` drawn from the campaign's (so a shorter campaign is a longer one's start)."""
    return [int(s) for s in np.random.default_rng(campaign_seed).integers(0, 2 ** 31, runs)]


def draw(seed: int) -> Scenario:
    """The scenario run `seed` stands for: every choice from one generator seeded by it."""
    rng = np.random.default_rng([seed, 0x517E57])
    size = int(rng.choice(len(WORKERS), p=np.array(WORKER_WEIGHTS) / sum(WORKER_WEIGHTS)))
    n = int(rng.integers(WORKERS[size - 1] + 1 if size else WORKERS[0], WORKERS[size] + 1))  # racks not always full
    shape = _draw_shape(rng, n)
    mtu, slots = int(rng.choice(MTUS)), int(rng.choice(SLOTS))
    jobs = _draw_jobs(rng, n, max_words(mtu), 1 + int(rng.integers(1, 3)) if rng.random() < P_JOBS else 1)
    sc = Scenario(seed=seed, workers=n, gbps=float(rng.choice(HOST_GBPS)), queue=_pick(rng, QUEUES), mtu=mtu,
                  slots=slots, delay_us=float(rng.choice(DELAYS_US)), jobs=jobs, **shape)
    if rng.random() < P_IMPAIRED:
        sc = dataclasses.replace(sc, impair=_draw_impair(rng))
    if rng.random() < P_SPREAD:
        sc = dataclasses.replace(sc, start_spread_us=_log_uniform(rng, 1, 1000))
    if rng.random() < P_STRAGGLER:
        rank = int(rng.integers(n))
        sc = dataclasses.replace(sc, straggler={"rank": rank, "late_us": _log_uniform(rng, 1, 2000)}
                                 if rng.random() < 0.5 else {"rank": rank, "slow": int(rng.choice((2, 4, 8)))})
    fault = rng.random()
    if fault < P_KILL:
        sc = dataclasses.replace(sc, kill={"rank": int(rng.integers(n)), "job": int(rng.integers(len(jobs))),
                                           "at": float(rng.uniform(0.05, 0.95))})
    elif fault < P_KILL + P_RESTART:
        switches = [s.name for s in fabric_of(sc).switches]
        sc = dataclasses.replace(sc, restart={
            "switch": str(rng.choice(switches)), "at": float(rng.uniform(0.05, 0.95)),
            "down_us": 0.0 if rng.random() < 0.3 else _log_uniform(rng, 1, 200), "reinstall": bool(rng.random() < 0.5)})
    return sc


def _pick(rng, choices):
    return choices[int(rng.integers(len(choices)))]


def _log_uniform(rng, low: float, high: float) -> float:
    return float(math.exp(rng.uniform(math.log(low), math.log(high))))


def _draw_shape(rng, n: int) -> dict:
    """A fabric that holds n workers with at most 32 children per switch: a star up to 32, a leaf/spine
    (racks of 4 to 32, 1 to 4 spines, 1:1 to 8:1), a fat tree (a k that holds n, 1:1 to 4:1)."""
    kinds = ["leaf_spine", "fat_tree"] + (["star"] if n <= 32 else [])
    kind = _pick(rng, kinds)
    if kind == "star":
        return {"fabric": kind}
    if kind == "leaf_spine":
        rack = _pick(rng, [r for r in (4, 8, 16, 32) if -(-n // r) <= 32 and r <= n])
        return {"fabric": kind, "rack": rack, "spines": int(rng.integers(1, 5)),
                "oversubscription": float(rng.choice((1, 2, 4, 8)))}
    k = _pick(rng, [k for k in range(4, 17, 2) if k ** 3 // 4 >= n])
    return {"fabric": kind, "k": k, "oversubscription": float(rng.choice((1, 2, 4)))}


def _draw_jobs(rng, n: int, words: int, count: int) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """`count` jobs, each a preset and 1 to 3 rounds of 1 to MAX_CHUNKS chunks (log-uniform), within the run's
    frame and memory budgets."""
    rounds = [1 + int(rng.integers(3)) for _ in range(count)]
    frames = FRAME_BUDGET // (n * sum(rounds))
    memory = WORD_BUDGET // (n * count * words)
    most = max(1, min(MAX_CHUNKS, frames, memory))
    names = sorted(PRESETS)
    return tuple((names[int(rng.integers(len(names)))],
                  tuple(max(1, int(_log_uniform(rng, 1, most + 1))) for _ in range(r))) for r in rounds)


def _draw_impair(rng) -> dict:
    """A level of loss (0.01% to 5%, log-uniform), duplication and reordering (each none or up to 5% and
    10%), and where: every link, the hosts' links, the links between switches, or one link."""
    return {"scope": str(rng.choice(("every link", "host links", "switch links", "one link"))),
            "drop": _log_uniform(rng, 1e-4, 5e-2) if rng.random() < 0.8 else 0.0,
            "dup": _log_uniform(rng, 1e-4, 5e-2) if rng.random() < 0.4 else 0.0,
            "reorder": _log_uniform(rng, 1e-3, 0.1) if rng.random() < 0.4 else 0.0}


# -- the network and the faults ------------------------------------------------------------------------------
def fabric_of(sc: Scenario, host_gbps: float | None = None) -> Fabric:
    """The scenario's fabric, every link between switches at a rate of its own (so that a slower host rate,
    `host_gbps`, changes the hosts' links alone), alike on every way up: the scale model runs host 0's, which is
    then the slowest (its rack is full; a leaf's uplinks are a full rack's share, a fat tree's links the hosts'
    rate over the oversubscription)."""
    rate = (host_gbps or sc.gbps) * GBIT
    if sc.fabric == "star":
        return Fabric.star(sc.workers, rate=rate, queue=sc.queue)
    if sc.fabric == "leaf_spine":
        uplink = sc.rack * sc.gbps * GBIT / (sc.spines * sc.oversubscription)
        return Fabric.leaf_spine(sc.workers, rack=sc.rack, spines=sc.spines, rate=rate, uplink_rate=uplink,
                                 queue=sc.queue)
    tree = Fabric.fat_tree(sc.workers, k=sc.k, rate=rate, queue=sc.queue)
    uplink = sc.gbps * GBIT / sc.oversubscription  # every link alike: host 0's way up is the slowest, as the model runs
    return dataclasses.replace(tree, links=tuple(dataclasses.replace(ln, rate=uplink) for ln in tree.links))


def frame_seconds(sc: Scenario, mbps: float) -> float:
    """One frame's time on a link of `mbps`: the hina frame of K words, its Ethernet/IPv4/UDP and physical framing."""
    return (Ring.frame_size(sc.words) + FRAME_OVERHEAD + PHY_OVERHEAD) * 8 / (mbps * 1e6)


def impaired_links(sc: Scenario, fabric: Fabric) -> dict[tuple[str, str], ns3sim.Impairment]:
    """Each impaired link and what it does: the scenario's scope, each link's rates the level times 0.5 to 1.5
    (drawn from the seed), a held frame up to REORDER_FRAMES of its link's frame times."""
    im = sc.impair
    if not im:
        return {}
    rng = np.random.default_rng([sc.seed, 0x11A4])
    rates = fabric.link_rates()
    hosts = [((h.name, h.switch), fabric.rate) for h in fabric.hosts]
    cables = [((ln.a, ln.b), rates[ln.a, ln.b]) for ln in fabric.links]
    chosen = {"every link": hosts + cables, "host links": hosts, "switch links": cables or hosts,
              "one link": [_pick(rng, hosts + cables)]}[im["scope"]]
    out = {}
    for key, mbps in chosen:
        f = rng.uniform(0.5, 1.5, 3)
        out[key] = ns3sim.Impairment(drop=min(0.5, im["drop"] * f[0]), dup=min(0.5, im["dup"] * f[1]),
                                     reorder=min(0.5, im["reorder"] * f[2]),
                                     hold=REORDER_FRAMES * frame_seconds(sc, mbps))
    return out


# -- the bound, stated before the run ------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Bound:
    """A run's time bound and its parts (docs/reliability.md, "The simulation campaign"): every worker sums by
    `seconds` = `start` + the sum over jobs of (MODEL_SLACK x `growth` x the job's lossless time + its `rtos` x
    `rto`); where a worker is killed or a switch restarted at `fault_at`, one that does not sum ends by
    `fault_by` = `fault_at` + `seconds` + `deadline`."""

    start: float  # the last worker's first frame: the spread and a late straggler's lateness
    lossless: tuple[float, ...]  # each job's time on the scale model (ports that fit: `window`; links `held` longer)
    held: float  # seconds reordering links hold a chunk's round trip back, on average at most (the model's links')
    flow: float  # how much slower reordering links pass a flow's frames (a held frame holds the frames behind it)
    in_domain: bool  # the model's ports held what every job's window W queues
    window: int  # the window each job's time is the model's at: W, or its share of one the ports hold
    growth: float  # (1 + duplication) x the expected transmissions of a chunk's last UPDATE
    rtos: tuple[int, ...]  # timeouts each job may wait: its tail's losses, the window's convergence, a restart
    rto: float  # one timeout of a timer fit to the path
    rtt: float  # the loaded round trip it is fit to
    seconds: float
    deadline: float  # the workers' deadline (seconds without progress)
    fault_at: float | None
    fault_by: float | None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _tail_sum(qs: list[float], copies: int = 1) -> float:
    """sum over k >= 1 of min(1, copies x sum of q^k over `qs`): a bound on the expected number of times the worst of
    `copies` transmissions per path, each lost with its path's probability q, is lost in a row (the union bound
    on E[max of geometric] - 1)."""
    total, k = 0.0, 1
    while k < 200:
        term = min(1.0, copies * sum(q ** k for q in qs if q > 0))
        total += term
        if term < 1e-6:
            break
        k += 1
    return total


def _ways_up(fabric: Fabric, links: dict[tuple[str, str], ns3sim.Impairment],
             of_link: Callable[[ns3sim.Impairment | None], float],
             joined: Callable[[float, float], float]) -> list[float]:
    """Each host's value of one round trip of a chunk: its own link's (`of_link`), joined with the worst way on
    from its switch, tier by tier a link up to one of the switch's parents and back (a chunk's slot picks one)."""
    def of(a: str, b: str) -> float:
        return of_link(links.get((a, b)) or links.get((b, a)))

    above: dict[str, float] = {}

    def up(switch: str) -> float:  # the worst round trip from `switch` to a root and back
        if switch not in above:
            above[switch] = max((joined(of(switch, parent), up(parent)) for parent, _, _ in fabric.parents(switch)),
                                default=0.0)
        return above[switch]

    return [joined(of(h.name, h.switch), up(h.switch)) for h in fabric.hosts]


def path_losses(fabric: Fabric, links: dict[tuple[str, str], ns3sim.Impairment], what: str = "drop") -> list[float]:
    """Each host's chance that one round trip of a chunk is lost (`what`: "drop"; "reorder": held back): its own
    link both ways, then the worst way up to a root and back."""
    return _ways_up(fabric, links, lambda im: getattr(im, what) if im else 0.0,
                    lambda p, rest: 1 - (1 - p) ** 2 * (1 - rest))


def path_holds(fabric: Fabric, links: dict[tuple[str, str], ns3sim.Impairment]) -> list[float]:
    """Each host's longest hold in one round trip of a chunk: every reordering link of its worst way up and back
    holding the chunk's frame for its whole hold, each way."""
    return _ways_up(fabric, links, lambda im: im.hold if im and im.reorder else 0.0, lambda h, rest: 2 * h + rest)


def state_bound(sc: Scenario) -> Bound:
    """The run's bound, from the scenario alone (docs/reliability.md gives the form and why)."""
    fabric = fabric_of(sc)
    slow = sc.straggler.get("slow", 1) if sc.straggler else 1
    model_fabric = fabric_of(sc, sc.gbps / slow)  # the slowest member paces every chunk: all at its rate
    start = sc.start_spread_us * 1e-6 + (sc.straggler.get("late_us", 0) * 1e-6 if sc.straggler else 0.0)
    jobs = len(sc.jobs)
    # the jobs' windows together are what the ports see: outside the model's domain, the window halves until
    # they hold it, and each job runs its share of that (its lossless time, the jobs' added: they share links)
    fit, in_domain = _fitting(sc, model_fabric, [c for _, chunks in sc.jobs for c in chunks], jobs * sc.slots)
    window = min(sc.slots, max(1, fit // jobs))
    links = impaired_links(sc, fabric)
    # Links that hold frames back: where round trips set the time, a chunk waits for the last of its frames, so its
    # round trip meets a hold with the chance that any host's does, for the longest way's holds, half of each on
    # average (a hold is uniform up to it): the model's links that much longer.  Where the links set it, a held
    # frame holds its flow (a flow stays in order), so a link passes a frame per frame time plus, with the chance
    # r, half a hold.  The lossless time is the larger.
    held = min(1.0, sum(path_losses(fabric, links, "reorder"))) * max(path_holds(fabric, links), default=0.0) / 2
    flow = 1 + max((im.reorder for im in links.values()), default=0.0) * REORDER_FRAMES / 2
    depth = Setup(model_fabric).depth
    lossless = tuple(_lossless(sc, model_fabric, chunks, window, held / (2 * depth), flow) for _, chunks in sc.jobs)
    qs = path_losses(fabric, links)
    dup = max((im.dup for im in links.values()), default=0.0)
    hold = max((im.hold for im in links.values() if im.reorder), default=0.0)
    growth = float((1 + dup) * (1 + _tail_sum(qs)))
    slowest = min([fabric.rate / slow, *fabric.link_rates().values()])
    rtt = (2 * depth * (sc.delay_us * 1e-6 + SWITCH_LATENCY + frame_seconds(sc, slowest) + hold)
           + jobs * sc.slots * frame_seconds(sc, fabric.rate / slow))  # every job's window queued at the NIC
    rto = max(RTO_FLOOR, RTO_RTTS * rtt)
    # a window that does not fit the ports converges there through losses, a timeout each at worst
    converge = math.ceil(math.log2(jobs * sc.slots / fit)) if fit < jobs * sc.slots else 0
    tail = math.ceil(_tail_sum(qs, sc.slots))  # the last window's losses: nothing behind them shows them
    rtos = tuple(len(chunks) * (tail + converge) + (RESTART_RTOS if sc.restart else 0) for _, chunks in sc.jobs)
    seconds = start + sum(MODEL_SLACK * growth * t + r * rto for t, r in zip(lossless, rtos))
    seconds += sc.restart["down_us"] * 1e-6 if sc.restart else 0.0
    deadline = max(DEADLINE_FLOOR, DEADLINE_BOUNDS * seconds)
    fault = sc.kill or sc.restart
    fault_at = fault["at"] * (start + sum(lossless)) if fault else None
    return Bound(start, lossless, held, flow, in_domain, window, growth, rtos, rto, rtt, seconds, deadline, fault_at,
                 None if fault_at is None else fault_at + seconds + deadline)


def _lossless(sc: Scenario, fabric: Fabric, chunks: tuple[int, ...], window: int, held: float, flow: float) -> float:
    """A job's lossless time: the model's, or where links reorder the larger of the model with each link `held`
    seconds longer and `flow` times the model's."""
    seconds = _model(sc, fabric, chunks, window)[0]
    return max(flow * seconds, _model(sc, fabric, chunks, window, held)[0]) if held else seconds


def _model(sc: Scenario, fabric: Fabric, chunks: list[int] | tuple[int, ...], window: int,
           held: float = 0.0) -> tuple[float, bool]:
    """The scale model's seconds for rounds of these chunks at this window, and whether its ports held them; `held`:
    seconds each link's delay is longer (a reordering link's holds)."""
    net = Setup(fabric, delay=sc.delay_us * 1e-6 + held, switch_latency=SWITCH_LATENCY, words=sc.words, slots=window)
    model = aggregation_seconds(net, [(c * sc.words,) for c in chunks], cap=max(chunks) + 4 * window)
    return model["seconds"], model["in_domain"]


def _fitting(sc: Scenario, fabric: Fabric, chunks: list[int], window: int) -> tuple[int, bool]:
    """The largest window, from `window` down by halves, whose rounds the model's ports hold (each switch sends
    one partial or RESULT per chunk, so a port queues at most a window), and whether that is `window` itself."""
    fit = window
    while not _model(sc, fabric, chunks, fit)[1] and fit > 1:
        fit //= 2
    return fit, fit == window


# -- a run -------------------------------------------------------------------------------------------------
def faults_of(sc: Scenario, bound: Bound, fabric: Fabric) -> ns3sim.Faults:
    """What the scenario does to the run, on ns-3's terms: its links' impairments, the straggler, the fault at the
    instant the bound states."""
    s, kill, restart = sc.straggler or {}, sc.kill, sc.restart
    return ns3sim.Faults(
        links=impaired_links(sc, fabric),
        late={s["rank"]: s["late_us"] * 1e-6} if "late_us" in s else {},
        rates={s["rank"]: fabric.rate / s["slow"]} if "slow" in s else {},
        kill=ns3sim.Kill(kill["rank"], bound.fault_at, kill["job"]) if kill else None,
        restart=ns3sim.Restart(restart["switch"], bound.fault_at, restart["down_us"] * 1e-6, restart["reinstall"])
        if restart else None)


def run(sc: Scenario, trace: ns3sim.Trace | None = None) -> tuple[dict, ns3sim.Ns3Run]:
    """Run one scenario: its bound stated, then ns-3 (with `trace`, what some workers and switches did written as
    it goes); its record (`judge`'s verdicts) and the run itself."""
    bound = state_bound(sc)
    fabric = fabric_of(sc)
    jobs = [ns3sim.SimJob([(c * sc.words,) for c in chunks],
                          ns3sim.RealWords.of_preset(name, sc.workers, seed=sc.seed + j, words=1 << 15))
            for j, (name, chunks) in enumerate(sc.jobs)]
    started = time.perf_counter()
    result = ns3sim.simulate_jobs(fabric, jobs, words=sc.words, slots=sc.slots, cap=None, delay=sc.delay_us * 1e-6,
                                  switch_latency=SWITCH_LATENCY, start_spread=sc.start_spread_us * 1e-6, seed=sc.seed,
                                  deadline=bound.deadline, faults=faults_of(sc, bound, fabric),
                                  check_each=True, trace=trace)
    wall = time.perf_counter() - started
    return _record(sc, bound, result, wall), result


def _record(sc: Scenario, bound: Bound, result: ns3sim.Ns3Run, wall: float) -> dict:
    """A run as a JSON line: the scenario, its bound, the time over the bound, the verdicts (`judge`), how every
    worker ended, resends by cause, drops by place and reason, the faults' events."""
    inexact, over = judge(sc, bound, result)
    sums = [w.at for w in result.workers if w.outcome == "sum"]
    ends = Counter(w.outcome for w in result.workers)
    return {"seed": sc.seed, "scenario": sc.to_dict(), "bound": bound.to_dict(),
            "seconds": max(sums) if sums else None, "ratio": max(sums) / bound.seconds if sums else None,
            "ended_by": max(w.at for w in result.workers), "ends": dict(sorted(ends.items())),
            "exact": result.exact, "inexact": bool(inexact), "over_bound": bool(over), "what": inexact + over,
            "checked_results": result.checked, "retransmissions": result.retransmissions,
            "timeouts": result.timeouts, "probes": sum(w.probes for w in result.workers),
            "overtaken": sum(w.fast for w in result.workers), "queue_drops": result.drops, "lost": result.lost,
            "duplicated": result.duplicated, "held": result.held, "switch_drops": result.switch_drops,
            "max_queue": result.max_queue, "events": result.events, "wall_seconds": round(wall, 3)}


def judge(sc: Scenario, bound: Bound, result: ns3sim.Ns3Run) -> tuple[list[str], list[str]]:
    """What failed: (inexact, over the bound), each a list of phrases.  A sum is promised everywhere but where a
    worker is killed (then a survivor sums or raises AggregationTimeout) or a switch restarted (sums, times out or
    is refused: StaleSwitchState); a sum by the bound, a clean end by the fault's deadline."""
    allowed = {None: {"sum"}, "kill": {"sum", "timeout"}, "restart": {"sum", "timeout", "refused"}}[sc.faulted]
    victim = (sc.kill["job"], sc.kill["rank"]) if sc.kill else None
    everyone = [w for w in result.workers if (w.job, w.rank) != victim]
    wrong = [w for w in result.workers if w.exact is False]
    refused = [w for w in everyone if w.outcome == "refused" and w.outcome not in allowed]
    timed = [w for w in everyone if w.outcome == "timeout" and w.outcome not in allowed]
    late = [w for w in everyone if w.outcome == "sum" and w.at > bound.seconds]
    ended = [w for w in everyone if w.outcome != "sum" and w.outcome in allowed and w.at > bound.fault_by]
    n, inexact, over = len(result.workers), [], []
    if wrong:
        inexact.append(f"{len(wrong)} of {n} workers got a RESULT or a result that was not numpy's sum "
                       f"({_who(sc, wrong)})")
    if refused:
        inexact.append(f"{len(refused)} of {n} workers refused their run (StaleSwitchState) where the sum is promised; "
                       f"{_first(sc, refused)}")
    if timed:
        over.append(f"{len(timed)} of {n} workers timed out (AggregationTimeout) where the sum is promised; "
                    f"{_first(sc, timed)}")
    if late:
        last = max(w.at for w in late)
        over.append(f"{len(late)} of {n} workers summed past the bound of {bound.seconds * 1e3:.3f} ms, the last at "
                    f"{last * 1e3:.3f} ms ({last / bound.seconds:.2f}x)")
    if ended:
        last = max(w.at for w in ended)
        over.append(f"{len(ended)} of {n} workers ended ({', '.join(sorted({w.outcome for w in ended}))}) past "
                    f"{bound.fault_by * 1e3:.3f} ms (the fault at {bound.fault_at * 1e3:.3f} ms, the bound and the "
                    f"deadline), the last at {last * 1e3:.3f} ms")
    return inexact, over


def _who(sc: Scenario, workers: list) -> str:
    """Some workers by name: "worker 3 of job 1, worker 5 of job 1 and 7 more"."""
    names = [f"worker {w.rank} of job {w.job}" if len(sc.jobs) > 1 else f"worker {w.rank}" for w in workers]
    return ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")


def _first(sc: Scenario, workers: list) -> str:
    """The first of some workers to end, when and why."""
    w = min(workers, key=lambda w: w.at)
    return f"the first, {_who(sc, [w])}, at {w.at * 1e3:.3f} ms: {w.error}"


def replay_command(seed: int) -> str:
    return f"python {SCRIPT} --replay {seed}"


# -- the command line --------------------------------------------------------------------------------------
def line_of(record: dict, why: bool = True) -> str:
    """A run in a line: its seed, the verdict, its time against its bound (and, with `why`, what failed first)."""
    verdict = ("INEXACT" if record["inexact"] else "") + (" OVER BOUND" if record["over_bound"] else "")
    ends = ", ".join(f"{n} {k}" for k, n in record["ends"].items())
    took = (f"{record['seconds'] * 1e3:.3f} ms of {record['bound']['seconds'] * 1e3:.3f} ms bound "
            f"({record['ratio']:.2f})" if record["seconds"] is not None else
            f"ended by {record['ended_by'] * 1e3:.3f} ms")
    return f"seed {record['seed']}: {verdict.strip() or 'ok'}; {ends}; {took}" + (
        f"; {record['what'][0]}" if why and record["what"] else "")


def summary(records: list[dict]) -> dict:
    failures = [{"seed": r["seed"], "what": "; ".join(r["what"]), "replay": replay_command(r["seed"])}
                for r in records if r["inexact"] or r["over_bound"]]
    return {"runs": len(records), "inexact": sum(r["inexact"] for r in records),
            "over_bound": sum(r["over_bound"] for r in records), "failures": failures}


SHARES = (0.1, 0.25, 0.5, 0.75, 1.0)  # the distribution's classes of time over bound (`distribution`)


def distribution(records: list[dict]) -> list[str]:
    """A campaign's runs as docs/reliability.md shows them: how they ended, and the time every worker took to sum
    over the bound stated before the run, as a share of runs in each class and as percentiles."""
    ratios = np.array([r["ratio"] for r in records if r["ratio"] is not None])
    ends = Counter(k for r in records for k, n in r["ends"].items() if n)
    lines = [f"{len(records)} runs: {sum(r['inexact'] for r in records)} inexact, "
             f"{sum(r['over_bound'] for r in records)} over their bound; runs where a worker ended so: "
             + ", ".join(f"{k} {n}" for k, n in ends.most_common()),
             "", "| time / bound | runs | share |", "|---|---:|---:|"]
    low = 0.0
    for high in (*SHARES, math.inf):
        n = int(np.count_nonzero((ratios > low) & (ratios <= high))) if low else int(np.count_nonzero(ratios <= high))
        label = f"over {low:g}" if high == math.inf else (f"{low:g} to {high:g}" if low else f"up to {high:g}")
        lines.append(f"| {label} | {n} | {n / max(1, len(ratios)):.1%} |")
        low = high
    if len(ratios):
        p50, p90, p99 = np.percentile(ratios, (50, 90, 99))
        lines += ["", f"{len(ratios)} runs summed: time / bound median {p50:.2f}, 90th percentile {p90:.2f}, "
                      f"99th {p99:.2f}, most {ratios.max():.2f}"]
    return lines


MOVES = 10  # the runs `compare` names beside those that crossed their bound: the largest changes of time over bound


def compare(base: list[dict], new: list[dict], moves: int = MOVES) -> tuple[list[str], bool]:
    """Two campaigns run by run (a change to the sender or the switches against the committed result file): for
    each, its inexact runs, its runs over their bound and the excess over the bound summed over the runs (how far
    past 1 their time over bound went, in all), the median time over bound, timeouts and retransmissions; then
    every run that crossed its bound either way and the largest other changes.  Runs are matched by their seed,
    which draws the scenario; only the seeds both hold are compared.  Returns the lines, and whether the new
    campaign is worse somewhere: a run that fails (inexact or over its bound) where the base's did not, or is
    inexact where the base's was exact.  A ValueError where they share no seed."""
    new_by = {r["seed"]: r for r in new}
    pairs = [(a, new_by[a["seed"]]) for a in base if a["seed"] in new_by]
    if not pairs:
        raise ValueError("no run seed in both (campaigns of different --seed?)")

    def column(records: tuple[dict, ...]) -> list[str]:
        ratios = [r["ratio"] for r in records if r["ratio"] is not None]
        return [f"{sum(r['inexact'] for r in records)}", f"{sum(r['over_bound'] for r in records)}",
                f"{sum(max(0.0, x - 1.0) for x in ratios):.2f}",
                f"{float(np.median(ratios)):.3f}" if ratios else "-",
                f"{sum(r['timeouts'] for r in records):,}", f"{sum(r['retransmissions'] for r in records):,}"]

    rows = ("inexact", "over their bound", "excess over the bound, summed", "time / bound, median", "timeouts",
            "retransmissions")
    left, right = zip(*pairs)
    lines = [f"{len(pairs)} runs in both (base {len(base)}, new {len(new)})", "", "| | base | new |",
             "|---|---:|---:|"]
    lines += [f"| {row} | {a} | {b} |" for row, a, b in zip(rows, column(left), column(right), strict=True)]

    def ratio(r: dict) -> str:
        return "-" if r["ratio"] is None else f"{r['ratio']:.2f}"

    def line(a: dict, b: dict) -> str:
        return f"  seed {a['seed']}: {ratio(a)} -> {ratio(b)}  {a['scenario']['fabric'].replace('_', ' ')}, " \
               f"{a['scenario']['workers']} workers  ({replay_command(a['seed'])})"

    def failed(r: dict) -> bool:
        return bool(r["inexact"] or r["over_bound"])

    # worse: failed where the base did not, or inexact where the base was exact (over its bound, say)
    worse = [(a, b) for a, b in pairs if failed(b) and not failed(a) or b["inexact"] and not a["inexact"]]
    better = [(a, b) for a, b in pairs if failed(a) and not failed(b)]
    for title, group in (("failed in new, not in base (or inexact, not in base)", worse),
                         ("failed in base, not in new", better)):
        lines += ["", f"{title}: {len(group)}", *(line(a, b) for a, b in group)]
    crossed = {a["seed"] for a, _ in worse + better}
    moved = sorted(((a, b) for a, b in pairs if a["seed"] not in crossed
                    and a["ratio"] is not None and b["ratio"] is not None),
                   key=lambda ab: -abs(ab[1]["ratio"] - ab[0]["ratio"]))[:moves]
    lines += ["", f"the largest other changes of time over bound: {len(moved)}", *(line(a, b) for a, b in moved)]
    return lines, bool(worse)


TABLE_FIELDS = frozenset({"ratio", "inexact", "over_bound", "ends"})  # what `distribution` reads of a run
COMPARE_FIELDS = TABLE_FIELDS | {"seed", "scenario", "timeouts", "retransmissions"}  # and `compare`


def result_runs(path, flag: str, fields: frozenset[str]) -> list[dict]:
    """The runs of a result file `simtest.py` wrote, each with `fields`; else a ValueError naming `flag` and the
    file."""
    try:
        runs = json.loads(path.read_text())["runs"]
        if not isinstance(runs, list) or not all(isinstance(r, dict) and fields <= r.keys() for r in runs):
            raise TypeError
    except (ValueError, KeyError, TypeError):
        raise ValueError(f"{flag} {path}: not a result file of simtest.py") from None
    return runs


def replay(seed: int, as_json: bool, trace: ns3sim.Trace | None = None) -> int:
    """One scenario alone, verbosely: what was drawn, the bound, every worker's end, the faults, the drops; with
    `trace`, first, as the run goes, what some workers and the switches did (`ns3sim.Trace`)."""
    sc = draw(seed)
    record, result = run(sc, trace)
    if as_json:
        print(json.dumps(record), flush=True)
    for line in replay_lines(sc, record, result):
        print(line, file=sys.stderr if as_json else sys.stdout, flush=True)
    return 1 if record["inexact"] or record["over_bound"] else 0


def replay_lines(sc: Scenario, record: dict, result: ns3sim.Ns3Run) -> list[str]:
    b = record["bound"]
    lines = [f"seed {sc.seed}: {sc.describe()}",
             f"drawn: {json.dumps(sc.to_dict())}",
             f"bound: {b['seconds'] * 1e3:.3f} ms = start {b['start'] * 1e3:.3f} ms + per job "
             f"{MODEL_SLACK} x growth {b['growth']:.3f} x lossless "
             f"{', '.join(f'{t * 1e3:.3f}' for t in b['lossless'])} ms"
             + (f" (reordering: round trips held {b['held'] * 1e6:.1f} us longer, or flows {b['flow']:.3f}x slower)"
                if b.get("held") else "")
             + ("" if b["in_domain"] else f" (outside the model's domain: window {b['window']} of {sc.slots})")
             + f" + timeouts {', '.join(map(str, b['rtos']))} x {b['rto'] * 1e3:.3f} ms (loaded round trip "
             f"{b['rtt'] * 1e6:.1f} us); deadline {b['deadline'] * 1e3:.1f} ms"
             + (f"; fault at {b['fault_at'] * 1e3:.3f} ms, clean ends by {b['fault_by'] * 1e3:.3f} ms"
                if b["fault_at"] is not None else ""),
             *[f"event: {e}" for e in result.events],
             f"drops: {result.drops} in switch queues, {result.lost} lost on links, {result.duplicated} duplicated, "
             f"{result.held} held back, {result.restart_lost} at a restarting switch; the switches' pipelines: "
             f"{result.switch_drops or 'none'}; deepest switch queue {result.max_queue}",
             f"checked: {result.checked:,} RESULTs against numpy's sum; {result.retransmissions} retransmissions, "
             f"{result.timeouts} timeouts",
             "job rank outcome       at ms  round ends (ms)                 resent: timeouts probes overtaken"]
    for w in result.workers:
        ends = " ".join(f"{t * 1e3:.3f}" for t in w.round_ends)
        mark = "" if w.exact is not False else "  NOT numpy's sum"
        lines.append(f"{w.job:>3} {w.rank:>4} {w.outcome:<8} {w.at * 1e3:>9.3f}  {ends:<30} {w.retransmissions:>7}: "
                     f"{w.timeouts:>8} {w.probes:>6} {w.fast:>9}{mark}"
                     + (f"  {w.error}" if w.error and w.outcome != "killed" else ""))
    lines.append(line_of(record, why=False))
    for what in record["what"]:
        lines.append(f"  {what}")
    return lines


def _record_of(sc: Scenario) -> dict:
    """One run's record, as a campaign's process pool makes it."""
    record, _ = run(sc)
    return record


def _records(scenarios: list[Scenario], jobs: int) -> Iterator[dict]:
    """Each run's record, in the order of `scenarios`: `jobs` processes at once.  Every run follows from its
    seed alone, so the records are the same whatever `jobs` is but for their wall seconds.  The processes are
    forked, not spawned: ns-3 and the compiled kernels are loaded once, and a test's patches hold in them."""
    if jobs == 1:
        yield from map(_record_of, scenarios)
        return
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        yield from pool.imap(_record_of, scenarios)


def campaign(args) -> int:
    runs = seeds(args.seed, args.runs)
    scenarios = [draw(seed) for seed in runs]
    jobs = min(args.jobs, len(runs))
    records = []
    with Progress(len(runs), "simtest" + (f", {jobs} runs at once" if jobs > 1 else "")) as bar:
        with contextlib.closing(_records(scenarios, jobs)) as made:  # closed, the pool's processes end
            for sc in scenarios:
                bar.start(f"seed {sc.seed}: {sc.describe()}")  # the run whose record comes next
                record = next(made)
                records.append(record)
                if args.json:
                    bar.print(json.dumps(record), stream=sys.stdout)
                bar.done(line_of(record))
    total = summary(records)
    result = {"parameters": {"runs": args.runs, "seed": args.seed, "seeds": runs},
              "constants": {"model_slack": MODEL_SLACK, "rto_rtts": RTO_RTTS, "rto_floor": RTO_FLOOR,
                            "restart_rtos": RESTART_RTOS, "deadline_floor": DEADLINE_FLOOR,
                            "deadline_bounds": DEADLINE_BOUNDS},
              "runs": records, "summary": total}
    write_result(args.out, result, command_line(SCRIPT, args.argv))
    if args.json:
        print(json.dumps(total), flush=True)
    else:
        print(f"{total['runs']} runs: {total['inexact']} inexact, {total['over_bound']} over their bound; wrote "
              f"{args.out}" + "".join(f"\n  seed {f['seed']}: {f['what']}  ({f['replay']})" for f in total["failures"]))
    return 1 if total["inexact"] or total["over_bound"] else 0


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="simtest.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=between(1, 1_000_000), default=100, help="scenarios to draw and run (default: 100)")
    ap.add_argument("--seed", type=between(0), default=0,
                    help="the campaign's seed, which draws every run's (default: 0)")
    ap.add_argument("--replay", type=between(0), metavar="SEED",
                    help="run the scenario of this run seed alone, verbosely (writes no result file)")
    ap.add_argument("--trace", type=between(0), nargs="+", metavar="RANK",
                    help="with --replay: the workers on these hosts write every frame they send and receive")
    ap.add_argument("--chunk", type=between(0), nargs="+", metavar="N",
                    help="with --replay: every switch writes what it made of each frame of these chunks")
    ap.add_argument("--between", type=float, nargs=2, metavar=("T0", "T1"),
                    help="with --trace or --chunk: only from T0 to T1 milliseconds of simulated time")
    ap.add_argument("--jobs", type=between(1, 1024), default=os.cpu_count() or 1,
                    help="runs at once, each in a process of its own (default: the CPU count, "
                         f"{os.cpu_count() or 1} here); the results do not depend on it")
    ap.add_argument("--json", action="store_true", help="one JSON line per run on stdout, and last the summary")
    ap.add_argument("--out", type=out_path, default=default_out("simtest.json"), help=out_help("simtest.json"))
    ap.add_argument("--table", type=existing_file, metavar="RESULT_JSON",
                    help="print a result file's distribution of time over bound, as docs/reliability.md shows it")
    ap.add_argument("--compare", type=existing_file, nargs=2, metavar=("BASE", "NEW"),
                    help="two result files run by run: what failed, the excess over the bound, what moved (exit "
                         "status 1 when NEW fails a run that BASE did not, or is inexact where BASE was exact)")
    args = ap.parse_args(argv)
    args.argv = argv
    try:
        if args.table:
            print("\n".join(distribution(result_runs(args.table, "--table", TABLE_FIELDS))))
            return 0
        if args.compare:
            base, new = (result_runs(path, "--compare", COMPARE_FIELDS) for path in args.compare)
            try:
                lines, worse = compare(base, new)
            except ValueError as e:
                raise ValueError(f"--compare {args.compare[0]} {args.compare[1]}: {e}") from None
            print("\n".join(lines))
            return 1 if worse else 0
    except ValueError as e:
        ap.error(str(e))
    if (args.trace or args.chunk) and args.replay is None:
        ap.error(f"--{'trace' if args.trace else 'chunk'} goes with --replay SEED")
    if args.between and not (args.trace or args.chunk):
        ap.error("--between goes with --trace or --chunk")
    if args.between and not 0 <= args.between[0] <= args.between[1]:
        ap.error(f"--between {args.between[0]:g} {args.between[1]:g}: T0 from 0 up to T1 wanted")
    if args.trace:
        hosts = draw(args.replay).workers
        if max(args.trace) >= hosts:
            ap.error(f"--trace {max(args.trace)}: seed {args.replay} draws {hosts} hosts (ranks 0 to {hosts - 1})")
    missing = ns3sim.available()
    if missing:
        print(f"simtest.py: {missing}", file=sys.stderr)
        return 2
    if args.replay is not None:
        trace = None
        if args.trace or args.chunk:
            start, end = (t / 1e3 for t in args.between) if args.between else (0.0, math.inf)
            trace = ns3sim.Trace(frozenset(args.trace or ()), lambda line: print(line, flush=True), start, end,
                                 frozenset(args.chunk or ()))
        return replay(args.replay, args.json, trace)
    return campaign(args)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # its reader stopped early (`--trace ... | head`): end quietly, not with a traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so that the exit's flush writes nowhere
        sys.exit(1)
