"""The control plane: configure a switch from one `Topology`, whichever switch it is.

    target = connect("bmv2", grpc_addr="127.0.0.1:9559")      # or connect("emulator", control=("127.0.0.1", port))
    target.configure(topology)
    target.counters()["drops"]        # {"duplicate": 3, ...}
    target.reset_job(1)               # empty a job's slot copies (after a worker failure)
    target.jobs()                     # every job on the switch: shape, members, counters (`hina switch jobs`)
    target.remove_job(1)              # its entries and multicast group gone, its slots emptied
    target.close()

For BMv2 (`simple_switch_grpc`) it speaks P4Runtime, a session per switch
(`p4rt`): SetForwardingPipelineConfig with the compiled JSON and P4Info, then the
table entries and multicast groups `p4_entries` derives from the topology.
P4Runtime cannot read or write BMv2 registers, so slot resets go through
`simple_switch_CLI` (thrift).  For the emulator the same topology goes to
its control port as JSON.  A refused update raises `ControlError` naming the
entry.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import subprocess
from pathlib import Path
from typing import Any

from hina.cliargs import plural
from hina.wire.headers import Drop

from .client import ControlClient, ControlError, SwitchFull
from .config import JobConfig
from .ledger import DEFAULT_POLICY, DEFAULT_SPACE, Held, Placement, choose, describe
from .topology import FLOOD_GROUP, Topology, job_group

P4_BUILD = Path(__file__).resolve().parent.parent / "p4" / "build"
P4_WORDS = 32  # K the P4 program is compiled for (p4/configuration.p4)
P4_SLOTS = DEFAULT_SPACE  # HINA_SLOTS in p4/configuration.p4: the slots a switch hands out by default


@dataclasses.dataclass(frozen=True)
class Entry:
    """One table entry, named by the table's and action's last name components."""

    table: str
    match: dict[str, str]
    action: str
    params: dict[str, str]

    def describe(self) -> str:
        return f"{self.table} {self.match} -> {self.action}({self.params})"


def p4_entries(topo: Topology) -> tuple[list[Entry], dict[int, tuple[tuple[int, int], ...]]]:
    """Every table entry and multicast group (its replicas as (port, replica id) pairs) the P4 program
    needs for `topo`."""
    entries = []
    for job in topo.jobs:
        if job.words != P4_WORDS:
            raise ValueError(f"job {job.job_id}: the P4 program is compiled for K = {P4_WORDS} words, not {job.words}")
        if job.slot_base + job.slots > P4_SLOTS:
            raise ValueError(f"job {job.job_id}: slots end at {job.slot_base + job.slots}, "
                             f"the P4 program has {P4_SLOTS}")
        entries.append(Entry("jobs", {"hdr.hina.job_id": str(job.job_id)}, "set_job", {
            "workers": str(job.workers), "full_mask": str(job.full_mask), "children": str(job.children),
            "group": str(job_group(job.job_id)), "slot_base": str(job.slot_base), "slot_count": str(job.slots),
            "parents": str(len(job.parents))}))
        for slot in range(job.slot_base, job.slot_base + job.slots) if job.parents else ():  # trees
            parent = job.parent_of(slot)
            entries.append(Entry("parents", {"hdr.hina.job_id": str(job.job_id), "hdr.hina.slot": str(slot)},
                                 "set_parent", {"port": str(parent.source), "member": str(parent.worker_id)}))
        for m in job.members:
            key = {"hdr.hina.job_id": str(job.job_id), "hdr.hina.worker_id": str(m.worker_id),
                   "standard_metadata.ingress_port": str(m.source)}
            if m.address is None:  # known by its port: anything there may speak for it
                entries.append(Entry("workers", key, "allow", {"worker_bit": str(1 << m.worker_id)}))
            else:  # its own address and UDP port behind the port
                key.update({"hdr.ipv4.src_addr": m.address[0], "hdr.udp.src_port": str(m.address[1])})
                entries.append(Entry("worker_addresses", key, "allow_address", {"worker_bit": str(1 << m.worker_id)}))
    for mac, (kind, arg) in topo.mac_table().items():
        params = {"port": str(arg)} if kind == "forward" else {"group": str(arg)}
        entries.append(Entry("mac_forward", {"hdr.ethernet.dst_addr": mac}, kind, params))
    for h in topo.hosts:
        entries.append(Entry("hosts", {"standard_metadata.egress_port": str(h.port)}, "rewrite", {
            "switch_mac": topo.switch_mac, "switch_ip": topo.switch_ip, "host_mac": h.mac, "host_ip": h.ip}))
    groups, rewrites = topo.replicas()
    for rid, (mac, ip, udp_port) in rewrites.items():
        entries.append(Entry("replicas", {"standard_metadata.egress_rid": str(rid)}, "to_member",
                             {"host_mac": mac, "host_ip": ip, "host_port": str(udp_port)}))
    # the flood group's replicas are never rewritten (not RESULTs): instance 0
    groups = {FLOOD_GROUP: tuple((port, 0) for port in topo.groups()[FLOOD_GROUP]), **groups}
    return entries, groups


class EmulatorTarget:
    """The emulator's raw-frame data plane, through its JSON control port."""

    def __init__(self, control: tuple[str, int]):
        self.client = ControlClient(control)

    def configure(self, topo: Topology) -> None:
        self.client.request("configure", topology=topo.to_config())

    def counters(self) -> dict:
        return self.client.counters()

    def reset_job(self, job_id: int) -> None:
        self.client.reset_job(job_id)

    def close(self) -> None:
        self.client.close()


