"""hina on ns-3: every worker's sender and every switch's slot rules on ns-3's links and queues.

The packet-level counterpart of the scale model (sim/scale.py).  ns-3
(PyPI's `ns3`, its C++ reached through cppyy) owns the network: nodes,
point-to-point links of a rate and a propagation delay, each port's
drop-tail queue, the event scheduler.  hina's own Python pieces own what
hina decides, called back from ns-3 at each frame's simulated arrival:

- every worker runs its own `PhaseTransfer` (host/window.py: slots and
  copies, the congestion window, RACK and the tail probe, the RTT
  estimator and its timeouts), its timers scheduled as ns-3 events;
- every switch runs its own `Pipeline` (switch_emulator/pipeline.py, the
  compiled slot rules of controls.py) with the job's share on that switch:
  its children by port, and in a tree its parents by port (slot s goes up to
  parent s mod S, docs/design.md, "Aggregation trees").  What the pipeline
  emits leaves on those ports after the switch's latency.

No second implementation: the frames on ns-3's links are the bytes the
sender and the pipeline made (each padded with the 66 bytes of
Ethernet/IPv4/UDP and preamble, FCS and gap that the scale model counts,
less the 2-byte PPP header ns-3 adds).  A few dozen lines of C++ glue, JIT-
compiled by cling when ns-3 is loaded, copy frames between ns-3 packets and
Python, count each port's drops and deepest queue, and fire the timers.

Unlike the scale model, nothing here assumes the workers are alike: all N
senders run, every switch sees all its children's frames and every link
and queue carries what it carries.  Rounds of more than `cap` chunks are
run for their first `cap` chunks and the rest charged at the interval the
slowest worker saw between RESULTs over the second half (the scale model's
rule, so that both extrapolate the same steady state); `cap=None` runs
every chunk.

Fabrics (`star`, `leaf_spine`, `fat_tree`) keep a real switch's limit of 32
children (its arrival bitmap): more workers than that need a tree.  Each
fabric names the scale model's `Network` with the same tiers and rates
(`Fabric.network`), for the cross-check in benchmarks/ns3_scale.py.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence

import numpy as np

from hina.codec import Workspace
from hina.codec.params import MAX_WORKERS
from hina.control import JobConfig, Member
from hina.emulator import Pipeline
from hina.host.window import CongestionWindow, PhaseTransfer, Ring, RttEstimator, SlotPool
from hina.sim.scale import JOB, PHY_OVERHEAD, Network, Round, round_chunks
from hina.wire.headers import FRAME_OVERHEAD, max_words

PPP_HEADER = 2  # bytes ns-3's point-to-point device puts before each packet
PAD = FRAME_OVERHEAD + PHY_OVERHEAD - PPP_HEADER  # so that a frame's time on a link is the scale model's
HOST_QUEUE = 1000  # packets a worker's own NIC queues: Linux's txqueuelen, which holds any window

GLUE = r"""
#include <cmath>
#include <vector>
namespace hina_ns3 {
using namespace ns3;
typedef void (*RecvFn)(int, int, double);
typedef void (*TimerFn)(int, long long, double);
RecvFn g_recv = nullptr;
TimerFn g_timer = nullptr;
std::vector<uint8_t> g_buf(65536);
std::vector<Ptr<NetDevice>> g_devs;
std::vector<std::vector<int>> g_groups;
std::vector<long long> g_drops;
std::vector<long long> g_maxq;
uint32_t g_pad = 0;

bool OnReceive(int ep, Ptr<NetDevice>, Ptr<const Packet> p, uint16_t, const Address&) {
  uint32_t n = p->GetSize() - g_pad;
  p->CopyData(g_buf.data(), n);
  g_recv(ep, (int)n, Simulator::Now().GetSeconds());
  return true;
}
void OnDrop(int ep, Ptr<const Packet>) { g_drops[ep]++; }
void OnQueue(int ep, uint32_t, uint32_t now) { if ((long long)now > g_maxq[ep]) g_maxq[ep] = now; }
void OnTimer(int who, long long token) { g_timer(who, token, Simulator::Now().GetSeconds()); }

void Reset(RecvFn recv, TimerFn timer, uint32_t pad) {
  g_recv = recv; g_timer = timer; g_pad = pad;
  g_devs.clear(); g_groups.clear(); g_drops.clear(); g_maxq.clear();
}
int Attach(Ptr<NetDevice> dev) {
  int ep = (int)g_devs.size();
  g_devs.push_back(dev);
  g_drops.push_back(0); g_maxq.push_back(0);
  dev->SetReceiveCallback(MakeBoundCallback(&OnReceive, ep));
  Ptr<Queue<Packet>> q = DynamicCast<PointToPointNetDevice>(dev)->GetQueue();
  q->TraceConnectWithoutContext("Drop", MakeBoundCallback(&OnDrop, ep));
  q->TraceConnectWithoutContext("PacketsInQueue", MakeBoundCallback(&OnQueue, ep));
  return ep;
}
void SetQueue(int ep, uint32_t packets) {
  DynamicCast<PointToPointNetDevice>(g_devs[ep])->GetQueue()->SetMaxSize(QueueSize(QueueSizeUnit::PACKETS, packets));
}
int Group(const std::vector<int>& eps) { g_groups.push_back(eps); return (int)g_groups.size() - 1; }
// 0x0800, IPv4: ns-3's PPP device carries IPv4 or IPv6 only, and nothing above the device reads it here
void Out(int ep, Ptr<Packet> p) { g_devs[ep]->Send(p, g_devs[ep]->GetBroadcast(), 0x0800); }
Ptr<Packet> Make(const char* data, int size) {
  Ptr<Packet> p = Create<Packet>((const uint8_t*)data, (uint32_t)size);
  p->AddPaddingAtEnd(g_pad);
  return p;
}
void Send(int ep, const char* data, int size, double delay) {
  Ptr<Packet> p = Make(data, size);
  if (delay > 0) Simulator::Schedule(Seconds(delay), &Out, ep, p); else Out(ep, p);
}
void SendGroup(int group, const char* data, int size, double delay) {
  for (int ep : g_groups[group]) Send(ep, data, size, delay);
}
void Timer(int who, double at, long long token) {
  // rounded up to ns-3's nanosecond, so that the timer never fires before `at` and then again at once
  double wait = std::ceil((at - Simulator::Now().GetSeconds()) * 1e9);
  Simulator::Schedule(NanoSeconds(wait > 0 ? (int64_t)wait : 0), &OnTimer, who, token);
}
long long Total(const std::vector<long long>& v, const std::vector<int>& eps) {
  long long s = 0; for (int ep : eps) s += v[ep]; return s;
}
long long Most(const std::vector<long long>& v, const std::vector<int>& eps) {
  long long m = 0; for (int ep : eps) if (v[ep] > m) m = v[ep]; return m;
}
}
"""


class Ns3Missing(RuntimeError):
    """ns-3's Python bindings are not installed (pip install 'hina[ns3]')."""


