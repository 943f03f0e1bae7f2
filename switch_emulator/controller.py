"""The control plane: configure a switch from one `Topology`, whichever switch it is.

    target = connect("bmv2", grpc_addr="127.0.0.1:9559")      # or connect("emulator", control=("127.0.0.1", port))
    target.configure(topology)
    target.counters()["drops"]        # {"duplicate": 3, ...}
    target.reset_job(1)               # empty a job's slot copies (after a worker failure)
    target.close()

For BMv2 (`simple_switch_grpc`) it speaks P4Runtime through p4runtime-shell:
SetForwardingPipelineConfig with the compiled JSON and P4Info, then the
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

from .control import ControlClient, ControlError
from .pipeline import Drop
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
            raise ValueError(f"job {job.job_id}: slots end at {job.slot_base + job.slots}, the P4 program has {P4_SLOTS}")
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
    """simple_switch_grpc running p4/hina.p4, through P4Runtime (p4runtime-shell)."""

    def __init__(self, grpc_addr: str = "127.0.0.1:9559", *, device_id: int = 0, thrift_port: int = 9090,
                 p4info: Path = P4_BUILD / "hina.p4info.txtpb", bmv2_json: Path = P4_BUILD / "hina.json",
                 push_pipeline: bool = True):
        import p4runtime_sh.shell as sh  # imported here: only BMv2 users need gRPC

        self._sh = sh
        self.thrift_port = thrift_port
        self.p4info = Path(p4info)
        if push_pipeline and not (self.p4info.exists() and Path(bmv2_json).exists()):
            raise ControlError(f"no compiled P4 program at {self.p4info.parent}: run `make p4` (needs p4c)")
        self._names = _p4info_names(self.p4info)
        config = sh.FwdPipeConfig(str(self.p4info), str(bmv2_json)) if push_pipeline else None
        sh.setup(device_id=device_id, grpc_addr=grpc_addr, election_id=(0, 1), config=config, verbose=False)
        self._topology: Topology | None = None

    def _name(self, kind: str, short: str) -> str:
        matches = [n for n in self._names[kind] if n == short or n.endswith("." + short)]
        if len(matches) != 1:
            raise ControlError(f"P4Info has {len(matches)} {kind} named *{short}: {matches}")
        return matches[0]

    def configure(self, topo: Topology) -> None:
        sh = self._sh
        entries, groups = p4_entries(topo)
        for e in entries:
            try:
                te = sh.TableEntry(self._name("tables", e.table))(action=self._name("actions", e.action))
                for field, value in e.match.items():
                    te.match[field] = value
                for param, value in e.params.items():
                    te.action[param] = value
                te.insert()
            except Exception as exc:
                raise ControlError(f"inserting {e.describe()} failed: {exc}") from exc
        for group, ports in groups.items():
            if not ports:  # a spine's flood group (broadcasts are never flooded between switches)
                continue
            try:
                mg = sh.MulticastGroupEntry(group)
                for port in ports:
                    mg.add(port, 1)
                mg.insert()
            except Exception as exc:
                raise ControlError(f"creating multicast group {group} with ports {ports} failed: {exc}") from exc
        self._topology = topo

    def counters(self) -> dict:
        """Drop counters by reason, read over P4Runtime (`HinaIngress.drops`)."""
        drops: dict[str, int] = {}
        entry = self._sh.CounterEntry(self._name("counters", "drops"))
        for c in entry.read():
            try:
                reason = Drop(c.index).name.lower()
            except ValueError:
                continue
            if c.packet_count:
                drops[reason] = c.packet_count
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
        self._sh.teardown()


def _p4info_names(path: Path) -> dict[str, list[str]]:
    """Fully qualified names in a P4Info text file, by kind (tables, actions, counters, registers)."""
    from google.protobuf import text_format
    from p4.config.v1 import p4info_pb2

    info = p4info_pb2.P4Info()
    if path.exists():
        text_format.Parse(path.read_text(), info)
    return {kind: [obj.preamble.name for obj in getattr(info, kind)]
            for kind in ("tables", "actions", "counters", "registers")}


def connect(target: str, **options: Any):
    """`connect("emulator", control=(host, port))` or `connect("bmv2", grpc_addr=..., ...)`."""
    if target == "emulator":
        return EmulatorTarget(options["control"])
    if target == "bmv2":
        return Bmv2Target(**options)
    raise ValueError(f"unknown target {target!r}: emulator or bmv2")


__all__ = ["Bmv2Target", "ControlError", "EmulatorTarget", "Entry", "connect", "p4_entries"]
