"""Listing and removing jobs on BMv2 over P4Runtime, against an in-process fake server (no BMv2 needed).

The fake keeps table entries as a P4Runtime server does: INSERT, DELETE by key,
wildcard Read of a table (with each entry's direct counter and time since its
last hit when asked), and answers GetForwardingPipelineConfig with its P4Info,
so that `Bmv2Target(push_pipeline=False)` works without the compiled program.
"""

from __future__ import annotations

import argparse
import io
import json
from concurrent import futures

import grpc
import pytest

from hina.control.client import ControlError
from hina.control.controller import Bmv2Target
from hina.control.p4rt import P4Info, P4RuntimeClient
from hina.control.p4rt_proto import add_servicer, p4info, p4runtime
from hina.control.switch_cli import run
from hina.control.topology import job_group

TABLES = {  # name: (id, [(match field, bitwidth)])
    "jobs": (33554433, [("hdr.hina.job_id", 16)]),
    "workers": (33554434, [("hdr.hina.job_id", 16), ("hdr.hina.worker_id", 8), ("standard_metadata.ingress_port", 9)]),
    "parents": (33554435, [("hdr.hina.job_id", 16), ("hdr.hina.slot", 16)]),
    "worker_addresses": (33554436, [("hdr.hina.job_id", 16), ("hdr.hina.worker_id", 8),
                                    ("standard_metadata.ingress_port", 9), ("hdr.ipv4.src_addr", 32),
                                    ("hdr.udp.src_port", 16)]),
    "replicas": (33554437, [("standard_metadata.egress_rid", 16)]),
}
ACTIONS = {  # name: (id, [(param, bitwidth)])
    "set_job": (16777217, [("workers", 8), ("full_mask", 32), ("children", 8), ("group", 16), ("slot_base", 16),
                           ("slot_count", 16), ("parents", 8)]),
    "allow": (16777218, [("worker_bit", 32)]),
    "set_parent": (16777219, [("port", 9), ("member", 8)]),
    "to_member": (16777220, [("host_mac", 48), ("host_ip", 32), ("host_port", 16)]),
}
JOB_COUNTER = 318767105


def hina_info(counted: bool = True) -> P4Info:
    """The tables of p4/job_config.p4, with (as proposed) a direct counter and idle timeouts on `jobs`."""
    info = p4info.P4Info()
    for name, (tid, fields) in TABLES.items():
        t = info.tables.add()
        t.preamble.id, t.preamble.name = tid, f"HinaIngress.{name}"
        for fid, (fname, width) in enumerate(fields, 1):
            f = t.match_fields.add()
            f.id, f.name, f.bitwidth, f.match_type = fid, fname, width, p4info.MatchField.EXACT
        if name == "jobs" and counted:
            t.direct_resource_ids.append(JOB_COUNTER)
            t.idle_timeout_behavior = p4info.Table.NOTIFY_CONTROL
    for name, (aid, params) in ACTIONS.items():
        a = info.actions.add()
        a.preamble.id, a.preamble.name = aid, f"HinaIngress.{name}"
        for pid, (pname, width) in enumerate(params, 1):
            p = a.params.add()
            p.id, p.name, p.bitwidth = pid, pname, width
    if counted:
        c = info.direct_counters.add()
        c.preamble.id, c.preamble.name = JOB_COUNTER, "HinaIngress.job_frames"
        c.direct_table_id = TABLES["jobs"][0]
    d = info.counters.add()
    d.preamble.id, d.preamble.name = 302055990, "HinaIngress.drops"
    return P4Info(info)


def key(entry) -> tuple:
    return entry.table_id, tuple((m.field_id, m.exact.value) for m in entry.match)


