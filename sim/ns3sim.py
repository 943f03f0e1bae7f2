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

The network is a `hina.control.Fabric`, the one the scale model and the
control plane take: its hosts' rate, every cable's rate, every switch
port's queue.  What each switch holds is its share of one job over every
host (`switch_jobs`), which keeps a real switch's limit of 32 children (its
arrival bitmap): more workers than that need a tree.  The workers send
zeros, or real words (`RealWords`: a model-shaped gradient, every RESULT
checked against numpy's sum), or payloads given per worker.
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
from hina.codec.scale import exponent, quantize, shift_for
from hina.control import Fabric, JobConfig, Member
from hina.emulator import Pipeline
from hina.host.congestion import CongestionWindow
from hina.host.congestion_settings import CongestionSettings
from hina.host.window import PhaseTransfer, Ring, RttEstimator, SlotPool
from hina.host.workloads import preset
from hina.sim.scale import JOB, PHY_OVERHEAD, SIMULATED_HOST, Round, Setup, round_chunks
from hina.wire.headers import (
    AT_COUNT,
    AT_FLAGS,
    AT_MSG_TYPE,
    AT_OFFSET,
    FIELDS,
    FRAME_OVERHEAD,
    HEADER_BYTES,
    Flags,
    MsgType,
    max_words,
)

PPP_HEADER = 2  # bytes ns-3's point-to-point device puts before each packet
PAD = FRAME_OVERHEAD + PHY_OVERHEAD - PPP_HEADER  # so that a frame's time on a link is the scale model's
HOST_QUEUE = 1000  # packets a worker's own NIC queues: Linux's txqueuelen, which holds any window
UNLIMITED = 1 << 30  # packets a switch port of a fabric without a `queue` holds: no limit a run reaches
# where a frame's offset and count lie (big-endian), from the declared header
_OFFSET = slice(AT_OFFSET, AT_OFFSET + dict(FIELDS)["offset"] // 8)
_COUNT = slice(AT_COUNT, AT_COUNT + dict(FIELDS)["count"] // 8)

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


# -- what each switch holds, and what the workers send --------------------------------------------------
def switch_jobs(fabric: Fabric, words: int, slots: int) -> tuple[list[JobConfig], list[tuple[int, int]]]:
    """Each switch's share of one job over every host, as ns-3 runs it (in `fabric.switches` order), and each
    worker's (its leaf's index, its worker id there).  Unlike the control plane's `Fabric.shares`, whose
    workers are known by their rank (a job of at most 32), a worker is known at its leaf by its place among
    the leaf's hosts, and a switch by its member id: so a job reaches 1,024 workers, each switch summing at
    most 32 children (its arrival bitmap)."""
    for s in fabric.switches:
        if len(fabric.children(s.name)) > MAX_WORKERS:
            raise ValueError(f"switch {s.name} has {len(fabric.children(s.name))} children; a switch's arrival "
                             f"bitmap holds {MAX_WORKERS}: more workers need a tree (leaf_spine, fat_tree)")
    leaf_of: list[tuple[int, int]] = [(-1, -1)] * len(fabric.hosts)
    jobs = []
    for i, s in enumerate(fabric.switches):
        members = []
        for place, (kind, j, port) in enumerate(fabric.children(s.name)):
            if kind == "host":
                leaf_of[j] = (i, place)
            members.append(Member(place if kind == "host" else fabric.member_id(fabric.switches[j].name), port))
        parents = tuple(Member(fabric.member_id(s.name), port) for _, port, _ in fabric.parents(s.name))
        jobs.append(JobConfig(JOB, len(members), words, 0, slots, tuple(members), parents=parents))
    return jobs, leaf_of


class RealWords:
    """Real words for every round: one block of int32 words (`of_preset`: a model-shaped gradient, quantized),
    which worker w sends rotated by its own offset and repeated to the round's length.  Every worker sends
    other words, the memory is one round's length (each worker's payload is a view of one array), and
    numpy's sum of all of them repeats with the block's period: `total`, summed once, is the exact answer
    every RESULT is checked against (`check`)."""

    STEP = 7919  # a prime: worker w's rotation is w * STEP mod the block's length

    def __init__(self, block: np.ndarray, workers: int):
        self.block = np.ascontiguousarray(block, np.int32)
        period = self.block.size
        self.shifts = [w * self.STEP % period for w in range(workers)]
        self.total = np.zeros(period, np.int32)
        for shift in self.shifts:  # int32 wraps as the switch's ADD does (quantized words never reach it)
            self.total += np.roll(self.block, -shift)
        self._tiled: dict[int, np.ndarray] = {}

    @classmethod
    def of_preset(cls, name: str, workers: int, *, seed: int = 0, words: int = 1 << 17) -> RealWords:
        """Rank 0's gradient of the workload preset `name` (hina.host.workloads) at the scale that makes it
        about `words` long (its density kept), quantized as the codec quantizes for `workers` workers."""
        full = preset(name)
        grad = preset(name, min(1.0, words / full.size)).gradient(seed, 0)
        return cls(quantize(grad, shift_for(exponent(grad), workers)), workers)

    def payload(self, rank: int, length: int) -> np.ndarray:
        """Worker `rank`'s `length` words: block[(i + its rotation) mod period] for i < length."""
        tiled = self._tiled.get(length)
        if tiled is None:
            tiled = self._tiled[length] = np.resize(self.block, length + self.block.size)
        return tiled[self.shifts[rank]:self.shifts[rank] + length]

    def check(self, words: np.ndarray, offset: int = 0) -> bool:
        """Whether `words`, a result's [offset, offset + len) words, are numpy's sum of every worker's."""
        period = self.total.size
        at = 0
        while at < words.size:
            start = (offset + at) % period
            n = min(words.size - at, period - start)
            if not np.array_equal(words[at:at + n], self.total[start:start + n]):
                return False
            at += n
        return True


class _Given:
    """One payload per worker, summed in one round: what `simulate(payloads=...)` checks its results against."""

    def __init__(self, payloads: Sequence[np.ndarray]):
        self.payloads = [np.ascontiguousarray(p, np.int32) for p in payloads]
        self.total = np.sum(self.payloads, axis=0, dtype=np.int32)

    def payload(self, rank: int, length: int) -> np.ndarray:
        return self.payloads[rank]

    def check(self, words: np.ndarray, offset: int = 0) -> bool:
        return np.array_equal(words, self.total[offset:offset + words.size])


# -- the simulation ----------------------------------------------------------------------------------
class _Worker:
    __slots__ = ("rank", "wid", "ep", "pool", "rtt", "window", "xfer", "round", "armed", "token", "answered",
                 "ends", "retransmissions", "timeouts", "frames", "result", "wrong")

    def __init__(self, rank: int, wid: int, slots: int, path_rtt: float, congestion: CongestionSettings):
        self.rank, self.wid, self.ep = rank, wid, -1
        self.pool = SlotPool(0, slots)
        # what a worker's join exchange measures before its first chunk; timers fire when due (tick 0)
        self.rtt = (RttEstimator.fair if congestion.fair else RttEstimator)(path=path_rtt)
        self.window = CongestionWindow(slots, congestion)
        self.xfer: PhaseTransfer | None = None
        self.round = -1
        self.armed, self.token = math.inf, 0
        self.answered: list[float] = []
        self.ends: list[float] = []
        self.retransmissions = self.timeouts = self.frames = 0
        self.result: np.ndarray | None = None
        self.wrong = 0  # RESULTs it received whose words were not numpy's sum


@dataclasses.dataclass
class Ns3Run:
    """One aggregation on ns-3: its seconds (extrapolated rounds included), where they went and, where the
    workers sent real words, whether every worker's result was numpy's sum (`exact`; None: zeros sent)."""

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
    exact: bool | None = None
    checked: int = 0  # RESULTs checked against numpy's sum, every worker's


@dataclasses.dataclass(frozen=True)
class _Settings:
    words: int
    slots: int
    cap: int | None
    delay: float
    switch_latency: float
    initial_rtt: float | None
    start_spread: float
    seed: int
    deadline: float
    congestion: CongestionSettings


class _Simulation:
    """One aggregation of `rounds` over a fabric on ns-3: the network built from the fabric (`_build`), the two
    callbacks ns-3 makes (a frame arrived, a timer fired), what a switch and a worker do with a frame, and
    each worker's rounds one after another (`_next_round`, `_finish`)."""

    def __init__(self, ns, fabric: Fabric, rounds: Sequence[Round], run: _Settings, data, progress):
        self.ns, self.glue = ns, ns.cppyy.gbl.hina_ns3
        self.fabric, self.rounds, self.run_, self.data, self.progress = fabric, rounds, run, data, progress
        self.chunks = [round_chunks(r, run.words) for r in rounds]
        self.simulated = [c if run.cap is None else min(c, run.cap) for c in self.chunks]
        # with zeros, every worker's RESULT words land in one buffer per round (the same words; N buffers of a
        # round would not fit at 1,024 workers, and the simulation measures time); so with real words, whose
        # every RESULT is checked as it arrives; given payloads keep each worker's own result
        self.keep = isinstance(data, _Given)
        self.workspace = None if self.keep else Workspace()
        self.zeros = {n: np.zeros(n * run.words, np.int32) for n in set(self.simulated)} if data is None else {}
        self.frame_bytes = Ring.frame_size(run.words)
        self.jobs, leaf_of = switch_jobs(fabric, run.words, run.slots)
        # what each worker's join exchange measures (the fabrics are alike from every host: host 0's way up)
        path = run.initial_rtt or Setup(fabric, run.delay, run.switch_latency, words=run.words,
                                        slots=run.slots).path_rtt()
        self.workers = [_Worker(w, leaf_of[w][1], run.slots, path, run.congestion) for w in range(len(fabric.hosts))]
        self.pipelines = [Pipeline() for _ in fabric.switches]
        self.owner: list[tuple[int, int]] = []  # ep -> (switch index, port) or (-1, worker rank)
        self.port_ep: list[dict[int, int]] = [{} for _ in fabric.switches]
        self.groups: list[dict] = [{} for _ in fabric.switches]  # switch -> {its multicast ports: the glue's group}
        self.done, self.checked, self.answered, self.last_log = 0, 0, 0, 0.0
        self.started = time.perf_counter()

    # -- what ns-3 calls ------------------------------------------------------------------
    def on_recv(self, ep: int, size: int, now: float) -> None:
        sw, port = self.owner[ep]
        frame = self.view[:size].tobytes()
        if sw >= 0:
            self._switch_frame(sw, port, frame)
        else:
            self._worker_frame(self.workers[port], frame, now)

    def on_timer(self, rank: int, token: int, now: float) -> None:
        wk = self.workers[rank]
        if token != wk.token:
            return  # an earlier timer, since moved
        wk.armed = math.inf
        if wk.xfer is None:
            if wk.round < len(self.rounds):  # (a finished worker's last timer does nothing)
                self._next_round(wk, now)
        else:
            self._out(wk, wk.xfer.poll(now), now)

    # -- a switch and a worker -----------------------------------------------------------------
    def _switch_frame(self, sw: int, port: int, frame: bytes) -> None:
        """The switch's pipeline takes the frame; what it emits leaves on its ports after its latency."""
        emit = self.pipelines[sw].update(frame, port)
        if emit is None:
            return
        dests, out = emit
        latency = self.run_.switch_latency
        if len(dests) == 1:
            self.glue.Send(self.port_ep[sw][dests[0]], out, len(out), latency)
            return
        group = self.groups[sw].get(dests)
        if group is None:
            group = self.groups[sw][dests] = self.glue.Group(
                self.ns.cppyy.gbl.std.vector[int]([self.port_ep[sw][p] for p in dests]))
        self.glue.SendGroup(group, out, len(out), latency)

    def _worker_frame(self, wk: _Worker, frame: bytes, now: float) -> None:
        """A frame for a worker: checked against numpy's sum where the words are real, then its sender's."""
        x = wk.xfer
        if x is None:
            return
        if self.data is not None and frame[AT_MSG_TYPE] == MsgType.RESULT:
            offset, count = int.from_bytes(frame[_OFFSET], "big"), int.from_bytes(frame[_COUNT], "big")
            self.checked += 1
            if not self.data.check(np.frombuffer(frame, ">i4", count, HEADER_BYTES), offset):
                wk.wrong += 1
        if not frame[AT_FLAGS] & Flags.RESEND:  # the multicast RESULT of a chunk, not a re-send
            if wk.answered is not None:
                wk.answered.append(now)
            if wk.rank == 0 and self.progress is not None:
                self._tick(now)
        self._out(wk, x.receive(frame, now), now)

    def _out(self, wk: _Worker, frames: list[bytes], now: float) -> None:
        """A worker's frames onto its link; its timer moved, or its round finished."""
        for f in frames:
            self.glue.Send(wk.ep, f, self.frame_bytes, 0.0)
        x = wk.xfer
        if x.done:
            self._finish(wk, now)
            return
        t = x.next_timer()
        if t < wk.armed:
            wk.armed = t
            wk.token += 1
            self.glue.Timer(wk.rank, t, wk.token)

    def _finish(self, wk: _Worker, now: float) -> None:
        """A worker's round is answered: its counts, the chunks past the cap charged, its next round."""
        x = wk.xfer
        wk.retransmissions += int(x.stats.get("retransmissions", 0))
        wk.timeouts += int(x.stats.get("timeouts", 0))
        wk.frames += int(x.stats.get("frames", 0))
        r = wk.round
        extra = 0.0
        if self.simulated[r] < self.chunks[r]:
            a = wk.answered
            half = len(a) // 2
            extra = (self.chunks[r] - self.simulated[r]) * (a[-1] - a[half]) / max(1, len(a) - 1 - half)
        wk.ends.append((now, extra))
        if self.data is not None and (self.keep or self.done == 0) and not self.data.check(x.result):
            wk.wrong += 1  # the words it holds (one buffer for every worker but given payloads' own)
        if self.keep:
            wk.result = x.result
        wk.xfer = None
        self._next_round(wk, now)

    def _next_round(self, wk: _Worker, now: float) -> None:
        """A worker starts its next round (or, after the last, is done; the last worker stops ns-3)."""
        wk.round += 1
        r = wk.round
        if r == len(self.rounds):
            self.done += 1
            if self.done == len(self.workers):
                self.ns.Simulator.Stop()
            return
        n, words = self.simulated[r], self.run_.words
        wk.answered = [] if n < self.chunks[r] else None
        payload = self.zeros[n] if self.data is None else self.data.payload(wk.rank, n * words)
        wk.xfer = PhaseTransfer(job_id=JOB, worker_id=wk.wid, words=words, pool=wk.pool, rtt=wk.rtt, tag=r & 0xFFFF,
                                op=0, payload=payload, name=f"round{r}", now=now, deadline=now + self.run_.deadline,
                                window=wk.window, workspace=self.workspace)
        if self.progress is not None and wk.rank == 0:
            self.answered = 0
            self.progress(f"{len(self.workers)} workers: round {r + 1}/{len(self.rounds)} ({n} of {self.chunks[r]} "
                          f"chunks simulated) at {now * 1e3:.3f} ms simulated, {self._wall():.0f} s wall")
        self._out(wk, wk.xfer.start(now), now)

    def _tick(self, now: float) -> None:
        """Worker 0 has one more chunk answered: a progress line every 30 s of wall time."""
        self.answered += 1
        wall = self._wall()
        if wall - self.last_log >= 30:
            self.last_log = wall
            r = self.workers[0].round
            self.progress(f"{len(self.workers)} workers: round {r + 1}/{len(self.rounds)}, {self.answered} of "
                          f"{self.simulated[r]} chunks answered at {now * 1e3:.3f} ms simulated, {wall:.0f} s wall")

    def _wall(self) -> float:
        return time.perf_counter() - self.started

    # -- the network, and the run ---------------------------------------------------------------
    def _build(self) -> None:
        """Nodes (the workers, then the switches), a point-to-point link per host and per cable of the fabric at
        its rate, each switch port's queue the fabric's (a worker's NIC HOST_QUEUE), each switch's job."""
        ns, glue, fabric = self.ns, self.glue, self.fabric
        self.callbacks = (self.on_recv, self.on_timer)  # held: cppyy's function pointers die with their object
        glue.Reset(*self.callbacks, PAD)
        buf = glue.g_buf.data()
        buf.reshape((65536,))
        self.view = np.frombuffer(buf, np.uint8, count=65536)
        nodes = ns.NodeContainer()
        base = len(self.workers)
        nodes.Create(base + len(fabric.switches))
        at = {s.name: i for i, s in enumerate(fabric.switches)}
        helpers: dict[float, object] = {}
        queue = f"{fabric.queue or UNLIMITED}p"

        def link(a: int, b: int, mbps: float, ends: tuple[tuple[int, int], tuple[int, int]]) -> tuple[int, int]:
            if mbps not in helpers:
                p2p = helpers[mbps] = ns.PointToPointHelper()
                p2p.SetDeviceAttribute("DataRate", ns.StringValue(f"{round(mbps * 1e6)}bps"))
                p2p.SetChannelAttribute("Delay", ns.StringValue(f"{self.run_.delay * 1e9:.0f}ns"))
                p2p.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize", ns.StringValue(queue))
            devs = helpers[mbps].Install(nodes.Get(a), nodes.Get(b))
            eps = glue.Attach(devs.Get(0)), glue.Attach(devs.Get(1))
            for ep, (sw, port) in zip(eps, ends):
                self.owner.append((sw, port))
                if sw >= 0:
                    self.port_ep[sw][port] = ep
            return eps

        for rank, h in enumerate(fabric.hosts):
            wep, _ = link(rank, base + at[h.switch], fabric.rate, ((-1, rank), (at[h.switch], h.port)))
            glue.SetQueue(wep, HOST_QUEUE)
            self.workers[rank].ep = wep
        rates = fabric.link_rates()
        for ln in fabric.links:
            link(base + at[ln.a], base + at[ln.b], rates[ln.a, ln.b], ((at[ln.a], ln.a_port), (at[ln.b], ln.b_port)))
        for pipeline, job in zip(self.pipelines, self.jobs):
            pipeline.add_job(job)

    def run(self) -> Ns3Run:
        ns, glue = self.ns, self.glue
        self._build()
        rng = np.random.default_rng(self.run_.seed)
        spread = self.run_.start_spread
        offsets = rng.random(len(self.workers)) * spread if spread else np.zeros(len(self.workers))
        for w in self.workers:
            glue.Timer(w.rank, float(offsets[w.rank]), w.token)
        wall = time.perf_counter()
        ns.Simulator.Run()
        wall = time.perf_counter() - wall
        end = ns.Simulator.Now().GetSeconds()
        eps = ns.cppyy.gbl.std.vector[int]
        root_eps = eps([ep for i, s in enumerate(self.fabric.switches) if not self.fabric.parents(s.name)
                        for ep in self.port_ep[i].values()])
        port_eps = eps([ep for ports in self.port_ep for ep in ports.values()])
        stats = dict(drops=int(glue.Total(glue.g_drops, eps(list(range(len(self.owner)))))),
                     root_max_queue=int(glue.Most(glue.g_maxq, root_eps)),
                     max_queue=int(glue.Most(glue.g_maxq, port_eps)))
        ns.Simulator.Destroy()
        unfinished = len(self.workers) - self.done
        if unfinished:
            raise RuntimeError(f"{unfinished} of {len(self.workers)} workers did not finish by {end:.3f} s simulated")
        return self._result(wall, stats)

    def _result(self, wall: float, stats: dict) -> Ns3Run:
        """Round r ends when its last worker is answered; extrapolated chunks add the slowest worker's interval."""
        workers = self.workers
        per_round, before, shift = [], 0.0, 0.0
        for r in range(len(self.rounds)):
            at = max(w.ends[r][0] for w in workers)
            extra = max(w.ends[r][1] for w in workers)
            per_round.append({"chunks": self.chunks[r], "simulated": self.simulated[r], "seconds": at - before + extra})
            before = at
            shift += extra
        return Ns3Run(seconds=before + shift, simulated_seconds=before, rounds=per_round,
                      retransmissions=sum(w.retransmissions for w in workers),
                      timeouts=sum(w.timeouts for w in workers), frames=sum(w.frames for w in workers),
                      wall_seconds=wall, results=[w.result for w in workers] if self.keep else None,
                      exact=None if self.data is None else not any(w.wrong for w in workers), checked=self.checked,
                      **stats)


def simulate(fabric: Fabric, rounds: Sequence[Round], *, words: int = max_words(9000), slots: int = 64,
             cap: int | None = 2048, delay: float = 1e-6, switch_latency: float = 1e-6,
             initial_rtt: float | None = None, start_spread: float = 0.0, seed: int = 0, deadline: float = 60.0,
             data: RealWords | None = None, payloads: Sequence[np.ndarray] | None = None,
             congestion: CongestionSettings = SIMULATED_HOST,
             progress: Callable[[str], None] | None = None) -> Ns3Run:
    """Run one aggregation of `rounds` (each a tuple of segment words, as the scale model's) over `fabric` on
    ns-3: its hosts' links at its `rate`, every cable at its rate (`Fabric.link_rates`), every switch port
    queueing its `queue` packets (None: no limit; a worker's own NIC holds HOST_QUEUE).

    What the workers send: zeros by default (the time does not depend on the words); `data`, real words
    in every round, every RESULT a worker receives and every round's result checked against numpy's sum
    (`Ns3Run.exact`); or `payloads`, one int32 array per worker summed (ADD) in one round instead of
    `rounds`, every chunk run (no cap), each worker's result returned (`Ns3Run.results`) and checked.
    Every worker starts round r + 1 as soon as its round r is answered; `start_spread` starts each
    worker's first round at a uniform random instant in [0, start_spread) (0: all at once, as the scale
    model's identical workers).  Each worker's RTT estimate starts from `initial_rtt`, else from what its join
    exchange would measure (`hina.sim.scale.Setup.path_rtt`); its congestion window and pacer take `congestion`
    (`SIMULATED_HOST`: a worker's defaults on a host no scheduler delays)."""
    if fabric.rate is None:
        raise ValueError("ns-3 needs the hosts' rate: give the fabric a rate (Mbit/s)")
    if payloads is not None:
        if len(payloads) != len(fabric.hosts) or len({p.size for p in payloads}) != 1:
            raise ValueError(f"{len(fabric.hosts)} payloads of one length wanted, got {len(payloads)}")
        rounds, cap, data = [(payloads[0].size,)], None, _Given(payloads)
    run = _Settings(words, slots, cap, delay, switch_latency, initial_rtt, start_spread, seed, deadline, congestion)
    return _Simulation(load(), fabric, rounds, run, data, progress).run()
