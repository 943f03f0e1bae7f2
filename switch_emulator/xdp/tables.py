"""The XDP switch's control plane: the emulator's `Pipeline` interface over the program's BPF maps.

`Program` is the loaded object (`hina_xdp.c`, compiled by `build`): its maps and programs, the slot
commands it runs under each slot's lock, its counters summed over the CPUs.  `XdpPipeline` is what
the control port (`hina.emulator.control_port.handle`), the ledger, leases and tenants drive: it
keeps the emulator's job semantics (`Pipeline.join`, `leave`, `listing`, `counters` are inherited)
and writes each job into the maps instead of numpy registers:

- `jobs` (job_id -> shape, slot range, tree share, each member's source id), `counters` (a row per
  job, one value per CPU);
- `replicas` ((job_id, port, n) -> the n-th member address behind that port: where the egress
  program sends that copy of a RESULT) and `groups` (job_id -> a devmap with one entry per replica);
- the slots themselves, emptied by `hina_control` (a RESET when a job is installed or reset, a CLEAR
  of an earlier run's copies as a worker joins), each slot under its own lock while frames flow.

`XdpDataPlane` adds a whole `Topology` (`configure`): the ports' rewrites, the MAC table, the flood
group, the devmap of the interfaces, as the raw emulator's `FrameSwitch` does.
"""

from __future__ import annotations

import collections
import ctypes
import dataclasses
import time

import numpy as np

from hina.control.config import JobConfig, PortAddress
from hina.control.ledger import DEFAULT_SPACE
from hina.control.topology import FLOOD_GROUP, Topology
from hina.emulator import registers as dp
from hina.emulator.pipeline import Pipeline, _counter
from hina.wire.frames import ip_bytes, mac_bytes
from hina.wire.headers import MAX_WORKERS, Drop

from . import build, layout
from .layout import (
    Command,
    CommandOp,
    Cursor,
    Job,
    JobCounters,
    MacAction,
    MacKey,
    Replica,
    ReplicaKey,
    Rewrite,
    Slot,
    Totals,
)
from .libbpf import BPF_F_LOCK, BpfObject, Map, create_map, possible_cpus, prog_test_run

# a member's frame moved these once it passed the job's checks of its source: taken in, answered, or dropped
# as a duplicate, stale, another run's, or out of the job's counts and slots (the emulator's `_HEARD`)
_HEARD_FIELDS = ("updates", "results", "resends", "resent_up", "pending")
_HEARD_DROPS = (Drop.DUPLICATE, Drop.STALE, Drop.STALE_RUN, Drop.BAD_COUNT, Drop.BAD_SLOT)
_u32 = ctypes.c_uint32


def _bytes(value: ctypes.Structure | ctypes._SimpleCData) -> bytes:
    return bytes(memoryview(value).cast("B"))