class FakeBmv2:
    """A P4Runtime server's table state: entries by key, multicast groups, a program."""

    def __init__(self, info: P4Info):
        self.info = info
        self.entries: dict[tuple, object] = {}
        self.groups: dict[int, object] = {}
        self.deletes: list = []
        self.hits = {}  # job_id: (packets, bytes, seconds since the last hit)

    def StreamChannel(self, request_iterator, context):
        for req in request_iterator:
            if req.HasField("arbitration"):
                reply = p4runtime.StreamMessageResponse()
                reply.arbitration.CopyFrom(req.arbitration)
                yield reply

    def GetForwardingPipelineConfig(self, request, context):
        reply = p4runtime.GetForwardingPipelineConfigResponse()
        reply.config.p4info.CopyFrom(self.info.message)
        return reply

    def Write(self, request, context):
        for u in request.updates:
            if u.entity.HasField("packet_replication_engine_entry"):
                mg = u.entity.packet_replication_engine_entry.multicast_group_entry
                if u.type == p4runtime.Update.DELETE:
                    if mg.multicast_group_id not in self.groups:
                        context.abort(grpc.StatusCode.NOT_FOUND, "no such group")
                    del self.groups[mg.multicast_group_id]
                else:
                    self.groups[mg.multicast_group_id] = mg
                continue
            e = u.entity.table_entry
            if u.type == p4runtime.Update.DELETE:
                if key(e) not in self.entries:
                    context.abort(grpc.StatusCode.NOT_FOUND, "no such entry")
                self.deletes.append(e)
                del self.entries[key(e)]
            else:
                self.entries[key(e)] = e
        return p4runtime.WriteResponse()

    def Read(self, request, context):
        reply = p4runtime.ReadResponse()
        if request.entities[0].HasField("packet_replication_engine_entry"):  # every group
            for mg in self.groups.values():
                reply.entities.add().packet_replication_engine_entry.multicast_group_entry.CopyFrom(mg)
            yield reply
            return
        want = request.entities[0].table_entry
        for e in self.entries.values():
            if e.table_id != want.table_id:
                continue
            out = reply.entities.add().table_entry
            out.CopyFrom(e)
            job_id = int.from_bytes(e.match[0].exact.value, "big")
            packets, nbytes, idle = self.hits.get(job_id, (0, 0, 0.0))
            if want.HasField("counter_data"):
                out.counter_data.packet_count, out.counter_data.byte_count = packets, nbytes
            if want.HasField("time_since_last_hit"):
                out.time_since_last_hit.elapsed_ns = int(idle * 1e9)
        yield reply


def group(group_id: int, replicas: list[tuple[int, int]]):
    entity = p4runtime.Entity()
    mg = entity.packet_replication_engine_entry.multicast_group_entry
    mg.multicast_group_id = group_id
    for port, rid in replicas:
        r = mg.replicas.add()
        r.egress_port, r.instance = port, rid
    return entity


