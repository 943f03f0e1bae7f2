"""The control plane: configure a switch from one `Topology`, whichever switch it is.

    target = connect("bmv2", grpc_addr="127.0.0.1:9559")      # or connect("emulator", control=("127.0.0.1", port))
    target.configure(topology)
    target.counters()["drops"]        # {"duplicate": 3, ...}
    target.reset_job(1)               # empty a job's slot copies (after a worker failure)
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
import subprocess
from pathlib import Path
from typing import Any

from hina.wire.headers import Drop

from .client import ControlClient, ControlError
from .topology import Topology, job_group

P4_BUILD = Path(__file__).resolve().parent.parent / "p4" / "build"
P4_WORDS = 32  # K the P4 program is compiled for (p4/configuration.p4)
P4_SLOTS = 4096  # HINA_SLOTS in p4/configuration.p4


@dataclasses.dataclass(frozen=True)
class Entry:
    """One table entry, named by the table's and action's last name components."""

    table: str
    match: dict[str, str]
    action: str
    params: dict[str, str]

    def describe(self) -> str:
        return f"{self.table} {self.match} -> {self.action}({self.params})"


def p4_entries(topo: Topology) -> tuple[list[Entry], dict[int, tuple[int, ...]]]:
    """Every table entry and multicast group the P4 program needs for `topo`."""
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
            entries.append(Entry("workers", {"hdr.hina.job_id": str(job.job_id), "hdr.hina.worker_id": str(m.worker_id),
                                             "standard_metadata.ingress_port": str(m.source)},
                                 "allow", {"worker_bit": str(1 << m.worker_id)}))
    for mac, (kind, arg) in topo.mac_table().items():
        params = {"port": str(arg)} if kind == "forward" else {"group": str(arg)}
        entries.append(Entry("mac_forward", {"hdr.ethernet.dst_addr": mac}, kind, params))
    for h in topo.hosts:
        entries.append(Entry("hosts", {"standard_metadata.egress_port": str(h.port)}, "rewrite", {
            "switch_mac": topo.switch_mac, "switch_ip": topo.switch_ip, "host_mac": h.mac, "host_ip": h.ip}))
    return entries, topo.groups()


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
                 p4info: Path = P4_BUILD / "hina.p4info.txtpb", bmv2_json: Path = P4_BUILD / "hina.json",
                 push_pipeline: bool = True, timeout: float = 10.0):
        """timeout: how long to wait for the switch's P4Runtime server (a ControlError after it)."""
        from .p4rt import P4Info, P4RuntimeClient  # imported here: only BMv2 users need gRPC

        self.thrift_port = thrift_port
        self.p4info = Path(p4info)
        if not self.p4info.exists() or (push_pipeline and not Path(bmv2_json).exists()):
            raise ControlError(f"no compiled P4 program at {self.p4info.parent}: run `make p4` (needs p4c)")
        self._info = P4Info.load(self.p4info)
        self._client = P4RuntimeClient(grpc_addr, device_id=device_id, timeout=timeout)
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
        for group, ports in groups.items():
            if not ports:  # a spine's flood group (broadcasts are never flooded between switches)
                continue
            self._client.write([self._info.multicast_group(group, ports)],
                               what=f"creating multicast group {group} with ports {list(ports)}")
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
        if self._topology is None:
            raise ControlError("configure the switch first")
        job = next((j for j in self._topology.jobs if j.job_id == job_id), None)
        if job is None:
            raise ControlError(f"no job {job_id} in the configured topology")
        copies = range(2 * job.slot_base, 2 * (job.slot_base + job.slots))
        self.cli([f"register_write {self._register(r)} {i} 0" for r in ("bitmap", "arrivals", "totals")
                  for i in copies])

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
