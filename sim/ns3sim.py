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
  compiled slot rules of dataplane.py) with the job's share on that switch:
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

Where asked (`simulate_jobs`), several jobs run at once, each over every
host on slots of its own, and things go wrong (`Faults`): links lose,
duplicate and hold back frames (`Impairment`, decided in the glue at the
link's receiving end, each end on a seeded stream of its own, so a run
is the same every time), a worker starts late or sends on a slower link,
a worker is killed, a switch restarts.  Every worker then ends as a
worker does, with its rounds summed, AggregationTimeout at its deadline,
StaleSwitchState, or killed (`WorkerEnd`); the simulation campaign
(benchmarks/simtest.py) draws these at random.
"""

from __future__ import annotations

import collections
import dataclasses
import importlib.util
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from hina.cliargs import plural
from hina.codec import Workspace
from hina.codec.params import MAX_WORKERS
from hina.codec.scale import exponent, quantize, shift_for
from hina.control import Fabric, JobConfig, Member
from hina.emulator import Pipeline
from hina.host.congestion import CongestionWindow
from hina.host.congestion_settings import CongestionSettings
from hina.host.window import AggregationTimeout, PhaseTransfer, Ring, RttEstimator, SlotPool, StaleSwitchState
from hina.host.workloads import preset
from hina.sim.scale import JOB, PHY_OVERHEAD, SIMULATED_HOST, Round, Setup, round_chunks
from hina.wire.headers import (
    AT_COUNT,
    AT_FLAGS,
    AT_JOB_ID,
    AT_MSG_TYPE,
    AT_OFFSET,
    AT_PHASE,
    AT_WORKER_ID,
    FIELDS,
    FRAME_OVERHEAD,
    HEADER_BYTES,
    MAX_SLOTS,
    Flags,
    MsgType,
    max_words,
)

PPP_HEADER = 2  # bytes ns-3's point-to-point device puts before each packet
PAD = FRAME_OVERHEAD + PHY_OVERHEAD - PPP_HEADER  # so that a frame's time on a link is the scale model's
HOST_QUEUE = 1000  # packets a worker's own NIC queues: Linux's txqueuelen, which holds any window
TICK = 1e-9  # seconds: ns-3's clock resolution (its default, nanoseconds)
UNLIMITED = 1 << 30  # packets a switch port of a fabric without a `queue` holds: no limit a run reaches
# where a frame's offset and count lie (big-endian), from the declared header
_OFFSET = slice(AT_OFFSET, AT_OFFSET + dict(FIELDS)["offset"] // 8)
_COUNT = slice(AT_COUNT, AT_COUNT + dict(FIELDS)["count"] // 8)
_JOB = slice(AT_JOB_ID, AT_JOB_ID + dict(FIELDS)["job_id"] // 8)
_PHASE = slice(AT_PHASE, AT_PHASE + dict(FIELDS)["phase"] // 8)
_NOT_A_SUM = Flags.STALE_RUN | Flags.PENDING  # answers whose words are not a sum: a refusal's, a bitmap

GLUE = r"""
#include <cmath>
#include <map>
#include <vector>
namespace hina_ns3 {
using namespace ns3;
typedef void (*RecvFn)(int, int, double);
typedef void (*TimerFn)(int, long long, double);
typedef void (*EventFn)(long long, double);
RecvFn g_recv = nullptr;
TimerFn g_timer = nullptr;
EventFn g_event = nullptr;
std::vector<uint8_t> g_buf(65536);
std::vector<Ptr<NetDevice>> g_devs;
std::vector<std::vector<int>> g_groups;
std::vector<long long> g_drops;
std::vector<long long> g_maxq;
uint32_t g_pad = 0;
// where the header's job id, message type and worker id lie: a flow, which impairment keeps in order
int g_at_job = 0, g_at_type = 0, g_at_worker = 0;

// what a link does to the frames it delivers at one end (`Impairment`): a stream of its own, seeded per end
struct Impair {
  double drop = 0, dup = 0, reorder = 0;
  int64_t hold = 0;  // time steps a held frame waits at most
  uint64_t state = 0;
  std::map<uint32_t, int64_t> last;  // flow -> the latest instant one of its frames was given
};
std::vector<Impair> g_impair;
std::vector<long long> g_lost, g_duped, g_held;

double Uniform(Impair& im) {  // splitmix64: [0, 1)
  uint64_t z = (im.state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (double)(z >> 11) * (1.0 / 9007199254740992.0);
}
void Deliver(int ep, Ptr<const Packet> p) {
  uint32_t n = p->GetSize() - g_pad;
  p->CopyData(g_buf.data(), n);
  g_recv(ep, (int)n, Simulator::Now().GetSeconds());
}
uint32_t Flow(Ptr<const Packet> p) {
  uint8_t h[64] = {0};
  p->CopyData(h, sizeof h);
  return ((uint32_t)h[g_at_job] << 24) | ((uint32_t)h[g_at_job + 1] << 16) | ((uint32_t)h[g_at_type] << 8)
         | h[g_at_worker];
}
bool OnReceive(int ep, Ptr<NetDevice>, Ptr<const Packet> p, uint16_t, const Address&) {
  Impair& im = g_impair[ep];
  if (im.drop == 0 && im.dup == 0 && im.reorder == 0) { Deliver(ep, p); return true; }
  if (Uniform(im) < im.drop) { g_lost[ep]++; return true; }
  int copies = 1;
  if (Uniform(im) < im.dup) { g_duped[ep]++; copies = 2; }
  int64_t now = Simulator::Now().GetTimeStep(), at = now;
  if (Uniform(im) < im.reorder) { g_held[ep]++; at += 1 + (int64_t)(Uniform(im) * im.hold); }
  uint32_t flow = Flow(p);
  auto seen = im.last.find(flow);
  if (seen != im.last.end() && seen->second > at) at = seen->second;  // never ahead of its own flow's frames
  im.last[flow] = at;
  for (int c = 0; c < copies; c++) {
    if (at > now) Simulator::Schedule(TimeStep(at - now), &Deliver, ep, p); else Deliver(ep, p);
  }
  return true;
}
void OnDrop(int ep, Ptr<const Packet>) { g_drops[ep]++; }
void OnQueue(int ep, uint32_t, uint32_t now) { if ((long long)now > g_maxq[ep]) g_maxq[ep] = now; }
void OnTimer(int who, long long token) { g_timer(who, token, Simulator::Now().GetSeconds()); }
void OnEvent(long long what) { g_event(what, Simulator::Now().GetSeconds()); }

void Reset(RecvFn recv, TimerFn timer, EventFn event, uint32_t pad, int at_job, int at_type, int at_worker) {
  g_recv = recv; g_timer = timer; g_event = event; g_pad = pad;
  g_at_job = at_job; g_at_type = at_type; g_at_worker = at_worker;
  g_devs.clear(); g_groups.clear(); g_drops.clear(); g_maxq.clear();
  g_impair.clear(); g_lost.clear(); g_duped.clear(); g_held.clear();
}
int Attach(Ptr<NetDevice> dev) {
  int ep = (int)g_devs.size();
  g_devs.push_back(dev);
  g_drops.push_back(0); g_maxq.push_back(0);
  g_impair.emplace_back(); g_lost.push_back(0); g_duped.push_back(0); g_held.push_back(0);
  dev->SetReceiveCallback(MakeBoundCallback(&OnReceive, ep));
  Ptr<Queue<Packet>> q = DynamicCast<PointToPointNetDevice>(dev)->GetQueue();
  q->TraceConnectWithoutContext("Drop", MakeBoundCallback(&OnDrop, ep));
  q->TraceConnectWithoutContext("PacketsInQueue", MakeBoundCallback(&OnQueue, ep));
  return ep;
}
void SetQueue(int ep, uint32_t packets) {
  DynamicCast<PointToPointNetDevice>(g_devs[ep])->GetQueue()->SetMaxSize(QueueSize(QueueSizeUnit::PACKETS, packets));
}
void SetImpair(int ep, double drop, double dup, double reorder, double hold, unsigned long long seed) {
  Impair& im = g_impair[ep];
  im.drop = drop; im.dup = dup; im.reorder = reorder; im.hold = Seconds(hold).GetTimeStep(); im.state = seed;
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
// rounded up to ns-3's nanosecond, so that a timer never fires before `at` and then again at once
int64_t Wait(double at) {
  double wait = std::ceil((at - Simulator::Now().GetSeconds()) * 1e9);
  return wait > 0 ? (int64_t)wait : 0;
}
void Timer(int who, double at, long long token) { Simulator::Schedule(NanoSeconds(Wait(at)), &OnTimer, who, token); }
void At(double at, long long what) { Simulator::Schedule(NanoSeconds(Wait(at)), &OnEvent, what); }
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
        _unloadable()
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


def _unloadable() -> None:
    """Ns3Missing where ns-3's bindings are installed but cannot find their own libraries: PyPI's `ns3` (3.44) drops
    every library whose path contains "test", so a checkout or venv under such a folder gets an AttributeError
    from deep inside its loader instead of ns-3."""
    spec = importlib.util.find_spec("ns3")
    where = list(spec.submodule_search_locations or []) if spec is not None else []
    if where and "test" in os.path.realpath(where[0]):
        raise Ns3Missing(f"ns-3's bindings cannot load from {where[0]}: PyPI's ns3 loader skips every library whose "
                         "path contains 'test'; install the venv under another path, or put a copy of its ns3 folder "
                         "on PYTHONPATH at one")


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


# -- what goes wrong ----------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Impairment:
    """What one link does to the frames it carries, each direction on a random stream of its own (seeded by the
    run's seed and the link's end): a frame is lost with probability `drop`, else delivered twice with `dup`, and
    held back with `reorder` for up to `hold` seconds (uniform), so that later frames pass it.  A flow (the
    header's job, message type and worker id) is never reordered within itself: a network path keeps a flow in
    order and the slot protocol relies on it, as the emulator's reordering does (hina.emulator's `Impairment`,
    docs/design.md); RESULTs, which carry the worker id of whichever UPDATE completed them, do pass each other."""

    drop: float = 0.0
    dup: float = 0.0
    reorder: float = 0.0
    hold: float = 20e-6

    def __post_init__(self) -> None:
        for name in ("drop", "dup", "reorder"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"a link's {name} probability must be within [0, 1), got {getattr(self, name)}")
        if not 0.0 <= self.hold < math.inf:
            raise ValueError(f"a link's reordering hold must be >= 0 s, got {self.hold}")


@dataclasses.dataclass(frozen=True)
class Kill:
    """Worker `rank` of job `job` dies at `at` (simulated seconds): it sends nothing more (frames already in its
    NIC's queue still leave) and takes nothing in."""

    rank: int
    at: float
    job: int = 0


@dataclasses.dataclass(frozen=True)
class Restart:
    """Switch `switch` restarts at `at`: its registers and jobs are gone (a fresh `Pipeline`), and frames that
    reach it in the next `down` seconds are lost; then, with `reinstall`, the control plane installs its share of
    every job again, every slot empty (without: it stays bare, and drops the jobs' frames as UNKNOWN_JOB)."""

    switch: str
    at: float
    down: float = 0.0
    reinstall: bool = False


@dataclasses.dataclass(frozen=True)
class Faults:
    """What a run does to the network and the workers: `links` impaired (keyed by the link's two ends: a host
    and its switch, or a cable's two switches, either order), workers starting `late` (rank -> seconds, every job
    of that host), hosts whose link runs at another rate (`rates`, rank -> Mbit/s: a slowed worker), a worker
    killed, a switch restarted."""

    links: Mapping[tuple[str, str], Impairment] = dataclasses.field(default_factory=dict)
    late: Mapping[int, float] = dataclasses.field(default_factory=dict)
    rates: Mapping[int, float] = dataclasses.field(default_factory=dict)
    kill: Kill | None = None
    restart: Restart | None = None


@dataclasses.dataclass(frozen=True)
class Trace:
    """Which workers' frames a run writes out (`write`, a line each) between `start` and `end` (seconds): every
    worker on the hosts of `ranks`, every job's.  A line per frame it received (RESULT, RESEND, PENDING with who
    the answering switch had counted, STALE_RUN) and per frame it sent (the chunk, the how-many-th time, and
    for a resend what sent it: a timeout, a tail probe, RACK, or an ask of a chunk the switch holds), then its
    round-trip estimator and window where a step changed them.  And for the chunks numbered in `chunks` (of
    every job and round), every switch's view: each frame of theirs a switch took, from which member or its
    parent, and what its pipeline made of it (counted, the partial up, a RESULT to its members, a RESEND or PENDING
    back, or dropped and why)."""

    ranks: frozenset[int]
    write: Callable[[str], None]
    start: float = 0.0
    end: float = math.inf
    chunks: frozenset[int] = frozenset()


@dataclasses.dataclass(frozen=True)
class SimJob:
    """One job over every host of the fabric: its rounds (each a tuple of segment words) and what its workers
    send (zeros; `RealWords`; or a `_Given` payload per worker)."""

    rounds: Sequence[Round]
    data: RealWords | _Given | None = None


# -- the simulation ----------------------------------------------------------------------------------
OUTCOMES = ("sum", "timeout", "refused", "killed")  # how a worker ends: its rounds summed, or why not


class _Worker:
    __slots__ = ("index", "job", "rank", "wid", "ep", "pool", "rtt", "window", "xfer", "round", "armed", "token",
                 "answered", "ends", "retransmissions", "timeouts", "probes", "fast", "frames", "result", "wrong",
                 "outcome", "at", "error")

    def __init__(self, index: int, job: int, rank: int, wid: int, pool: SlotPool, sender: tuple):
        self.index, self.job, self.rank, self.wid, self.ep = index, job, rank, wid, -1
        self.pool = pool
        self.rtt, self.window = sender
        self.xfer: PhaseTransfer | None = None
        self.round = -1
        self.armed, self.token = math.inf, 0
        self.answered: list[float] | None = []
        self.ends: list[tuple[float, float]] = []
        self.retransmissions = self.timeouts = self.probes = self.fast = self.frames = 0
        self.result: np.ndarray | None = None
        self.wrong = 0  # RESULTs it received whose words were not numpy's sum, and wrong results
        self.outcome: str | None = None  # once it has ended: one of OUTCOMES
        self.at = math.nan  # when it ended
        self.error = ""  # the exception that ended it, as the worker would print it

    def count(self, x: PhaseTransfer) -> None:
        """Add a transfer's resends (by cause: a timeout, a tail probe, overtaken) and frames to the worker's."""
        stats = x.stats
        self.retransmissions += int(stats.get("retransmissions", 0))
        self.timeouts += int(stats.get("timeouts", 0))
        self.probes += int(stats.get("probes", 0))
        self.fast += int(stats.get("fast_retransmissions", 0))
        self.frames += int(stats.get("frames", 0))


@dataclasses.dataclass
class WorkerEnd:
    """How one worker of one job ended: its rounds summed ("sum"; `exact` says whether every RESULT and every
    result was numpy's sum), its deadline passed ("timeout", AggregationTimeout), the switch refused its run
    ("refused", StaleSwitchState), or killed; when (`at`), each round's end, its resends (of which after a
    timeout, as a tail probe, and overtaken: RACK) and frames."""

    job: int
    rank: int
    outcome: str
    at: float
    exact: bool | None
    round_ends: list[float]
    retransmissions: int
    timeouts: int
    frames: int
    error: str = ""
    probes: int = 0
    fast: int = 0


@dataclasses.dataclass
class Ns3Run:
    """One aggregation on ns-3: its seconds (extrapolated rounds included), where they went and, where the
    workers sent real words, whether every worker's result was numpy's sum (`exact`; None: zeros sent).
    With several jobs, `seconds` and `rounds` are the first job's; `workers` says how every worker ended."""

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
    workers: list[WorkerEnd] = dataclasses.field(default_factory=list)
    lost: int = 0  # frames the links' impairments lost
    duplicated: int = 0  # and delivered twice
    held: int = 0  # and held back
    switch_drops: dict[str, int] = dataclasses.field(default_factory=dict)  # by reason, every switch's pipelines
    restart_lost: int = 0  # frames that reached a restarting switch
    events: list[str] = dataclasses.field(default_factory=list)  # what the faults did, and when


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
    congestion: CongestionSettings = SIMULATED_HOST
    check_each: bool = False


def _join_rtts(run: _Settings, fabric: Fabric, rates: Mapping[int, float]) -> list[float]:
    """What each host's join exchange measures (`initial_rtt`, else the path's round trip:
    `hina.sim.scale.Setup.path_rtt`): the fabrics are alike from every host but for a host whose own link runs at
    another rate (`rates`, rank -> Mbit/s), which its frame crosses twice at that rate."""
    hosts = len(fabric.hosts)
    if run.initial_rtt:
        return [run.initial_rtt] * hosts
    net = Setup(fabric, run.delay, run.switch_latency, words=run.words, slots=run.slots)
    path, bits = net.path_rtt(), net.frame_bytes * 8
    return [path + 2 * bits * (1 / rates[r] - 1 / fabric.rate) / 1e6 if r in rates else path for r in range(hosts)]


def _sender(run: _Settings, path: float) -> tuple[RttEstimator, CongestionWindow]:
    """A worker's RTT estimator and congestion window, as a `hina.host.Worker` makes them with `run.congestion`:
    the estimator those rules pair with, started from what its join exchange measured (`path`: `_join_rtts`), its
    timers firing when due (ns-3's clock needs no tick)."""
    rtt = (RttEstimator.fair if run.congestion.fair else RttEstimator)(path=path)
    return rtt, CongestionWindow(run.slots, run.congestion)


class _Simulation:
    """Aggregations of each job's `rounds` over a fabric on ns-3: the network built from the fabric (`_build`), the
    three callbacks ns-3 makes (a frame arrived, a timer fired, a fault is due), what a switch and a worker do
    with a frame, each worker's rounds one after another (`_next_round`, `_finish`) and how a worker ends
    otherwise (`_end`: its deadline passed, its run refused, killed)."""

    def __init__(self, ns, fabric: Fabric, jobs: Sequence[SimJob], run: _Settings, faults: Faults, progress,
                 trace: Trace | None = None):
        self.ns, self.glue = ns, ns.cppyy.gbl.hina_ns3
        self.fabric, self.jobs, self.run_, self.faults, self.progress = fabric, jobs, run, faults, progress
        self.trace = trace
        self.traced_sends: collections.Counter = collections.Counter()  # (worker, round, offset) -> times sent
        self.traced_state: dict[int, str] = {}  # worker -> its estimator and window as last written
        self.chunks = [[round_chunks(r, run.words) for r in job.rounds] for job in jobs]
        self.simulated = [[c if run.cap is None else min(c, run.cap) for c in chunks] for chunks in self.chunks]
        # with zeros, every worker's RESULT words land in one buffer per job and round (the same words; N
        # buffers of a round would not fit at 1,024 workers, and the simulation measures time); so with real
        # words, whose every RESULT is checked as it arrives, unless `check_each` asks for every worker's result
        # (its own memory); given payloads keep each worker's own result
        self.keep = [isinstance(job.data, _Given) for job in jobs]
        self.workspaces = [None if keep or run.check_each else Workspace() for keep in self.keep]
        self.final_checked: set[tuple[int, int]] = set()  # (job, round) whose shared result was checked
        self.zeros = {n: np.zeros(n * run.words, np.int32)
                      for job, sizes in zip(jobs, self.simulated) if job.data is None for n in sizes}
        self.frame_bytes = Ring.frame_size(run.words)
        self.configs, leaf_of = switch_jobs(fabric, run.words, run.slots)
        hosts = len(fabric.hosts)
        joins = _join_rtts(run, fabric, faults.rates)
        self.workers: list[_Worker] = []
        self.by_host: list[list[_Worker]] = [[] for _ in range(hosts)]  # rank -> its worker of each job
        for j in range(len(jobs)):  # job j: id JOB + j on slots [j W, (j + 1) W) of every switch
            for rank in range(hosts):
                wk = _Worker(len(self.workers), j, rank, leaf_of[rank][1], SlotPool(j * run.slots, run.slots),
                             _sender(run, joins[rank]))
                self.workers.append(wk)
                self.by_host[rank].append(wk)
        self.pipelines = [Pipeline() for _ in fabric.switches]
        self.owner: list[tuple[int, int]] = []  # ep -> (switch index, port) or (-1, host rank)
        self.port_ep: list[dict[int, int]] = [{} for _ in fabric.switches]
        self.groups: list[dict] = [{} for _ in fabric.switches]  # switch -> {its multicast ports: the glue's group}
        self.down_until = [-math.inf] * len(fabric.switches)  # a restarting switch loses frames until then
        self.switch_drops: collections.Counter = collections.Counter()  # of pipelines a restart replaced
        self.events: list[Callable[[float], None]] = []  # what `glue.At` schedules, by index
        self.said: list[str] = []
        self.restart_lost = 0
        self.error: BaseException | None = None  # raised inside a callback: stops ns-3, raised again after
        self.done, self.checked, self.answered, self.last_log = 0, 0, 0, 0.0
        self.started = time.perf_counter()

    # -- what ns-3 calls ------------------------------------------------------------------
    def on_recv(self, ep: int, size: int, now: float) -> None:
        try:
            sw, port = self.owner[ep]
            frame = self.view[:size].tobytes()
            if sw >= 0:
                self._switch_frame(sw, port, frame, now)
                return
            j = int.from_bytes(frame[_JOB], "big") - JOB
            if 0 <= j < len(self.jobs):
                self._worker_frame(self.by_host[port][j], frame, now)
        except BaseException as exc:  # noqa: BLE001 -- not lost inside ns-3's C++: raised after Run
            self._fail(exc)

    def on_timer(self, who: int, token: int, now: float) -> None:
        try:
            wk = self.workers[who]
            if token != wk.token or wk.outcome is not None:
                return  # an earlier timer, since moved, or a worker that has ended
            wk.armed = math.inf
            if wk.xfer is None:
                self._next_round(wk, now)
            else:
                self._call(wk, wk.xfer.poll, now)
        except BaseException as exc:  # noqa: BLE001
            self._fail(exc)

    def on_event(self, what: int, now: float) -> None:
        try:
            self.events[what](now)
        except BaseException as exc:  # noqa: BLE001
            self._fail(exc)

    def _fail(self, exc: BaseException) -> None:
        if self.error is None:
            self.error = exc
        self.ns.Simulator.Stop()

    # -- a switch and a worker -----------------------------------------------------------------
    def _switch_frame(self, sw: int, port: int, frame: bytes, now: float) -> None:
        """The switch's pipeline takes the frame; what it emits leaves on its ports after its latency."""
        traced = self._traced_chunk(frame, now)
        if now < self.down_until[sw]:
            self.restart_lost += 1
            if traced:
                self._trace_switch(sw, port, frame, "lost: the switch is restarting", now)
            return
        before = self.pipelines[sw].drops if traced else None
        emit = self.pipelines[sw].update(frame, port)
        if traced:
            self._trace_switch(sw, port, frame, self._verdict(sw, emit, before), now)
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
        if self._traced(wk, now):
            self._trace_in(wk, frame, now)
        data = self.jobs[wk.job].data
        # a refusal (STALE_RUN) carries the refused UPDATE's words and a PENDING answer the copy's bitmap, not a sum
        if data is not None and frame[AT_MSG_TYPE] == MsgType.RESULT and not frame[AT_FLAGS] & _NOT_A_SUM:
            offset, count = int.from_bytes(frame[_OFFSET], "big"), int.from_bytes(frame[_COUNT], "big")
            self.checked += 1
            if not data.check(np.frombuffer(frame, ">i4", count, HEADER_BYTES), offset):
                wk.wrong += 1
        if not frame[AT_FLAGS] & (Flags.RESEND | Flags.PENDING):  # the multicast RESULT of a chunk, not a re-send
            if wk.answered is not None:
                wk.answered.append(now)
            if wk.index == 0 and self.progress is not None:
                self._tick(now)
        self._call(wk, lambda at: x.receive(frame, at), now)

    def _call(self, wk: _Worker, step: Callable[[float], list[bytes]], now: float) -> None:
        """A step of the worker's sender (`receive`, `poll`); its frames out, or the worker's end where the step
        raised as a worker raises: its deadline passed, or the switch refused its run."""
        before = wk.xfer.stats if self._traced(wk) else None  # its sends counted from the first
        try:
            frames = step(now)
        except AggregationTimeout as exc:
            self._end(wk, now, "timeout", exc)
            return
        except StaleSwitchState as exc:
            self._end(wk, now, "refused", exc)
            return
        if before is not None:
            self._trace_out(wk, frames, before, now)
        self._out(wk, frames, now)

    # -- the trace (`Trace`) ---------------------------------------------------------------------------------
    _CAUSES = (("timeouts", "timeout"), ("probes", "tail probe"), ("fast_retransmissions", "RACK"), ("asked", "ask"))

    def _traced(self, wk: _Worker, now: float | None = None) -> bool:
        """Whether `wk` is traced (and, given `now`, its lines written then)."""
        tr = self.trace
        return tr is not None and wk.rank in tr.ranks and (now is None or tr.start <= now <= tr.end)

    def _trace_line(self, wk: _Worker, now: float, what: str) -> None:
        self.trace.write(f"{now * 1e3:10.4f} ms  job {wk.job} rank {wk.rank:>3}  {what}")

    def _trace_in(self, wk: _Worker, frame: bytes, now: float) -> None:
        kind = self._kind(frame)
        what = f"<- {kind:<9} chunk {int.from_bytes(frame[_OFFSET], 'big') // self.run_.words}"
        if kind == "PENDING":
            counted = int.from_bytes(frame[HEADER_BYTES:HEADER_BYTES + 4], "big")
            what += (f": {bin(counted).count('1')} counted ({counted:#x}), this worker "
                     + ("among them" if counted >> wk.wid & 1 else "not"))
        self._trace_line(wk, now, what)

    def _trace_out(self, wk: _Worker, frames: list[bytes], before: collections.Counter, now: float) -> None:
        after = wk.xfer.stats
        causes = ", ".join(name for key, name in self._CAUSES if after[key] > before[key])
        shown = self._traced(wk, now)
        for f in frames:
            offset = int.from_bytes(f[_OFFSET], "big")
            key = (wk.index, wk.round, offset)
            self.traced_sends[key] += 1
            n = self.traced_sends[key]
            if shown:
                self._trace_line(wk, now, f"-> UPDATE    chunk {offset // self.run_.words}"
                                          + ("" if n == 1 else f", time {n}" + (f" ({causes})" if causes else "")))
        r = wk.rtt.state[0]
        state = (f"srtt {r['srtt'] * 1e6:.1f} us, least {r['min_rtt'] * 1e6:.1f} us, timeout {r['rto'] * 1e6:.1f} us,"
                 f" window {wk.window.cwnd:.2f}")
        if shown and self.traced_state.get(wk.index) != state:
            self.traced_state[wk.index] = state
            self._trace_line(wk, now, f"   {state}")

    def _traced_chunk(self, frame: bytes, now: float) -> bool:
        tr = self.trace
        return (tr is not None and bool(tr.chunks) and tr.start <= now <= tr.end
                and int.from_bytes(frame[_OFFSET], "big") // self.run_.words in tr.chunks)

    @staticmethod
    def _kind(frame: bytes) -> str:
        """UPDATE, or which answer: a RESULT, a RESEND (from a complete copy), a PENDING, a STALE_RUN refusal."""
        flags = frame[AT_FLAGS]
        if frame[AT_MSG_TYPE] == MsgType.UPDATE:
            return "UPDATE"
        return ("STALE_RUN" if flags & Flags.STALE_RUN else "PENDING" if flags & Flags.PENDING
                else "RESEND" if flags & Flags.RESEND else "RESULT")

    def _verdict(self, sw: int, emit, before: collections.Counter) -> str:
        """What a switch's pipeline made of a frame: what it emitted and where, or why it dropped it."""
        if emit is None:
            dropped = self.pipelines[sw].drops - before
            return f"dropped: {', '.join(d.name.lower() for d in dropped)}" if dropped else "counted"
        dests, out = emit
        kind = self._kind(out)
        if kind == "PENDING":
            kind += f" ({int.from_bytes(out[HEADER_BYTES:HEADER_BYTES + 4], 'big'):#x} counted)"
        where = f"port {dests[0]}" if len(dests) == 1 else f"{len(dests)} ports"
        return f"{kind if kind != 'UPDATE' else 'the partial up'} to {where}"

    def _trace_switch(self, sw: int, port: int, frame: bytes, verdict: str, now: float) -> None:
        job = int.from_bytes(frame[_JOB], "big") - JOB
        rnd = int.from_bytes(frame[_PHASE], "big") + 1  # a round's phase tag is its index
        chunk = int.from_bytes(frame[_OFFSET], "big") // self.run_.words
        sender = "its parent" if frame[AT_MSG_TYPE] == MsgType.RESULT else f"member {frame[AT_WORKER_ID]}"
        self.trace.write(f"{now * 1e3:10.4f} ms  switch {self.fabric.switches[sw].name} port {port}  <- "
                         f"{self._kind(frame):<9} job {job} round {rnd} chunk {chunk} from {sender}: {verdict}")

    def _out(self, wk: _Worker, frames: list[bytes], now: float) -> None:
        """A worker's frames onto its link; its timer moved, or its round finished."""
        for f in frames:
            self.glue.Send(wk.ep, f, self.frame_bytes, 0.0)
        x = wk.xfer
        if x.done:
            self._finish(wk, now)
            return
        t = x.next_timer()
        if t <= now:
            # due at this very instant, yet the step just taken did nothing then: the sender compares
            # `now - last_progress >= deadline` where `next_timer` said `last_progress + deadline`, and the two
            # can differ by a rounding; a real clock moves on, ns-3's would stand still, so: its next tick
            t = now + TICK
        if t < wk.armed:
            wk.armed = t
            wk.token += 1
            self.glue.Timer(wk.index, t, wk.token)

    def _finish(self, wk: _Worker, now: float) -> None:
        """A worker's round is answered: its counts, the chunks past the cap charged, its next round."""
        x = wk.xfer
        wk.count(x)
        j, r = wk.job, wk.round
        extra = 0.0
        if self.simulated[j][r] < self.chunks[j][r]:
            a = wk.answered
            half = len(a) // 2
            extra = (self.chunks[j][r] - self.simulated[j][r]) * (a[-1] - a[half]) / max(1, len(a) - 1 - half)
        wk.ends.append((now, extra))
        data = self.jobs[j].data
        shared = self.workspaces[j] is not None  # one buffer for every worker of the job: checked once
        if data is not None and (not shared or (j, r) not in self.final_checked) and not data.check(x.result):
            wk.wrong += 1
        self.final_checked.add((j, r))
        if self.keep[j]:
            wk.result = x.result
        wk.xfer = None
        self._next_round(wk, now)

    def _next_round(self, wk: _Worker, now: float) -> None:
        """A worker starts its next round (or, after the last, has summed them all)."""
        wk.round += 1
        j, r = wk.job, wk.round
        job = self.jobs[j]
        if r == len(job.rounds):
            self._end(wk, now, "sum")
            return
        n, words = self.simulated[j][r], self.run_.words
        wk.answered = [] if n < self.chunks[j][r] else None
        payload = self.zeros[n] if job.data is None else job.data.payload(wk.rank, n * words)
        wk.xfer = PhaseTransfer(job_id=JOB + j, worker_id=wk.wid, words=words, pool=wk.pool, rtt=wk.rtt,
                                tag=r & 0xFFFF, op=0, payload=payload, name=f"job{j}:round{r}", now=now,
                                deadline=self.run_.deadline, window=wk.window, workspace=self.workspaces[j])
        if self.progress is not None and wk.index == 0:
            self.answered = 0
            self.progress(f"{plural(len(self.fabric.hosts), 'worker')}: round {r + 1}/{len(job.rounds)} "
                          f"({n:,} of {plural(self.chunks[j][r], 'chunk')} simulated) at {now * 1e3:.3f} ms simulated, "
                          f"{self._wall():.0f} s wall")
        self._call(wk, wk.xfer.start, now)

    def _end(self, wk: _Worker, now: float, outcome: str, error: BaseException | str = "") -> None:
        """A worker has ended (`OUTCOMES`): its last transfer's counts kept, its timers and frames ignored from now
        on; the last worker to end stops ns-3."""
        if wk.xfer is not None:
            wk.count(wk.xfer)
            wk.xfer = None
        wk.outcome, wk.at, wk.error = outcome, now, str(error)
        wk.token += 1
        self.done += 1
        if self.done == len(self.workers):
            self.ns.Simulator.Stop()

    def _tick(self, now: float) -> None:
        """Worker 0 has one more chunk answered: a progress line every 30 s of wall time."""
        self.answered += 1
        wall = self._wall()
        if wall - self.last_log >= 30:
            self.last_log = wall
            r = self.workers[0].round
            self.progress(f"{plural(len(self.fabric.hosts), 'worker')}: round {r + 1}/{len(self.jobs[0].rounds)}, "
                          f"{self.answered:,} of {plural(self.simulated[0][r], 'chunk')} answered at "
                          f"{now * 1e3:.3f} ms simulated, {wall:.0f} s wall")

    def _wall(self) -> float:
        return time.perf_counter() - self.started

    # -- faults ---------------------------------------------------------------------------------------
    def _at(self, at: float, what: Callable[[float], None]) -> None:
        self.events.append(what)
        self.glue.At(at, len(self.events) - 1)

    def _schedule_faults(self) -> None:
        kill, restart = self.faults.kill, self.faults.restart
        if kill is not None:
            if not (0 <= kill.rank < len(self.fabric.hosts) and 0 <= kill.job < len(self.jobs)):
                raise ValueError(f"kill: no worker {kill.rank} of job {kill.job} "
                                 f"({plural(len(self.fabric.hosts), 'host')}, {plural(len(self.jobs), 'job')})")
            self._at(kill.at, lambda now: self._kill(self.by_host[kill.rank][kill.job], now))
        if restart is not None:
            sw = next((i for i, s in enumerate(self.fabric.switches) if s.name == restart.switch), None)
            if sw is None:
                raise ValueError(f"restart: no switch {restart.switch!r} in the fabric")
            self._at(restart.at, lambda now: self._restart(sw, restart, now))
            if restart.reinstall:
                self._at(restart.at + restart.down, lambda now: self._reinstall(sw, now))

    def _kill(self, wk: _Worker, now: float) -> None:
        if wk.outcome is None:
            self._end(wk, now, "killed", "killed")
            self.said.append(f"{now * 1e3:.3f} ms: worker {wk.rank} of job {wk.job} killed in round {wk.round + 1}")
        else:
            self.said.append(f"{now * 1e3:.3f} ms: worker {wk.rank} of job {wk.job} not killed: it had ended "
                             f"({wk.outcome})")

    def _restart(self, sw: int, restart: Restart, now: float) -> None:
        self.switch_drops.update(self.pipelines[sw].drops)
        self.pipelines[sw] = Pipeline()
        self.down_until[sw] = now + restart.down
        self.said.append(f"{now * 1e3:.3f} ms: switch {restart.switch} restarted, its state wiped"
                         + (f", down for {restart.down * 1e3:.3f} ms" if restart.down else ""))

    def _reinstall(self, sw: int, now: float) -> None:
        self._install(sw)
        self.said.append(f"{now * 1e3:.3f} ms: switch {self.fabric.switches[sw].name}'s jobs installed again, "
                         "their slots empty")

    def _install(self, sw: int) -> None:
        """Switch `sw`'s share of every job: job j is job JOB + j on slots [j W, (j + 1) W)."""
        cfg, slots = self.configs[sw], self.run_.slots
        for j in range(len(self.jobs)):
            self.pipelines[sw].add_job(dataclasses.replace(cfg, job_id=JOB + j, slot_base=j * slots))

    # -- the network, and the run ---------------------------------------------------------------
    def _build(self) -> None:
        """Nodes (the hosts, then the switches), a point-to-point link per host and per cable of the fabric at
        its rate (a slowed host's at its own), each switch port's queue the fabric's (a worker's NIC HOST_QUEUE),
        each link's impairment, each switch's share of every job."""
        ns, glue, fabric = self.ns, self.glue, self.fabric
        self.callbacks = (self.on_recv, self.on_timer, self.on_event)  # held: cppyy's function pointers die with them
        glue.Reset(*self.callbacks, PAD, AT_JOB_ID, AT_MSG_TYPE, AT_WORKER_ID)
        buf = glue.g_buf.data()
        buf.reshape((65536,))
        self.view = np.frombuffer(buf, np.uint8, count=65536)
        nodes = ns.NodeContainer()
        base = len(fabric.hosts)
        nodes.Create(base + len(fabric.switches))
        at = {s.name: i for i, s in enumerate(fabric.switches)}
        helpers: dict[float, object] = {}
        queue = f"{fabric.queue or UNLIMITED}p"
        impaired = _impairments(fabric, self.faults.links)

        def link(a: int, b: int, mbps: float, ends: tuple[tuple[int, int], tuple[int, int]],
                 names: tuple[str, str]) -> tuple[int, int]:
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
            im = impaired.get(names)
            if im is not None:
                for ep in eps:  # each direction on its own stream, the same from run to run
                    state = int(np.random.SeedSequence([self.run_.seed, ep]).generate_state(1, np.uint64)[0])
                    glue.SetImpair(ep, im.drop, im.dup, im.reorder, im.hold, state)
            return eps

        for rank, h in enumerate(fabric.hosts):
            mbps = self.faults.rates.get(rank, fabric.rate)
            wep, _ = link(rank, base + at[h.switch], mbps, ((-1, rank), (at[h.switch], h.port)), (h.name, h.switch))
            glue.SetQueue(wep, HOST_QUEUE)
            for wk in self.by_host[rank]:
                wk.ep = wep
        rates = fabric.link_rates()
        for ln in fabric.links:
            link(base + at[ln.a], base + at[ln.b], rates[ln.a, ln.b], ((at[ln.a], ln.a_port), (at[ln.b], ln.b_port)),
                 (ln.a, ln.b))
        for sw in range(len(fabric.switches)):
            self._install(sw)

    def run(self) -> Ns3Run:
        ns, glue = self.ns, self.glue
        self._build()
        self._schedule_faults()
        rng = np.random.default_rng(self.run_.seed)
        spread = self.run_.start_spread
        offsets = rng.random(len(self.workers)) * spread if spread else np.zeros(len(self.workers))
        for w in self.workers:
            glue.Timer(w.index, float(offsets[w.index]) + self.faults.late.get(w.rank, 0.0), w.token)
        wall = time.perf_counter()
        ns.Simulator.Run()
        wall = time.perf_counter() - wall
        end = ns.Simulator.Now().GetSeconds()
        eps = ns.cppyy.gbl.std.vector[int]
        every = eps(list(range(len(self.owner))))
        root_eps = eps([ep for i, s in enumerate(self.fabric.switches) if not self.fabric.parents(s.name)
                        for ep in self.port_ep[i].values()])
        port_eps = eps([ep for ports in self.port_ep for ep in ports.values()])
        stats = dict(drops=int(glue.Total(glue.g_drops, every)), root_max_queue=int(glue.Most(glue.g_maxq, root_eps)),
                     max_queue=int(glue.Most(glue.g_maxq, port_eps)), lost=int(glue.Total(glue.g_lost, every)),
                     duplicated=int(glue.Total(glue.g_duped, every)), held=int(glue.Total(glue.g_held, every)))
        ns.Simulator.Destroy()
        if self.error is not None:
            raise self.error
        unfinished = len(self.workers) - self.done
        if unfinished:
            raise RuntimeError(f"{unfinished:,} of {plural(len(self.workers), 'worker')} did not end by {end:.3f} s "
                               "simulated")
        return self._result(wall, stats)

    def _result(self, wall: float, stats: dict) -> Ns3Run:
        """Round r of the first job ends when its last worker is answered; extrapolated chunks add the slowest
        worker's interval.  Every worker's end besides."""
        first = [w for w in self.workers if w.job == 0]
        per_round, before, shift = [], 0.0, 0.0
        for r in range(len(self.jobs[0].rounds)):
            ends = [w.ends[r] for w in first if len(w.ends) > r]
            if not ends:
                break
            at, extra = max(e[0] for e in ends), max(e[1] for e in ends)
            per_round.append({"chunks": self.chunks[0][r], "simulated": self.simulated[0][r],
                              "seconds": at - before + extra})
            before = at
            shift += extra
        for pipeline in self.pipelines:
            self.switch_drops.update(pipeline.drops)
        ends = [WorkerEnd(w.job, w.rank, w.outcome, w.at, None if self.jobs[w.job].data is None else not w.wrong,
                          [e[0] for e in w.ends], w.retransmissions, w.timeouts, w.frames, w.error, w.probes, w.fast)
                for w in self.workers]
        real = any(job.data is not None for job in self.jobs)
        return Ns3Run(seconds=before + shift, simulated_seconds=before, rounds=per_round,
                      retransmissions=sum(w.retransmissions for w in self.workers),
                      timeouts=sum(w.timeouts for w in self.workers), frames=sum(w.frames for w in self.workers),
                      wall_seconds=wall, results=[w.result for w in first] if self.keep[0] else None,
                      exact=not any(w.wrong for w in self.workers) if real else None, checked=self.checked,
                      workers=ends, switch_drops={d.name.lower(): n for d, n in sorted(self.switch_drops.items())},
                      restart_lost=self.restart_lost, events=self.said, **stats)


def _impairments(fabric: Fabric, links: Mapping[tuple[str, str], Impairment]) -> dict[tuple[str, str], Impairment]:
    """`links` keyed as the build names each link ((host, its switch), (a cable's lower end, its upper)); a key
    that names no link of the fabric is a ValueError."""
    known = {(h.name, h.switch) for h in fabric.hosts} | {(ln.a, ln.b) for ln in fabric.links}
    out = {}
    for (a, b), im in links.items():
        key = (a, b) if (a, b) in known else (b, a)
        if key not in known:
            raise ValueError(f"no link between {a} and {b} in the fabric ({fabric.description})")
        out[key] = im
    return out


def simulate_jobs(fabric: Fabric, jobs: Sequence[SimJob], *, words: int = max_words(9000), slots: int = 64,
                  cap: int | None = None, delay: float = 1e-6, switch_latency: float = 1e-6,
                  initial_rtt: float | None = None, start_spread: float = 0.0, seed: int = 0, deadline: float = 60.0,
                  faults: Faults = Faults(), congestion: CongestionSettings = SIMULATED_HOST, check_each: bool = False,
                  progress: Callable[[str], None] | None = None, trace: Trace | None = None) -> Ns3Run:
    """Run `jobs` at once over `fabric` on ns-3, each over every host (a worker of each job on each host, job j on
    slots [j `slots`, (j + 1) `slots`) of every switch), with `faults`; every worker's end is in the result
    (`Ns3Run.workers`), whether its rounds summed, its deadline (`deadline` seconds without progress) passed, the
    switch refused its run, or it was killed.

    congestion: the workers' rules (`SIMULATED_HOST`: a `hina.host.Worker`'s defaults on a host no scheduler delays,
    as the scale model's), with the RTT estimator a worker pairs them with; initial_rtt: what each worker's join
    exchange measured (None: the path's round trip).  check_each: every worker's result of every round checked
    against numpy's sum (its own memory: N results at once), not only every RESULT it received.  trace: some
    workers' frames written out as they go (`Trace`).  `simulate` says the rest."""
    if fabric.rate is None:
        raise ValueError("ns-3 needs the hosts' rate: give the fabric a rate (Mbit/s)")
    if not jobs:
        raise ValueError("no jobs to run")
    if len(jobs) * slots > MAX_SLOTS:
        raise ValueError(f"{plural(len(jobs), 'job')} x {plural(slots, 'slot')}: "
                         f"{plural(len(jobs) * slots, 'slot')}, more than a switch's {MAX_SLOTS:,}")
    run = _Settings(words, slots, cap, delay, switch_latency, initial_rtt, start_spread, seed, deadline, congestion,
                    check_each)
    return _Simulation(load(), fabric, jobs, run, faults, progress, trace).run()


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
    model's identical workers).  A worker that does not sum its rounds (its deadline passed, or the switch
    refused its run) is a RuntimeError naming it: `simulate_jobs` runs faults, and reports such ends."""
    if payloads is not None:
        if len(payloads) != len(fabric.hosts) or len({p.size for p in payloads}) != 1:
            raise ValueError(f"{plural(len(fabric.hosts), 'payload')} of one length wanted, got {len(payloads)}")
        rounds, cap, data = [(payloads[0].size,)], None, _Given(payloads)
    run = simulate_jobs(fabric, [SimJob(rounds, data)], words=words, slots=slots, cap=cap, delay=delay,
                        switch_latency=switch_latency, initial_rtt=initial_rtt, start_spread=start_spread, seed=seed,
                        deadline=deadline, congestion=congestion, progress=progress)
    failed = next((w for w in run.workers if w.outcome != "sum"), None)
    if failed is not None:
        raise RuntimeError(f"worker {failed.rank} did not sum its rounds: {failed.error}")
    return run
