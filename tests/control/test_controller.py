"""The control plane: one topology, the entries every target gets, and its refusals."""

import json
from pathlib import Path

import pytest

from hina.control.config import JobConfig, Member
from hina.control.controller import connect, p4_entries
from hina.control.topology import FLOOD_GROUP, Host, Topology, job_group
from hina.wire.headers import UDP_PORT

VECTOR = Path(__file__).resolve().parents[1] / "vectors" / "two_jobs.json"


def topology():
    return Topology.from_config(json.loads(VECTOR.read_text())["topology"])


def test_topology_round_trips_through_json():
    t = topology()
    assert Topology.from_config(json.loads(json.dumps(t.to_config()))) == t


def test_p4_entries_cover_jobs_workers_macs_and_rewrites():
    entries, groups = p4_entries(topology())
    by_table = {}
    for e in entries:
        by_table.setdefault(e.table, []).append(e)
    assert [e.params for e in by_table["jobs"]] == [
        {"workers": "3", "full_mask": "7", "children": "3", "group": str(job_group(1)), "slot_base": "0",
         "slot_count": "4", "parents": "0"},
        {"workers": "2", "full_mask": "3", "children": "2", "group": str(job_group(2)), "slot_base": "4",
         "slot_count": "4", "parents": "0"}]
    assert "parents" not in by_table  # no tree: every switch is its jobs' root
    auth = {(e.match["hdr.hina.job_id"], e.match["hdr.hina.worker_id"], e.match["standard_metadata.ingress_port"]):
            e.params["worker_bit"] for e in by_table["workers"]}
    assert auth == {("1", "0", "1"): "1", ("1", "1", "2"): "2", ("1", "2", "3"): "4",
                    ("2", "0", "4"): "1", ("2", "1", "1"): "2"}
    macs = {e.match["hdr.ethernet.dst_addr"]: (e.action, e.params) for e in by_table["mac_forward"]}
    assert macs["ff:ff:ff:ff:ff:ff"] == ("flood", {"group": str(FLOOD_GROUP)})
    assert macs["02:00:00:00:00:03"] == ("forward", {"port": "3"})
    assert by_table["hosts"][1].params == {"switch_mac": "02:00:00:00:00:fe", "switch_ip": "10.0.0.254",
                                           "host_mac": "02:00:00:00:00:02", "host_ip": "10.0.0.2"}
    # a replica per member address, ids unique on the switch; the flood group's are never rewritten
    assert groups == {FLOOD_GROUP: ((1, 0), (2, 0), (3, 0), (4, 0)), job_group(1): ((1, 1), (2, 2), (3, 3)),
                      job_group(2): ((4, 4), (1, 5))}
    replicas = {e.match["standard_metadata.egress_rid"]: e.params for e in by_table["replicas"]}
    assert replicas["5"] == {"host_mac": "02:00:00:00:00:01", "host_ip": "10.0.0.1", "host_port": str(UDP_PORT)}
    assert set(replicas) == {"1", "2", "3", "4", "5"}


def test_ranks_sharing_a_port_are_authorized_by_address_and_get_a_replica_each():
    """Two workers on one host (port 1, UDP ports 40001 and 40011) and one known by its port alone: the
    first two are authorized only from their address and UDP port, each with its replica; the third from
    anything on its port, its replica to the port's host at UDP port 0x4E41."""
    hosts = (Host(1, "02:00:00:00:00:01", "10.0.0.1"), Host(2, "02:00:00:00:00:02", "10.0.0.2"))
    job = JobConfig(1, 3, 32, 0, 4, (Member(0, 1, ("10.0.0.1", 40001)), Member(1, 1, ("10.0.0.1", 40011)),
                                     Member(2, 2)))
    entries, groups = p4_entries(Topology("02:00:00:00:00:fe", "10.0.0.254", hosts, (job,)))
    by_addr = {(e.match["hdr.hina.worker_id"], e.match["hdr.ipv4.src_addr"], e.match["hdr.udp.src_port"])
               for e in entries if e.table == "worker_addresses"}
    assert by_addr == {("0", "10.0.0.1", "40001"), ("1", "10.0.0.1", "40011")}
    assert [e.match["hdr.hina.worker_id"] for e in entries if e.table == "workers"] == ["2"]
    assert groups[job_group(1)] == ((1, 1), (1, 2), (2, 3))
    replicas = {e.match["standard_metadata.egress_rid"]: e.params for e in entries if e.table == "replicas"}
    assert [replicas[r]["host_port"] for r in ("1", "2", "3")] == ["40001", "40011", str(UDP_PORT)]


def test_p4_entries_of_a_leaf_spread_its_slots_over_the_spines():
    """The tree vectors' leaf: children 0 and 1 of 4, spines on ports 5 (even slots) and 6 (odd)."""
    leaf = Topology.from_config(json.loads((VECTOR.parent / "tree_complete_forward_up.json").read_text())["topology"])
    entries, groups = p4_entries(leaf)
    job = next(e for e in entries if e.table == "jobs")
    assert (job.params["workers"], job.params["full_mask"], job.params["children"], job.params["parents"]) == \
        ("4", "3", "2", "2")
    parents = {e.match["hdr.hina.slot"]: e.params for e in entries if e.table == "parents"}
    assert parents == {"0": {"port": "5", "member": "0"}, "1": {"port": "6", "member": "0"},
                       "2": {"port": "5", "member": "0"}, "3": {"port": "6", "member": "0"}}
    assert [port for port, _ in groups[job_group(1)]] == [1, 2]  # RESULTs go down to the children only


def test_p4_target_refuses_jobs_it_cannot_hold():
    hosts = (Host(1, "02:00:00:00:00:01", "10.0.0.1"),)
    with pytest.raises(ValueError, match="compiled for K = 32"):
        p4_entries(Topology("02:00:00:00:00:fe", "10.0.0.254", hosts, (JobConfig(1, 1, 64, 0, 4, (Member(0, 1),)),)))
    with pytest.raises(ValueError, match="the P4 program has 4096"):
        p4_entries(Topology("02:00:00:00:00:fe", "10.0.0.254", hosts, (JobConfig(1, 1, 32, 4094, 4, (Member(0, 1),)),)))


@pytest.mark.parametrize("change,match", [
    (lambda c: c["hosts"].append(dict(c["hosts"][0])), "port appears twice"),
    (lambda c: c["jobs"][0]["members"].append({"worker_id": 2, "port": 9}) or c["jobs"][0]["members"].pop(2),
     "port 9, which no host"),
    (lambda c: c["jobs"][1].update(slot_base=2), "overlapping"),
    (lambda c: c["switch"].update(mac="nope"), "not a MAC"),
    (lambda c: c.update(extra=1), "unknown topology fields"),
])
def test_bad_topologies_are_refused(change, match):
    cfg = json.loads(VECTOR.read_text())["topology"]
    change(cfg)
    with pytest.raises(ValueError, match=match):
        Topology.from_config(cfg)


def test_connect_names_the_targets():
    with pytest.raises(ValueError, match="emulator or bmv2"):
        connect("tofino")