_ns = None


def load():
    """ns-3 (`from ns import ns`, about 7 s the first time in a process) and the glue; raises Ns3Missing."""
    global _ns
    if _ns is None:
        # cling prints a few lines about static initialisers of ns-3's own headers as they load: kept
        # out of the user's terminal, and shown only if the load fails
        with tempfile.TemporaryFile() as said:
            saved = os.dup(2)
            os.dup2(said.fileno(), 2)
            try:
                from ns import ns
                ns.cppyy.cppdef(GLUE)
            except ImportError as exc:
                raise Ns3Missing(f"ns-3's Python bindings are not installed ({exc}): pip install 'hina[ns3]'") from None
            except Exception:
                os.dup2(saved, 2)
                said.seek(0)
                sys.stderr.write(said.read().decode(errors="replace"))
                raise
            finally:
                os.dup2(saved, 2)
                os.close(saved)
        _ns = ns
    return _ns


def available() -> str | None:
    """None when ns-3 can be loaded here; otherwise why not."""
    try:
        load()
    except Ns3Missing as exc:
        return str(exc)
    return None


# -- fabrics -----------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Switch:
    """One switch of a fabric: its tier (0: the workers' leaf), its children (worker ranks on tier 0,
    switch indices above) and its parents (switch indices; none on a root), in port order."""

    tier: int
    children: tuple[int, ...]
    parents: tuple[int, ...] = ()