class Bmv2Target:
    """simple_switch_grpc running p4/hina.p4, through its own P4Runtime session (`p4rt`)."""

    def __init__(self, grpc_addr: str = "127.0.0.1:9559", *, device_id: int = 0, thrift_port: int = 9090,
                 p4info: Path | None = P4_BUILD / "hina.p4info.txtpb", bmv2_json: Path = P4_BUILD / "hina.json",
                 push_pipeline: bool = True, timeout: float = 10.0):
        """timeout: how long to wait for the switch's P4Runtime server (a ControlError after it).
        p4info None (without push_pipeline): the P4Info the switch runs, asked of it (`hina switch --bmv2`)."""
        from .p4rt import P4Info, P4RuntimeClient  # imported here: only BMv2 users need gRPC

        self.thrift_port = thrift_port
        self.p4info = Path(p4info) if p4info is not None else None
        if push_pipeline and (self.p4info is None or not self.p4info.exists() or not Path(bmv2_json).exists()):
            raise ControlError(f"no compiled P4 program at {P4_BUILD if self.p4info is None else self.p4info.parent}: "
                               f"run `make p4` (needs p4c)")
        self._client = P4RuntimeClient(grpc_addr, device_id=device_id, timeout=timeout)
        if self.p4info is not None and self.p4info.exists():
            self._info = P4Info.load(self.p4info)
        else:  # listing or removing jobs on a running switch needs no local build: ask it what it runs
            from .p4rt_tables import fetch_p4info

            try:
                self._info = fetch_p4info(self._client)
            except ControlError:
                self._client.close()
                raise
        if push_pipeline:
            try:
                self._client.set_pipeline(self._info, Path(bmv2_json))
            except ControlError:
                self._client.close()
                raise
        self._topology: Topology | None = None

    def _name(self, kind: str, short: str) -> str:
        return self._info.find(kind, short).preamble.name

    def configure(self, topo: Topology) -> None:
        entries, groups = p4_entries(topo)
        for e in entries:
            self._client.write([self._info.table_entry(e.table, e.match, e.action, e.params)],
                               what=f"inserting {e.describe()}")
        for group, replicas in groups.items():
            if not replicas:  # a spine's flood group (broadcasts are never flooded between switches)
                continue
            self._client.write([self._info.multicast_group(group, replicas)],
                               what=f"creating multicast group {group} with replicas {list(replicas)}")
        self._topology = topo

    def counters(self) -> dict:
        """Drop counters by reason, read over P4Runtime (`HinaIngress.drops`)."""
        drops: dict[str, int] = {}
        for index, packets in self._client.read_counter(self._info, "drops").items():
            try:
                reason = Drop(index).name.lower()
            except ValueError:
                continue
            if packets:
                drops[reason] = packets
        return {"drops": drops}

    def cli(self, commands: list[str]) -> str:
        """Run simple_switch_CLI commands (registers are not readable over P4Runtime)."""
        proc = subprocess.run(["simple_switch_CLI", "--thrift-port", str(self.thrift_port)],
                              input="\n".join(commands) + "\n", capture_output=True, text=True, timeout=60)
        if proc.returncode != 0:
            raise ControlError(f"simple_switch_CLI failed: {proc.stderr.strip()}")
        return proc.stdout

    def read_register(self, name: str, index: int) -> int:
        out = self.cli([f"register_read {self._register(name)} {index}"])
        for line in out.splitlines():
            if "=" in line and self._register(name).split(".")[-1] in line:
                return int(line.rsplit("=", 1)[1].strip())
        raise ControlError(f"could not read register {name}[{index}]: {out.strip()}")

    def reset_job(self, job_id: int) -> None:
        """Empty every copy of a job's slots: bitmap, arrival counter and total flag to zero."""
        job = next((j for j in self._topology.jobs if j.job_id == job_id), None) if self._topology else None
        if job is not None:
            base, count = job.slot_base, job.slots
        else:  # a job this session did not configure: its slots from the switch's jobs table
            entry = self._job_entry(job_id)
            base, count = entry["params"]["slot_base"], entry["params"]["slot_count"]
        self._clear_slots(base, count)

    def _clear_slots(self, base: int, count: int) -> None:
        copies = range(2 * base, 2 * (base + count))
        self.cli([f"register_write {self._register(r)} {i} 0" for r in ("bitmap", "arrivals", "totals")
                  for i in copies])

    # -- jobs at run time: one more beside those configured, placed where the slots are free -------
    def add_job(self, job: JobConfig, topology: Topology | None = None) -> None:
        """Install one job beside the configured ones, while the switch runs: its `jobs`, `workers`,
        `worker_addresses` and `parents` entries, its replicas' rewrites and its multicast group (the hosts
        and the MAC table are `configure`'s, in this session or another: then give its `topology`, whose
        hosts say where each member's RESULTs go).  Its slots are emptied first; they must not overlap
        another job's."""
        from .p4rt_tables import read_groups

        hosts = self._topology or topology
        if hosts is None:
            raise ControlError("add_job needs the switch's hosts: configure it first, or give its topology")
        for other in self.jobs():
            start, end = other["slot_base"], other["slot_base"] + other["slots"]
            if other["job_id"] == job.job_id:
                raise ControlError(f"job {job.job_id} is on the switch already: remove it first")
            if job.slot_base < end and start < job.slot_base + job.slots:
                raise ControlError(f"job {job.job_id}'s slots [{job.slot_base}, {job.slot_base + job.slots}) overlap "
                                   f"job {other['job_id']}'s [{start}, {end})")
        alone = dataclasses.replace(hosts, jobs=(job,))  # checks its members' ports against the hosts
        entries, groups = p4_entries(alone)
        taken = max((rid for replicas in read_groups(self._client).values() for _, rid in replicas), default=0)
        own = ("jobs", "parents", "workers", "worker_addresses", "replicas")
        self._clear_slots(job.slot_base, job.slots)
        for e in entries:
            if e.table not in own:
                continue
            if e.table == "replicas":  # replica ids are the switch's: past every id in use
                rid = int(e.match["standard_metadata.egress_rid"]) + taken
                e = dataclasses.replace(e, match={"standard_metadata.egress_rid": str(rid)})
            self._client.write([self._info.table_entry(e.table, e.match, e.action, e.params)],
                               what=f"inserting {e.describe()}")
        group = job_group(job.job_id)
        if groups.get(group):
            replicas = tuple((port, rid + taken) for port, rid in groups[group])
            self._client.write([self._info.multicast_group(group, replicas)],
                               what=f"creating multicast group {group} with replicas {list(replicas)}")
        self._topology = dataclasses.replace(hosts, jobs=(*(self._topology.jobs if self._topology else ()), job))

    def place(self, job: JobConfig, want: Placement, *, topology: Topology | None = None, space: int = P4_SLOTS,
              policy: str = DEFAULT_POLICY) -> JobConfig:
        """Install `job` on a slot range the switch has free (`hina.control.ledger.choose`: `want` slots, capped
        by `policy`, or with when_full "fewer" at least `want.least`); its own slot_base and slots are ignored.
        The job as installed; `SwitchFull` when no range holds it."""
        held = [Held(j["job_id"], j["slot_base"], j["slots"], j["workers"]) for j in self.jobs()]
        got = choose(want, job.workers, held, space, policy)
        if got is None:
            raise SwitchFull(f"job {job.job_id}: no free range of {plural(want.minimum, 'slot')} among the switch's "
                             f"{space:,}; held: {describe(held)}")
        placed = dataclasses.replace(job, slot_base=got[0], slots=got[1])
        self.add_job(placed, topology)
        return placed

    # -- jobs on the switch: listing and removal ---------------------------------------------------
    def _job_entry(self, job_id: int) -> dict:
        from .p4rt_tables import read_table

        for entry in read_table(self._client, self._info, "jobs"):
            if entry["match"].get("hdr.hina.job_id") == job_id:
                return entry
        raise ControlError(f"no job {job_id} on the switch at {self._client.addr}")

    def jobs(self) -> list[dict]:
        """Every job in the switch's `jobs` table, as the emulator lists them (`hina switch jobs`): shape,
        members (worker_id, ingress port and any other key of the `workers` table), parents, and where
        the program has them, the entry's packets (a direct counter on `jobs`) and seconds since a
        frame last matched it (idle timeouts on `jobs`).  Drops are per switch: `counters()`."""
        from .p4rt_tables import read_table

        members: dict[int, list[dict]] = {}
        for table in ("workers", "worker_addresses"):  # by port alone; at an address and UDP port behind it
            for e in read_table(self._client, self._info, table) if self._has(table) else ():
                key = dict(e["match"])
                job_id = key.pop("hdr.hina.job_id", None)
                member: dict[str, Any] = {"worker_id": key.pop("hdr.hina.worker_id", None)}
                if "standard_metadata.ingress_port" in key:
                    member["port"] = key.pop("standard_metadata.ingress_port")
                if "hdr.ipv4.src_addr" in key:
                    member["ip"] = str(ipaddress.IPv4Address(key.pop("hdr.ipv4.src_addr")))
                if "hdr.udp.src_port" in key:
                    member["udp_port"] = key.pop("hdr.udp.src_port")
                member.update({name.rsplit(".", 1)[-1]: value for name, value in key.items()})
                members.setdefault(job_id, []).append(member)
        parents: dict[int, set[tuple[int, int]]] = {}
        if self._has("parents"):
            for e in read_table(self._client, self._info, "parents"):
                parents.setdefault(e["match"].get("hdr.hina.job_id"), set()).add(
                    (e["params"].get("member", 0), e["params"].get("port", 0)))
        out = []
        entries = read_table(self._client, self._info, "jobs")
        for e in sorted(entries, key=lambda e: e["match"].get("hdr.hina.job_id", 0)):
            job_id, params = e["match"].get("hdr.hina.job_id"), e["params"]
            workers = params.get("workers", 0)
            job: dict[str, Any] = {
                "job_id": job_id, "workers": workers, "words": P4_WORDS, "slot_base": params.get("slot_base"),
                "slots": params.get("slot_count"),
                "members": sorted(members.get(job_id, []), key=lambda m: (m["worker_id"] is None, m["worker_id"])),
            }
            if params.get("full_mask") not in (None, (1 << workers) - 1):
                job["mask"] = params["full_mask"]
            if parents.get(job_id):
                job["parents"] = [{"worker_id": m, "port": p} for m, p in sorted(parents[job_id])]
            counters: dict[str, Any] = {}
            if "packets" in e:
                counters.update(frames=e["packets"], bytes=e["bytes"])
            job["counters"] = counters
            idle = None if e.get("idle_s") is None else round(e["idle_s"], 3)  # the program's idle timeouts, if any
            job.update(state="unknown" if idle is None else "active" if idle < 5.0 else "idle", idle_s=idle,
                       frame_s=idle, refused_s=None, origin="controller", pinned=True, lease_left_s=None)
            out.append(job)
        return out

    def _has(self, table: str) -> bool:
        return any(t.preamble.name == table or t.preamble.name.endswith("." + table)
                   for t in self._info.message.tables)

    def remove_job(self, job_id: int, *, clear_slots: bool = True) -> None:
        """Delete a job's entries (`jobs`, its `workers`, `worker_addresses` and `parents`, the `replicas`
        rewrites only its multicast group uses) and that group; with `clear_slots`, empty its slots too
        (simple_switch_CLI, as `reset_job`), so that the next job on them starts clean."""
        from .p4rt_tables import delete, multicast_group, read_groups, read_table

        entry = self._job_entry(job_id)
        doomed = []
        for table in ("workers", "worker_addresses", "parents"):
            if self._has(table):
                doomed += [e["entity"] for e in read_table(self._client, self._info, table)
                           if e["match"].get("hdr.hina.job_id") == job_id]
        if self._has("replicas"):  # per member rewrites, named by the replica ids of the job's group
            try:
                groups = read_groups(self._client)
            except ControlError:
                groups = {}
            others = {rid for g, replicas in groups.items() if g != job_group(job_id) for _, rid in replicas}
            rids = {rid for _, rid in groups.get(job_group(job_id), ())} - others - {0}
            doomed += [e["entity"] for e in read_table(self._client, self._info, "replicas")
                       if e["match"].get("standard_metadata.egress_rid") in rids]
        delete(self._client, doomed, what=f"removing job {job_id}'s workers, parents and replicas")
        delete(self._client, [entry["entity"]], what=f"removing job {job_id} from the jobs table")
        try:
            delete(self._client, [multicast_group(job_group(job_id))],
                   what=f"removing job {job_id}'s multicast group {job_group(job_id)}")
        except ControlError:
            pass  # a job configured without members has no group
        if self._topology is not None:
            self._topology = dataclasses.replace(self._topology,
                                                 jobs=tuple(j for j in self._topology.jobs if j.job_id != job_id))
        if clear_slots:
            base, count = entry["params"]["slot_base"], entry["params"]["slot_count"]
            try:
                self._clear_slots(base, count)
            except (ControlError, OSError, subprocess.SubprocessError) as exc:
                raise ControlError(f"job {job_id} removed, but its slots [{base}, {base + count}) were not "
                                   f"emptied ({exc}); the next job there may be refused until reset_job") from None

    def _register(self, short: str) -> str:
        return self._name("registers", short)

    def close(self) -> None:
        self._client.close()


def connect(target: str, **options: Any):
    """`connect("emulator", control=(host, port))` or `connect("bmv2", grpc_addr=..., ...)`."""
    if target == "emulator":
        return EmulatorTarget(options["control"])
    if target == "bmv2":
        return Bmv2Target(**options)
    raise ValueError(f"unknown target {target!r}: emulator or bmv2")


__all__ = ["Bmv2Target", "ControlError", "EmulatorTarget", "Entry", "connect", "p4_entries"]