class Program:
    """The compiled XDP switch, loaded: its maps, its programs' fds, `slots` slots of state."""

    MAPS = ("ports", "egress", "flood", "groups", "jobs", "slots", "counters", "totals", "rewrite", "replicas",
            "cursors", "macs")

    def __init__(self, slots: int = DEFAULT_SPACE):
        self.obj = BpfObject(build.compiled())
        try:
            self.obj.set_max_entries("slots", slots)
            self.group_template = self.obj.inner_map("groups")  # libbpf frees the template once it loads
            self.obj.load()
            self.maps: dict[str, Map] = {name: self.obj.map(name) for name in self.MAPS}
            self.ingress, self.egress = self.obj.program_fd("hina_ingress"), self.obj.program_fd("hina_egress")
            self.egress_test = self.obj.program_fd("hina_egress_test")
            self.control = self.obj.program_fd("hina_control")
        except BaseException:
            self.obj.close()
            raise
        self.slots = slots
        self.cpus = possible_cpus()

    def percpu(self, name: str, key: int, struct: type[ctypes.Structure]) -> np.ndarray:
        """A per-CPU map's value at `key`, summed over the CPUs, as the struct's 64-bit words."""
        size = (ctypes.sizeof(struct) + 7) // 8 * 8
        raw = self.maps[name].lookup(_bytes(_u32(key)), size=size * self.cpus)
        return np.frombuffer(raw, np.uint64).reshape(self.cpus, size // 8).sum(axis=0, dtype=np.uint64)

    def zero_percpu(self, name: str, key: int, struct: type[ctypes.Structure]) -> None:
        size = (ctypes.sizeof(struct) + 7) // 8 * 8
        self.maps[name].update(_bytes(_u32(key)), bytes(size * self.cpus))

    def command(self, op: CommandOp, base: int, slots: int, worker: int = 0, full: int = 0, needed: int = 0) -> int:
        """Run one slot command over slots [base, base + slots), each under its lock; the copies it emptied."""
        cmd = Command(op=op, worker=worker, base=base, slots=slots, full=full, needed=needed)
        out = prog_test_run(self.control, _bytes(cmd), out_size=ctypes.sizeof(Command)).frame
        return Command.from_buffer_copy(out).cleared

    def slot(self, slot: int) -> Slot:
        """Slot `slot`'s copies and words, read under its lock (tests, listings)."""
        return Slot.from_buffer_copy(self.maps["slots"].lookup(_bytes(_u32(slot)), flags=BPF_F_LOCK))

    def close(self) -> None:
        self.obj.close()


class XdpJob:
    """One job on the XDP switch: its config and bookkeeping, as the emulator's job state, with its counters
    and copies in the program's maps (the duck type `Pipeline`'s inherited methods use)."""

    def __init__(self, cfg: JobConfig, pipeline: XdpPipeline, row: int):
        self.cfg, self.pipeline, self.row = cfg, pipeline, row
        self.origin = "add_job"
        self.installed = self.heard = time.monotonic()
        self.framed: float | None = None
        self.refused: float | None = None
        self._marks = (0, 0)
        self.group: Map | None = None  # the devmap of its replicas

    def counted(self) -> JobCounters:
        words = self.pipeline.program.percpu("counters", self.row, JobCounters)
        return JobCounters.from_buffer_copy(words.tobytes())

    def note(self, now: float) -> None:
        c = self.counted()
        heard = sum(getattr(c, f) for f in _HEARD_FIELDS) + sum(c.drops[d] for d in _HEARD_DROPS)
        refused = c.drops[Drop.STALE_RUN]
        if heard != self._marks[0]:
            self.heard = self.framed = now
        if refused != self._marks[1]:
            self.refused = now
        self._marks = (heard, refused)

    def set_members(self, cfg: JobConfig) -> None:
        self.cfg = cfg
        self.pipeline.install(self)

    @property
    def updates(self) -> int:
        return self.counted().updates

    @property
    def results(self) -> int:
        return self.counted().results

    @property
    def resends(self) -> int:
        return self.counted().resends

    @property
    def sent_up(self) -> int:
        return self.counted().sent_up

    @property
    def resent_up(self) -> int:
        return self.counted().resent_up

    @property
    def pending(self) -> int:
        return self.counted().pending

    @property
    def dropped(self) -> collections.Counter:
        return _reasons(self.counted().drops)

    def reset(self) -> None:
        self.pipeline.program.command(CommandOp.RESET, self.cfg.slot_base, self.cfg.slots)

    def clear_leftovers(self, worker_id: int) -> int:
        """Empty the copies an earlier run left (the emulator's rule, `_JobState.clear_leftovers`), each slot
        under its lock while the job's other workers may be sending."""
        cfg = self.cfg
        return self.pipeline.program.command(CommandOp.CLEAR, cfg.slot_base, cfg.slots, worker=worker_id,
                                              full=cfg.full_mask, needed=cfg.children)


def _reasons(drops) -> collections.Counter:
    """Drops by reason from a counter row indexed by reason, as the emulator reads its own."""
    return _counter(np.asarray(drops))


class XdpPipeline(Pipeline):
    """The emulator's control-plane interface on the XDP program's maps (the module docstring says what each
    map holds).  `interfaces` (port -> ifindex) are the ports frames can leave by; without them (the tests'
    BPF_PROG_TEST_RUN) the rules run the same and their RESULTs have no devmap entry to go to."""

    def __init__(self, program: Program, interfaces: dict[int, int] | None = None) -> None:
        self.program = program
        self.interfaces = dict(interfaces or {})
        self.jobs: dict[int, XdpJob] = {}
        self._source_ids: dict = {}
        self._next_id = iter(range(dp.OTHER_IDS, dp.RAW_IDS))
        self._rows = list(range(layout.MAX_JOBS - 1, -1, -1))  # free counter rows, lowest last

    # -- counters --------------------------------------------------------------
    def totals(self) -> Totals:
        return Totals.from_buffer_copy(self.program.percpu("totals", 0, Totals).tobytes())

    @property
    def frames(self) -> int:
        return int(self.totals().drops[0])

    @property
    def drops(self):
        return _reasons(self.totals().drops)

    def counters(self) -> dict:
        totals = self.totals()
        return {**super().counters(), "forwarded": int(totals.forwarded), "unsent": int(totals.unsent)}

    # -- jobs ------------------------------------------------------------------
    def check(self, cfg: JobConfig) -> None:
        """Refuse, in one line, a job this program cannot hold."""
        if cfg.words > layout.MAX_WORDS:
            raise ValueError(f"job {cfg.job_id}: {cfg.words} words per packet, but the XDP switch takes at most "
                             f"{layout.MAX_WORDS} (frames of an MTU up to {layout.XDP_MTU}: the kernel broadcasts "
                             f"no larger frame); give the job K <= {layout.MAX_WORDS}")
        if cfg.slot_base + cfg.slots > self.program.slots:
            raise ValueError(f"job {cfg.job_id}: slots [{cfg.slot_base}, {cfg.slot_base + cfg.slots}) lie outside "
                             f"the XDP switch's [0, {self.program.slots}) (start it with a larger --slot-space)")
        for m in cfg.members:
            if isinstance(m.source, tuple) and not isinstance(m.source, PortAddress):
                raise ValueError(f"job {cfg.job_id}: worker {m.worker_id} joins from the UDP address {m.source}, but "
                                 f"the XDP switch serves workers behind its ports (raw frames)")

    def add_job(self, cfg: JobConfig, *, origin: str = "add_job") -> None:
        """Install (or replace) a job; its slots start empty.  Slot ranges may not overlap."""
        self.check(cfg)
        for other in self.jobs.values():
            if other.cfg.job_id != cfg.job_id and other.cfg.overlaps(cfg):
                raise ValueError(
                    f"job {cfg.job_id}'s slots [{cfg.slot_base}, {cfg.slot_base + cfg.slots}) overlap job "
                    f"{other.cfg.job_id}'s [{other.cfg.slot_base}, {other.cfg.slot_base + other.cfg.slots})")
        if cfg.job_id in self.jobs:
            self.remove_job(cfg.job_id)
        if not self._rows:
            raise ValueError(f"job {cfg.job_id}: the XDP switch holds {layout.MAX_JOBS} jobs at most")
        job = XdpJob(cfg, self, self._rows.pop())
        job.origin = origin
        self.program.zero_percpu("counters", job.row, JobCounters)
        job.reset()
        self.jobs[cfg.job_id] = job
        self.install(job)

    def join(self, cfg: JobConfig, member):
        self.check(dataclasses.replace(cfg, members=(member,)))
        return super().join(cfg, member)

    def remove_job(self, job_id: int) -> None:
        job = self._job(job_id)
        maps = self.program.maps
        maps["jobs"].delete(_bytes(_u32(job_id)))  # first: frames of the job stop here
        maps["groups"].delete(_bytes(_u32(job_id)))
        for key in maps["replicas"].keys():
            if ReplicaKey.from_buffer_copy(key).job_id == job_id:
                maps["replicas"].delete(key)
        if job.group is not None:
            job.group.close()
        del self.jobs[job_id]
        self._rows.append(job.row)
        self._rows.sort(reverse=True)

    def install(self, job: XdpJob) -> None:
        """Write a job (its shape, members, tree share and replicas) into the maps, its slots kept."""
        cfg = job.cfg
        self.check(cfg)
        entry = Job(row=job.row, workers=cfg.workers, words=cfg.words, frame_bytes=cfg.frame_bytes,
                    slot_base=cfg.slot_base, slots=cfg.slots, full=cfg.full_mask, needed=cfg.children,
                    parents=len(cfg.parents), member=cfg.parents[0].worker_id if cfg.parents else 0)
        entry.auth[:] = [dp.NO_MEMBER & (1 << 64) - 1] * len(entry.auth)
        for m in cfg.members:
            entry.auth[m.worker_id] = self.source_id(m.source)
        for k, parent in enumerate(cfg.parents):
            entry.auth[MAX_WORKERS + k] = self.source_id(parent.source)
        self._install_group(job)
        self.program.maps["jobs"].update(_bytes(_u32(cfg.job_id)), _bytes(entry))

    def replicas(self, cfg: JobConfig) -> list[tuple[int, Replica]]:
        """The job's RESULT replicas, in worker order: one per distinct member source behind a port (a port's
        host for members known by their port alone, the member's own address for the others)."""
        out, seen = [], set()
        for m in sorted(cfg.members, key=lambda m: m.worker_id):
            sid = self.source_id(m.source)
            if sid in seen or not (dp.PORT_IDS <= sid < dp.OTHER_IDS or sid >= dp.RAW_IDS):
                continue  # its address already has a replica, or it is not behind a port
            seen.add(sid)
            if sid >= dp.RAW_IDS:
                rep = Replica(address=1)
                rep.mac[:] = list(mac_bytes(m.mac))
                rep.ip[:] = list(ip_bytes(m.source.ip))
                rep.udp_port[:] = list(m.source.udp_port.to_bytes(2, "big"))
                out.append((m.source.port, rep))
            else:
                out.append((sid - dp.PORT_IDS, Replica(address=0)))
        return out

    def _install_group(self, job: XdpJob) -> None:
        """The job's replicas: the egress program's addresses, and a new devmap of one entry per replica on an
        interface, swapped in at once (frames in flight see the old group or the new one, whole)."""
        cfg, maps = job.cfg, self.program.maps
        group = create_map(self.program.group_template, f"hina_group_{cfg.job_id}")
        per_port: dict[int, int] = {}
        for n, (port, rep) in enumerate(self.replicas(cfg)):
            index = per_port.get(port, 0)
            per_port[port] = index + 1
            maps["replicas"].update(_bytes(ReplicaKey(job_id=cfg.job_id, port=port, index=index)), _bytes(rep))
            if port in self.interfaces:
                group.update(_bytes(_u32(n)), _devmap_value(self.interfaces[port], self.program.egress))
        for key in maps["replicas"].keys():  # replicas the job no longer has (a member left or moved)
            k = ReplicaKey.from_buffer_copy(key)
            if k.job_id == cfg.job_id and k.index >= per_port.get(k.port, 0):
                maps["replicas"].delete(key)
        maps["groups"].update(_bytes(_u32(cfg.job_id)), _bytes(_u32(group.fd)))
        if job.group is not None:
            job.group.close()
        job.group = group

    def update(self, data, source, length=None):
        raise TypeError("the XDP switch runs its rules in the kernel on raw frames: no update() from Python "
                        "(the tests run frames through hina.emulator.xdp.testrun)")


def _devmap_value(ifindex: int, prog_fd: int) -> bytes:
    """struct bpf_devmap_val: the interface, and the egress program every copy to it runs."""
    return _bytes(_u32(ifindex)) + _bytes(ctypes.c_int32(prog_fd))


class XdpDataPlane:
    """The XDP switch's whole state: the loaded program, its job pipeline, and a `Topology`'s ports (their
    rewrites, the MAC table, the flood group) and interfaces (`port -> ifindex`, empty in the tests)."""

    def __init__(self, interfaces: dict[int, int] | None = None, slots: int = DEFAULT_SPACE,
                 topology: Topology | None = None, program: Program | None = None):
        """program: one loaded already, which this data plane empties and leaves loaded when it closes (tests
        share one: the verifier takes a second or two to load it)."""
        self.owned = program is None
        self.program = Program(slots) if program is None else program
        self.interfaces = dict(interfaces or {})
        self.pipeline = XdpPipeline(self.program, self.interfaces)
        self.topology: Topology | None = None
        maps = self.program.maps
        try:
            if not self.owned:
                self.clear()
            for port, ifindex in self.interfaces.items():
                maps["ports"].update(_bytes(_u32(ifindex)), _bytes(_u32(port)))
                maps["egress"].update(_bytes(_u32(port)), _devmap_value(ifindex, self.program.egress))
            if topology is not None:
                self.configure(topology)
        except BaseException:
            self.close()
            raise

    def clear(self) -> None:
        """Every table empty, every counter zero, every slot empty: the program as freshly loaded."""
        maps = self.program.maps
        for name in ("jobs", "groups", "replicas", "macs", "rewrite", "flood", "egress", "ports"):
            for key in maps[name].keys():
                maps[name].delete(key)
        for row in range(layout.MAX_JOBS):
            self.program.zero_percpu("counters", row, JobCounters)
        self.program.zero_percpu("totals", 0, Totals)  # (its broadcast numbers start again: so do the cursors)
        for port in range(layout.MAX_PORTS):
            self.program.zero_percpu("cursors", port, Cursor)
        self.program.command(CommandOp.RESET, 0, self.program.slots)

    def configure(self, topology: Topology) -> None:
        """Install a whole topology: rewrites, MAC table, flood group, jobs (their slots start empty)."""
        maps = self.program.maps
        for name in ("rewrite", "macs", "flood"):
            for key in maps[name].keys():
                maps[name].delete(key)
        for h in topology.hosts:
            rw = Rewrite(host=1)
            rw.dst_mac[:], rw.src_mac[:] = list(mac_bytes(h.mac)), list(mac_bytes(topology.switch_mac))
            rw.src_ip[:], rw.dst_ip[:] = list(ip_bytes(topology.switch_ip)), list(ip_bytes(h.ip))
            maps["rewrite"].update(_bytes(_u32(h.port)), _bytes(rw))
        for mac, (kind, arg) in topology.mac_table().items():
            key = MacKey()
            key.mac[:] = list(mac_bytes(mac))
            maps["macs"].update(_bytes(key), _bytes(MacAction(flood=int(kind == "flood"), port=arg)))
        for port in self.flood_ports(topology):
            if port in self.interfaces:
                maps["flood"].update(_bytes(_u32(port)), _devmap_value(self.interfaces[port], self.program.egress))
        for job_id in list(self.pipeline.jobs):
            self.pipeline.remove_job(job_id)
        for job in topology.jobs:
            self.pipeline.add_job(dataclasses.replace(job, members=tuple(topology.resolve(m) for m in job.members)),
                                  origin="configure")
        self.topology = topology

    @staticmethod
    def flood_ports(topology: Topology) -> tuple[int, ...]:
        return topology.groups()[FLOOD_GROUP]

    def counters(self) -> dict:
        return self.pipeline.counters()

    def close(self) -> None:
        for job in self.pipeline.jobs.values():
            if job.group is not None:
                job.group.close()
        if self.owned:
            self.program.close()