@dataclasses.dataclass(frozen=True)
class Fabric:
    """Workers and switches, and the link rates: `gbps` for every worker's link, `uplink_gbps` for every
    link between switches.  `shape`: children per switch of each tier, as the scale model's `Network`
    takes it; `parallel`: uplinks a switch of each non-root tier spreads its slots over."""

    name: str
    workers: int
    switches: tuple[Switch, ...]
    gbps: float
    uplink_gbps: float
    shape: tuple[int, ...]
    parallel: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        for i, s in enumerate(self.switches):
            if len(s.children) > MAX_WORKERS:
                raise ValueError(f"{self.name}: switch {i} has {len(s.children)} children; a switch's arrival "
                                 f"bitmap holds {MAX_WORKERS}")

    @property
    def depth(self) -> int:
        return 1 + max(s.tier for s in self.switches)

    @property
    def leaf_of(self) -> dict[int, tuple[int, int]]:
        """worker rank -> (its leaf switch, its worker_id there)."""
        return {w: (i, k) for i, s in enumerate(self.switches) if s.tier == 0 for k, w in enumerate(s.children)}

    @property
    def oversubscription(self) -> float:
        """A leaf's downlink capacity over its uplinks' (0 for a star)."""
        if self.depth == 1:
            return 0.0
        leaf = self.switches[0]
        return len(leaf.children) * self.gbps / (len(leaf.parents) * self.uplink_gbps)

    def network(self, **kw) -> Network:
        """The scale model's `Network` of the same tiers: a leaf's parallel uplinks (its slots go round robin
        over its parents) as one link of their summed rate and queues (`queue=`: frames per port)."""
        parallel = self.parallel[0] if self.parallel else 1
        return Network(workers=self.workers, gbps=self.gbps, depth=self.depth, uplink_gbps=self.uplink_gbps * parallel,
                       shape=self.shape, parallel=parallel, **kw)


def star(workers: int, gbps: float) -> Fabric:
    """One switch, every worker on a port of its own (at most 32)."""
    if not 1 <= workers <= MAX_WORKERS:
        raise ValueError(f"a star holds 1 to {MAX_WORKERS} workers (a switch's arrival bitmap), got {workers}: "
                         "use leaf_spine or fat_tree")
    return Fabric("star", workers, (Switch(0, tuple(range(workers))),), gbps, gbps, (workers,))