@pytest.fixture(params=[True, False], ids=["counted", "plain"])
def bmv2(request, tmp_path):
    """A fake BMv2 holding two jobs (one in a tree), its address and the fake."""
    info = hina_info(counted=request.param)
    fake = FakeBmv2(info)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    add_servicer(fake, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    addr = f"127.0.0.1:{port}"
    client = P4RuntimeClient(addr, timeout=5)
    entries = [info.table_entry("jobs", {"hdr.hina.job_id": "1"}, "set_job", {
        "workers": "3", "full_mask": "7", "children": "3", "group": str(job_group(1)), "slot_base": "0",
        "slot_count": "64", "parents": "0"}),
        info.table_entry("jobs", {"hdr.hina.job_id": "2"}, "set_job", {
            "workers": "2", "full_mask": "3", "children": "2", "group": str(job_group(2)), "slot_base": "64",
            "slot_count": "2", "parents": "1"})]
    for w, port_ in ((0, 1), (1, 2), (2, 3)):
        entries.append(info.table_entry("workers", {"hdr.hina.job_id": "1", "hdr.hina.worker_id": str(w),
                                                    "standard_metadata.ingress_port": str(port_)},
                                        "allow", {"worker_bit": str(1 << w)}))
    # job 2's worker 0 at its own address behind port 4 (ranks sharing a host), with its replica's rewrite
    entries.append(info.table_entry("worker_addresses", {"hdr.hina.job_id": "2", "hdr.hina.worker_id": "0",
                                                         "standard_metadata.ingress_port": "4",
                                                         "hdr.ipv4.src_addr": "10.0.0.4", "hdr.udp.src_port": "4000"},
                                    "allow", {"worker_bit": "1"}))
    for rid in (7, 8):
        entries.append(info.table_entry("replicas", {"standard_metadata.egress_rid": str(rid)}, "to_member", {
            "host_mac": "02:00:00:00:00:04", "host_ip": "10.0.0.4", "host_port": str(4000 + rid)}))
    for slot in (64, 65):
        entries.append(info.table_entry("parents", {"hdr.hina.job_id": "2", "hdr.hina.slot": str(slot)},
                                        "set_parent", {"port": "9", "member": "1"}))
    client.write(entries + [group(job_group(1), [(1, 1), (2, 1), (3, 1), (4, 8)]), group(job_group(2), [(4, 7)])])
    client.close()
    fake.hits = {1: (1200, 1200 * 180, 0.25), 2: (0, 0, 900.0)}
    yield addr, fake, request.param
    server.stop(0)


def test_jobs_lists_members_slots_counters_and_last_hit_from_the_tables(bmv2):
    addr, fake, counted = bmv2
    target = Bmv2Target(addr, push_pipeline=False, p4info="/nonexistent/hina.p4info.txtpb", timeout=5)
    try:
        jobs = target.jobs()
    finally:
        target.close()
    assert [j["job_id"] for j in jobs] == [1, 2]
    one, two = jobs
    assert (one["workers"], one["words"], one["slot_base"], one["slots"]) == (3, 32, 0, 64)
    assert one["members"] == [{"worker_id": 0, "port": 1}, {"worker_id": 1, "port": 2}, {"worker_id": 2, "port": 3}]
    assert two["parents"] == [{"worker_id": 1, "port": 9}]
    assert two["members"] == [{"worker_id": 0, "port": 4, "ip": "10.0.0.4", "udp_port": 4000}]
    assert one["pinned"] and one["lease_left_s"] is None and one["origin"] == "controller"
    if counted:  # a direct counter and idle timeouts on `jobs`: frames and last hit per job
        assert one["counters"] == {"frames": 1200, "bytes": 216000} and one["state"] == "active"
        assert one["frame_s"] == 0.25 and two["state"] == "idle" and two["idle_s"] == 900.0
    else:  # the program as it is: no per-job clock or counter to read
        assert one["counters"] == {} and one["state"] == "unknown" and one["frame_s"] is None


def test_remove_job_deletes_its_entries_and_group_and_nothing_else(bmv2):
    addr, fake, _ = bmv2
    target = Bmv2Target(addr, push_pipeline=False, p4info="/nonexistent/hina.p4info.txtpb", timeout=5)
    try:
        target.remove_job(2, clear_slots=False)
        assert [j["job_id"] for j in target.jobs()] == [1]
        with pytest.raises(ControlError, match="no job 2 on the switch at 127.0.0.1"):
            target.remove_job(2, clear_slots=False)
    finally:
        target.close()
    assert len(fake.deletes) == 5  # its worker, its two parents' slots, its replica (7; 8 is job 1's too), its job
    assert sorted(fake.groups) == [job_group(1)]
    remaining = sorted((tid, len(m)) for tid, m in fake.entries)
    assert remaining == [(TABLES["jobs"][0], 1), (TABLES["workers"][0], 3), (TABLES["workers"][0], 3),
                         (TABLES["workers"][0], 3), (TABLES["replicas"][0], 1)]


def test_remove_job_says_when_the_slots_could_not_be_emptied(bmv2, monkeypatch):
    addr, fake, _ = bmv2
    monkeypatch.setenv("PATH", "/nonexistent")  # no simple_switch_CLI
    target = Bmv2Target(addr, push_pipeline=False, p4info="/nonexistent/hina.p4info.txtpb", timeout=5)
    try:
        with pytest.raises(ControlError, match=r"job 1 removed, but its slots \[0, 64\) were not emptied"):
            target.remove_job(1)
    finally:
        target.close()
    assert [int.from_bytes(m[0][1], "big") for tid, m in fake.entries if tid == TABLES["jobs"][0]] == [2]


def cli(*argv: str) -> tuple[int, str, str]:
    from hina.host.cli import build_parser

    args = build_parser().parse_args(["switch", *argv])
    out, err = io.StringIO(), io.StringIO()
    return run(args, out=out, err=err), out.getvalue(), err.getvalue()


def test_hina_switch_lists_and_removes_jobs_on_bmv2(bmv2, monkeypatch):
    addr, fake, counted = bmv2  # the switch says what it runs: a local p4/build is not read
    code, out, err = cli("jobs", "--bmv2", addr, "--json")
    assert code == 0, err
    listing = json.loads(out)
    assert listing["switch"] == addr and [j["job_id"] for j in listing["jobs"]] == [1, 2]
    code, out, err = cli("jobs", "--bmv2", addr)
    assert code == 0 and out.splitlines()[0].split()[:4] == ["JOB", "STATE", "MEMBERS", "SLOTS"]
    assert "job 1 members: 0=port 1, 1=port 2, 2=port 3" in out and "job 2 members: 0=port 4 10.0.0.4:4000" in out
    code, out, err = cli("status", "--bmv2", addr)
    assert code == 0 and out.startswith(f"BMv2 at {addr}: 2 jobs"), (out, err)
    monkeypatch.setenv("PATH", "/nonexistent")  # no simple_switch_CLI: the entries go, the slots stay; said so
    code, out, err = cli("remove", "2", "--bmv2", addr)
    assert code == 1 and err.startswith("hina switch: job 2 removed, but its slots [64, 66) were not emptied")
    code, out, err = cli("jobs", "--bmv2", addr, "--json")
    assert [j["job_id"] for j in json.loads(out)["jobs"]] == [1]


def test_bmv2_argument_parsing_needs_one_target():
    from hina.host.cli import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["switch", "jobs"])
    with pytest.raises(SystemExit):
        build_parser().parse_args(["switch", "jobs", "--bmv2", "a:1", "--control", "127.0.0.1:1"])
    args = build_parser().parse_args(["switch", "remove", "3", "--bmv2", "127.0.0.1:9559"])
    assert isinstance(args, argparse.Namespace) and args.job_id == 3 and args.switch_command == "remove"


def test_place_installs_a_job_on_free_slots_beside_the_others_and_remove_takes_it_away(bmv2, monkeypatch):
    """A job added at run time: the lowest free range (job 1 holds [0, 64), job 2 [64, 66)), its entries,
    replica ids past those in use, its group; emptied slots; then removed as any job is."""
    from hina.control.config import JobConfig, Member
    from hina.control.ledger import Placement
    from hina.control.topology import Host, Topology

    addr, fake, _ = bmv2
    cleared = []
    monkeypatch.setattr(Bmv2Target, "_clear_slots", lambda self, base, count: cleared.append((base, count)))
    hosts = Topology("02:00:00:00:00:fe", "10.0.0.254", tuple(Host(p, f"02:00:00:00:00:{p:02x}", f"10.0.0.{p}")
                                                            for p in (5, 6)))
    target = Bmv2Target(addr, push_pipeline=False, p4info="/nonexistent/hina.p4info.txtpb", timeout=5)
    try:
        job = JobConfig(5, 2, 32, 0, 16, (Member(0, 5), Member(1, 6)))
        placed = target.place(job, Placement(16), topology=hosts, policy="request")
        assert (placed.slot_base, placed.slots) == (66, 16) and cleared == [(66, 16)]
        listed = {j["job_id"]: j for j in target.jobs()}
        assert (listed[5]["slot_base"], listed[5]["slots"]) == (66, 16)
        assert listed[5]["members"] == [{"worker_id": 0, "port": 5}, {"worker_id": 1, "port": 6}]
        replicas = [(r.egress_port, r.instance) for r in fake.groups[job_group(5)].replicas]
        assert replicas == [(5, 9), (6, 10)]  # past replica ids 7 and 8, which jobs 1 and 2 use
        with pytest.raises(ControlError, match=r"job 6's slots \[60, 70\) overlap job 1's \[0, 64\)"):
            target.add_job(JobConfig(6, 1, 32, 60, 10, (Member(0, 5),)), hosts)
        with pytest.raises(ControlError, match="no free range of 4,096 slots"):
            target.place(JobConfig(7, 1, 32, 0, 4096, (Member(0, 5),)), Placement(4096), topology=hosts,
                         policy="request")
        target.remove_job(5, clear_slots=False)
        assert [j["job_id"] for j in target.jobs()] == [1, 2] and job_group(5) not in fake.groups
    finally:
        target.close()