def leaf_spine(workers: int, gbps: float, *, rack: int = 32, spines: int = 4, uplink_gbps: float | None = None
               ) -> Fabric:
    """Racks of `rack` workers under leaves, every leaf linked to every one of `spines` spines; every spine
    roots 1/`spines` of the slots.  A leaf is oversubscribed rack * gbps : spines * uplink_gbps."""
    uplink_gbps = uplink_gbps or gbps
    if not 1 <= rack <= MAX_WORKERS:
        raise ValueError(f"a rack holds 1 to {MAX_WORKERS} workers, got {rack}")
    leaves = -(-workers // rack)
    if leaves > MAX_WORKERS:
        raise ValueError(f"{leaves} leaves under a spine: at most {MAX_WORKERS} ({MAX_WORKERS * rack} workers)")
    if not 1 <= spines <= 8:
        raise ValueError(f"spines must be 1..8 (a switch's parents), got {spines}")
    spine_ids = tuple(range(leaves, leaves + spines))
    sw = [Switch(0, tuple(range(i * rack, min(workers, (i + 1) * rack))), spine_ids) for i in range(leaves)]
    sw += [Switch(1, tuple(range(leaves))) for _ in range(spines)]
    return Fabric("leaf_spine", workers, tuple(sw), gbps, uplink_gbps, (min(rack, workers), leaves), (spines,))


def fat_tree(workers: int, gbps: float, *, k: int = 16) -> Fabric:
    """The first `workers` hosts of a k-ary fat tree (k/2 hosts per edge switch, k/2 edges and k/2
    aggregation switches per pod, (k/2)^2 cores), every link at `gbps`.  An edge switch's slots go over
    its pod's k/2 aggregation switches; aggregation switch j of every pod sends its slots (those with
    s mod k/2 = j) to core j * k/2 + j, so k/2 cores root the job.  Only the switches that carry the job
    are built: the others' links would stay idle."""
    if k % 2 or not 4 <= k <= 64:
        raise ValueError(f"k must be even, 4..64, got {k}")
    half = k // 2
    if not 1 <= workers <= k ** 3 // 4:
        raise ValueError(f"a k={k} fat tree has {k ** 3 // 4} hosts, got {workers} workers")
    edges = -(-workers // half)
    pods = -(-edges // half)
    edge_ids = list(range(edges))
    agg_ids = [[edges + p * half + j for j in range(half)] for p in range(pods)]
    core_ids = [edges + pods * half + j for j in range(half)]
    sw = [Switch(0, tuple(range(e * half, min(workers, (e + 1) * half))), tuple(agg_ids[e // half]))
          for e in edge_ids]
    for p in range(pods):
        pod_edges = tuple(e for e in edge_ids if e // half == p)
        sw += [Switch(1, pod_edges, (core_ids[j],)) for j in range(half)]
    sw += [Switch(2, tuple(agg_ids[p][j] for p in range(pods))) for j in range(half)]
    shape = (min(half, workers), min(half, edges), pods)
    return Fabric(f"fat_tree_k{k}", workers, tuple(sw), gbps, gbps, shape, (half, 1))


FABRICS: dict[str, Callable[..., Fabric]] = {"star": star, "leaf_spine": leaf_spine, "fat_tree": fat_tree}


# -- the simulation ----------------------------------------------------------------------------------
class _Worker:
    __slots__ = ("rank", "wid", "ep", "pool", "rtt", "window", "xfer", "round", "armed", "token", "answered",
                 "ends", "retransmissions", "timeouts", "frames", "result")

    def __init__(self, rank: int, wid: int, slots: int, initial_rtt: float):
        self.rank, self.wid, self.ep = rank, wid, -1
        self.pool = SlotPool(0, slots)
        self.rtt = RttEstimator(initial=initial_rtt)
        self.window = CongestionWindow(slots)
        self.xfer: PhaseTransfer | None = None
        self.round = -1
        self.armed, self.token = math.inf, 0
        self.answered: list[float] = []
        self.ends: list[float] = []
        self.retransmissions = self.timeouts = self.frames = 0
        self.result: np.ndarray | None = None


@dataclasses.dataclass
class Ns3Run:
    """One aggregation on ns-3: its seconds (extrapolated rounds included) and where they went."""

    seconds: float
    simulated_seconds: float
    rounds: list[dict]
    retransmissions: int
    timeouts: int
    drops: int  # frames ns-3's queues dropped, anywhere
    root_max_queue: int  # the most packets queued at once at a root switch's port
    max_queue: int  # the same at any switch's port
    frames: int
    wall_seconds: float
    results: list[np.ndarray] | None = None


def simulate(fabric: Fabric, rounds: Sequence[Round], *, words: int = max_words(9000), slots: int = 64,
             cap: int | None = 2048, delay: float = 1e-6, switch_latency: float = 1e-6, queue: int = 100,
             initial_rtt: float = 0.1, start_spread: float = 0.0, seed: int = 0, deadline: float = 60.0,
             payloads: Sequence[np.ndarray] | None = None, progress: Callable[[str], None] | None = None
             ) -> Ns3Run:
    """Run one aggregation of `rounds` (each a tuple of segment words, as the scale model's) on ns-3.

    `payloads`: one int32 array per worker, summed (ADD) in one round instead of `rounds`' zeros; each
    worker's result is then returned (`Ns3Run.results`), every chunk run (no cap).
    Every worker starts round r + 1 as soon as its round r is answered; `start_spread` starts each
    worker's first round at a uniform random instant in [0, start_spread) (0: all at once, as the
    scale model's identical workers).  `queue`: packets each switch port's drop-tail queue holds (a
    worker's own NIC holds HOST_QUEUE)."""
    ns = load()
    glue = ns.cppyy.gbl.hina_ns3
    if payloads is not None:
        if len(payloads) != fabric.workers or len({p.size for p in payloads}) != 1:
            raise ValueError(f"{fabric.workers} payloads of one length wanted, got {len(payloads)}")
        rounds, cap = [(payloads[0].size,)], None
    chunks = [round_chunks(r, words) for r in rounds]
    simulated = [c if cap is None else min(c, cap) for c in chunks]
    # every worker's RESULT words land in one buffer per round (the same words; N buffers of a round would
    # not fit at 1,024 workers, and the simulation measures time)
    workspace = Workspace()
    zeros = {n: np.zeros(n * words, np.int32) for n in set(simulated)}
    frame_bytes = Ring.frame_size(words)
    rng = np.random.default_rng(seed)
    offsets = rng.random(fabric.workers) * start_spread if start_spread else np.zeros(fabric.workers)

    leaf_of = fabric.leaf_of
    workers = [_Worker(w, leaf_of[w][1], slots, initial_rtt) for w in range(fabric.workers)]
    ep_owner: list[tuple[int, int]] = []  # ep -> (switch index, port) or (-1, worker rank)
    pipelines = [Pipeline() for _ in fabric.switches]
    switch_eps: list[list[int]] = [[] for _ in fabric.switches]  # switch -> its ports' eps
    child_port: list[dict[int, int]] = [{} for _ in fabric.switches]
    parent_port: list[dict[int, int]] = [{} for _ in fabric.switches]
    down = {"done": 0, "started": time.perf_counter(), "last_log": 0.0, "answered": 0}

    def on_recv(ep: int, size: int, now: float) -> None:
        sw, port = ep_owner[ep]
        frame = view[:size].tobytes()
        if sw >= 0:
            emit = pipelines[sw].update(frame, port)
            if emit is not None:
                dests, out = emit
                if len(dests) == 1:
                    glue.Send(switch_eps[sw][dests[0]], out, len(out), switch_latency)
                else:
                    group = groups[sw].get(dests)
                    if group is None:
                        group = groups[sw][dests] = glue.Group(
                            ns.cppyy.gbl.std.vector[int]([switch_eps[sw][p] for p in dests]))
                    glue.SendGroup(group, out, len(out), switch_latency)
            return
        wk = workers[port]
        x = wk.xfer
        if x is None:
            return
        if not frame[5] & 1:  # the multicast RESULT of a chunk, not a re-send
            if wk.answered is not None:
                wk.answered.append(now)
            if port == 0 and progress is not None:
                _tick(now)
        _out(wk, x.receive(frame, now), now)

    def _tick(now: float) -> None:
        """Worker 0 has one more chunk answered: a progress line every 30 s of wall time."""
        down["answered"] += 1
        wall = time.perf_counter() - down["started"]
        if wall - down["last_log"] >= 30:
            down["last_log"] = wall
            r = workers[0].round
            progress(f"  {fabric.name} {fabric.workers} workers: round {r + 1}/{len(rounds)}, {down['answered']} of "
                     f"{simulated[r]} chunks answered at {now * 1e3:.3f} ms simulated, {wall:.0f} s wall")

    def on_timer(rank: int, token: int, now: float) -> None:
        wk = workers[rank]
        if token != wk.token:
            return  # an earlier timer, since moved
        wk.armed = math.inf
        if wk.xfer is None:
            _next_round(wk, now)
        else:
            _out(wk, wk.xfer.poll(now), now)

    def _out(wk: _Worker, frames: list[bytes], now: float) -> None:
        for f in frames:
            glue.Send(wk.ep, f, frame_bytes, 0.0)
        x = wk.xfer
        if x.done:
            _finish(wk, now)
            return
        t = x.next_timer()
        if t < wk.armed:
            wk.armed = t
            wk.token += 1
            glue.Timer(wk.rank, t, wk.token)

    def _finish(wk: _Worker, now: float) -> None:
        x = wk.xfer
        wk.retransmissions += int(x.stats.get("retransmissions", 0))
        wk.timeouts += int(x.stats.get("timeouts", 0))
        wk.frames += int(x.stats.get("frames", 0))
        r = wk.round
        extra = 0.0
        if simulated[r] < chunks[r]:
            a = wk.answered
            half = len(a) // 2
            extra = (chunks[r] - simulated[r]) * (a[-1] - a[half]) / max(1, len(a) - 1 - half)
        wk.ends.append((now, extra))
        if payloads is not None:
            wk.result = x.result
        wk.xfer = None
        _next_round(wk, now)

    def _next_round(wk: _Worker, now: float) -> None:
        wk.round += 1
        r = wk.round
        if r == len(rounds):
            down["done"] += 1
            if down["done"] == fabric.workers:
                ns.Simulator.Stop()
            return
        n = simulated[r]
        wk.answered = [] if n < chunks[r] else None
        own = payloads is not None
        wk.xfer = PhaseTransfer(job_id=JOB, worker_id=wk.wid, words=words, pool=wk.pool, rtt=wk.rtt, tag=r & 0xFFFF,
                                op=0, payload=payloads[wk.rank] if own else zeros[n], name=f"round{r}", now=now,
                                deadline=now + deadline, window=wk.window, workspace=None if own else workspace)
        if progress is not None and wk.rank == 0:
            down["answered"] = 0
            wall = time.perf_counter() - down["started"]
            progress(f"  {fabric.name} {fabric.workers} workers: round {r + 1}/{len(rounds)} "
                     f"({n} of {chunks[r]} chunks simulated) at {now * 1e3:.3f} ms simulated, {wall:.0f} s wall")
        _out(wk, wk.xfer.start(now), now)

    # the network
    glue.Reset(on_recv, on_timer, PAD)
    buf = glue.g_buf.data()
    buf.reshape((65536,))
    view = np.frombuffer(buf, np.uint8, count=65536)
    nodes = ns.NodeContainer()
    nodes.Create(fabric.workers + len(fabric.switches))
    helpers = {}
    for rate in {fabric.gbps, fabric.uplink_gbps}:
        p2p = ns.PointToPointHelper()
        p2p.SetDeviceAttribute("DataRate", ns.StringValue(f"{rate:g}Gbps"))
        p2p.SetChannelAttribute("Delay", ns.StringValue(f"{delay * 1e9:.0f}ns"))
        p2p.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize", ns.StringValue(f"{queue}p"))
        helpers[rate] = p2p

    def link(a: int, b: int, rate: float) -> tuple[int, int]:
        devs = helpers[rate].Install(nodes.Get(a), nodes.Get(b))
        return glue.Attach(devs.Get(0)), glue.Attach(devs.Get(1))

    base = fabric.workers
    for i, s in enumerate(fabric.switches):  # children first, so that a switch's ports follow its members
        for c in s.children:
            if s.tier == 0:
                wep, sep = link(c, base + i, fabric.gbps)
                glue.SetQueue(wep, HOST_QUEUE)
                ep_owner.extend([(-1, c), (i, len(switch_eps[i]))])
                workers[c].ep = wep
            else:
                cep, sep = link(base + c, base + i, fabric.uplink_gbps)
                ep_owner.extend([(c, len(switch_eps[c])), (i, len(switch_eps[i]))])
                parent_port[c][i] = len(switch_eps[c])
                switch_eps[c].append(cep)
            child_port[i][c] = len(switch_eps[i])
            switch_eps[i].append(sep)
    groups: list[dict] = [{} for _ in fabric.switches]  # switch -> {its multicast ports: the glue's group}
    for i, s in enumerate(fabric.switches):
        members = tuple(Member(k, child_port[i][c]) for k, c in enumerate(s.children))
        parents = tuple(Member(fabric.switches[p].children.index(i), parent_port[i][p]) for p in s.parents)
        pipelines[i].add_job(JobConfig(JOB, len(members), words, 0, slots, members, parents=parents))

    for w in workers:
        glue.Timer(w.rank, float(offsets[w.rank]), w.token)
    wall = time.perf_counter()
    ns.Simulator.Run()
    wall = time.perf_counter() - wall
    end = ns.Simulator.Now().GetSeconds()
    unfinished = fabric.workers - down["done"]
    root_eps = ns.cppyy.gbl.std.vector[int]([ep for i, s in enumerate(fabric.switches) if not s.parents
                                             for ep in switch_eps[i]])
    all_eps = ns.cppyy.gbl.std.vector[int](list(range(len(ep_owner))))
    port_eps = ns.cppyy.gbl.std.vector[int]([ep for eps in switch_eps for ep in eps])
    stats = dict(drops=int(glue.Total(glue.g_drops, all_eps)), root_max_queue=int(glue.Most(glue.g_maxq, root_eps)),
                 max_queue=int(glue.Most(glue.g_maxq, port_eps)))
    ns.Simulator.Destroy()
    if unfinished:
        raise RuntimeError(f"{unfinished} of {fabric.workers} workers did not finish by {end:.3f} s simulated")
    # round r ends when its last worker is answered; extrapolated chunks add the slowest worker's interval
    per_round, before, shift = [], 0.0, 0.0
    for r in range(len(rounds)):
        at = max(w.ends[r][0] for w in workers)
        extra = max(w.ends[r][1] for w in workers)
        per_round.append({"chunks": chunks[r], "simulated": simulated[r],
                          "seconds": at - before + extra})
        before = at
        shift += extra
    return Ns3Run(seconds=before + shift, simulated_seconds=before, rounds=per_round,
                  retransmissions=sum(w.retransmissions for w in workers),
                  timeouts=sum(w.timeouts for w in workers), frames=sum(w.frames for w in workers),
                  wall_seconds=wall, results=None if payloads is None else [w.result for w in workers], **stats)
