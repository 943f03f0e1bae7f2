"""Topology files (docs/trees.md, "Topology files"): the format's fields and defaults, every fault refused
on load with one line naming the field and the fix, trees of any depth, and the examples shipped in
mininet/topologies/ (each loads and describes a valid tree)."""

import copy
import json
from pathlib import Path

import pytest

from hina.control import Member
from hina.control.fabric import Fabric, Link, TreeJob

EXAMPLES = Path(__file__).resolve().parents[2] / "mininet" / "topologies"

TWO_TIER = {"switches": [{"name": "l1"}, {"name": "l2"}, {"name": "s1"}],
            "hosts": [{"name": "h1", "switch": "l1"}, {"name": "h2", "switch": "l1"},
                      {"name": "h3", "switch": "l2"}, {"name": "h4", "switch": "l2"}],
            "links": [{"a": "l1", "b": "s1"}, {"a": "l2", "b": "s1"}]}

THREE_TIER = {"switches": [{"name": n} for n in ("l1", "l2", "l3", "l4", "a1", "a2", "c1")],
              "hosts": [{"name": f"h{i + 1}", "switch": f"l{i // 2 + 1}"} for i in range(8)],
              "links": [{"a": "l1", "b": "a1"}, {"a": "l2", "b": "a1"}, {"a": "l3", "b": "a2"}, {"a": "l4", "b": "a2"},
                        {"a": "a1", "b": "c1"}, {"a": "a2", "b": "c1"}]}


def load(cfg: dict) -> Fabric:
    return Fabric.from_config(json.loads(json.dumps(cfg)))


def changed(base: dict, change) -> dict:
    cfg = copy.deepcopy(base)
    change(cfg)
    return cfg


def every_host(fabric: Fabric, job_id: int = 1) -> TreeJob:
    return TreeJob(job_id, 32, 0, 8, tuple(h.name for h in fabric.hosts))


# -- the format ---------------------------------------------------------------------------------------
def test_ports_and_addresses_left_out_are_given_and_a_round_trip_keeps_everything():
    cfg = changed(TWO_TIER, lambda c: (c["hosts"][0].update(port=2), c["links"][1].update(a="s1", b="l2", rate=50),
                                       c["switches"][2].update(target="bmv2", mac="02:00:00:00:10:01"),
                                       c.update(oversubscription=4, description="two racks", roots=["s1"])))
    fab = load(cfg)
    ports = {h.name: (h.switch, h.port) for h in fab.hosts}
    assert ports == {"h1": ("l1", 2), "h2": ("l1", 1), "h3": ("l2", 1), "h4": ("l2", 2)}  # the lowest free one
    # links after the hosts, in file order; the one written upside down oriented: `a` is the lower end
    assert fab.links == (Link("l1", 3, "s1", 1), Link("l2", 3, "s1", 2, rate=50))
    # a switch naming 02:00:00:00:10:01 pushes the first switch to the next free address
    assert [(s.mac, s.ip, s.target) for s in fab.switches] == [
        ("02:00:00:00:10:02", "10.0.1.1", None), ("02:00:00:00:10:03", "10.0.1.2", None),
        ("02:00:00:00:10:01", "10.0.1.3", "bmv2")]
    assert [(h.mac, h.ip) for h in fab.hosts][3] == ("02:00:00:00:01:04", "10.0.0.4")
    assert (fab.roots, fab.oversubscription, fab.description) == (("s1",), 4, "two racks")
    again = load(fab.to_config())
    assert again == fab and again.to_config() == fab.to_config()
    assert fab.to_config()["switches"][0] == {"name": "l1", "mac": "02:00:00:00:10:02", "ip": "10.0.1.1"}


def test_host_names_may_be_left_out():
    fab = load({"switches": [{"name": "s1"}], "hosts": [{"switch": "s1"}, {"switch": "s1"}]})
    assert [h.name for h in fab.hosts] == ["h1", "h2"] and fab.top == ("s1",)


def test_a_three_tier_tree_is_rooted_at_its_core_unasked_and_each_switch_gets_its_share():
    fab = load(THREE_TIER)
    assert fab.top == ("c1",)
    assert fab.tiers() == {"l1": 1, "l2": 1, "l3": 1, "l4": 1, "a1": 2, "a2": 2, "c1": 3}
    assert [fab.hosts_under(s) for s in ("l3", "a2", "c1")] == [2, 4, 8]
    assert [(ln.a, ln.b) for ln in fab.uplinks("a1")] == [("a1", "c1")] and fab.uplinks("c1") == ()
    assert fab.is_tree
    assert fab.describe() == ("8 hosts under 3 tiers of switches, rooted at c1; tier 1: l1 (2 hosts), l2 (2 hosts), "
                              "l3 (2 hosts), l4 (2 hosts); tier 2: a1, a2; tier 3: c1")
    shares = fab.shares(every_host(fab))
    ids = {s.name: fab.member_id(s.name) for s in fab.switches}
    # a switch's member id is its place among its parent's switch children; a root has none
    assert ids == {"l1": 0, "l2": 1, "l3": 0, "l4": 1, "a1": 0, "a2": 1, "c1": None}
    l3, a2, c1 = shares["l3"], shares["a2"], shares["c1"]
    # a leaf: its workers' ranks, its hosts' ports; up to its aggregation switch on port 3
    assert (l3.workers, l3.mask, l3.members, l3.parents) == (8, 0b110000, (Member(4, 1), Member(5, 2)),
                                                             (Member(ids["l3"], 3),))
    # an aggregation switch: its leaves by member id, up to the core as member 1
    assert (a2.workers, a2.mask, a2.members, a2.parents) == (
        2, 1 << ids["l3"] | 1 << ids["l4"], (Member(ids["l3"], 1), Member(ids["l4"], 2)), (Member(ids["a2"], 3),))
    assert (c1.mask, c1.members, c1.parents) == (1 << ids["a1"] | 1 << ids["a2"],
                                                 (Member(ids["a1"], 1), Member(ids["a2"], 2)), ())
    topos = fab.topologies([every_host(fab)])
    assert topos["a2"].host_on(3).mac == fab.switch("c1").mac and topos["a2"].host_on(1).switch


def test_two_cores_spread_the_slots_each_aggregation_switch_up_to_both():
    cfg = changed(THREE_TIER, lambda c: (c["switches"].append({"name": "c2"}),
                                         c["links"].extend([{"a": "a1", "b": "c2"}, {"a": "a2", "b": "c2"}])))
    fab = load(cfg)
    assert fab.top == ("c1", "c2") and not fab.is_tree
    shares = fab.shares(every_host(fab))
    a1, l1 = shares["a1"], shares["l1"]
    assert [m.source for m in a1.parents] == [3, 4]  # c1 on port 3, c2 on port 4: slot s to core s mod 2
    assert a1.parent_of(5) == Member(fab.member_id("a1"), 4)
    assert l1.parents == (Member(fab.member_id("l1"), 3),) * 2  # both cores' slots go up through a1
    assert shares["c2"].parents == () and shares["c2"].mask == shares["c1"].mask


def test_a_job_on_some_hosts_only():
    fab = load(THREE_TIER)
    assert list(fab.shares(TreeJob(2, 32, 0, 8, ("h3", "h4")))) == ["l2"]  # one leaf: rooted there
    shares = fab.shares(TreeJob(2, 32, 0, 8, ("h1", "h8")))
    assert set(shares) == {"l1", "a1", "l4", "a2", "c1"} and shares["l1"].mask == 0b01
    with pytest.raises(ValueError, match=r"^job 3: switch l1 would have both workers and switches \(a1\) below it; "
                                         r"a switch with hosts is a leaf; give the job one root \(TreeJob roots\)$"):
        fab.shares(TreeJob(3, 32, 0, 8, ("h1", "h8"), roots=("l1",)))


def test_the_leafspine_flag_shape_is_unchanged():
    fab = Fabric.leaf_spine(8, rack=2, spines=2)
    assert fab.top == ("s1", "s2") and fab.tiers()["s2"] == 2 and not fab.is_tree
    assert Fabric.star(3).top == ("l1",) and Fabric.star(3).tiers() == {"l1": 1}
    assert Fabric.from_config(fab.to_config()) == fab


# -- the shapes made in code ----------------------------------------------------------------------------
def test_a_leaf_spine_with_a_short_last_rack_and_one_leaf_under_spines():
    fab = Fabric.leaf_spine(10, rack=4, spines=2, rate=100, uplink_rate=50, queue=16)
    assert [fab.hosts_under(f"l{i}") for i in (1, 2, 3)] == [4, 4, 2] and fab.top == ("s1", "s2")
    assert fab.parents("l3") == (("s1", 5, 3), ("s2", 6, 3))  # slot s to spine s mod 2, from ports 5 and 6
    assert fab.children("s2") == tuple(("switch", i, i + 1) for i in range(3))
    assert (fab.rate, fab.queue) == (100, 16) and set(fab.link_rates().values()) == {50}
    assert fab.oversubscription_at("l1") == 4 * 100 / (2 * 50) and fab.oversubscription_at("s1") is None
    one = Fabric.leaf_spine(3, rack=8, spines=2)  # one rack: rooted at its spines all the same
    assert one.top == ("s1", "s2") and one.tiers() == {"l1": 1, "s1": 2, "s2": 2}
    assert Fabric.from_config(json.loads(json.dumps(fab.to_config()))) == fab


def test_a_fat_tree_of_1024_hosts_roots_each_slot_class_at_one_core():
    fab = Fabric.fat_tree(1024, k=16, rate=100_000)
    tiers = fab.tiers()
    assert [sum(t == k for t in tiers.values()) for k in (1, 2, 3)] == [128, 128, 8]
    assert fab.top == tuple(f"c{j}" for j in range(1, 9))
    # an edge switch of pod 1 spreads its slots over that pod's 8 aggregation switches, one per core, in core
    # order; aggregation switch j of every pod sends all it gets to core j
    assert [p for p, _, _ in fab.parents("e9")] == [f"a{9 + j}" for j in range(8)]
    assert fab.parents("a11") == (("c3", 11, 2),)
    assert [len(fab.children(s)) for s in ("e9", "a11", "c3")] == [8, 8, 16]
    assert (fab.member_id("e12"), fab.member_id("a11"), fab.member_id("c3")) == (3, 1, None)
    assert set(fab.link_rates().values()) == {100_000} and fab.oversubscription_at("e1") == 1.0
    # a job of 32 of its hosts on the control plane: 4 edges, 8 aggregation switches, 8 cores
    shares = fab.shares(TreeJob(1, 32, 0, 8, tuple(f"h{i}" for i in range(1, 33))))
    assert sorted(shares) == sorted([*(f"e{i}" for i in range(1, 5)), *(f"a{i}" for i in range(1, 9)),
                                     *(f"c{i}" for i in range(1, 9))])
    # member ids are the job's own: in its tree a3 is the first (and only) child of c3
    assert shares["a3"].members == tuple(Member(i, i + 1) for i in range(4)) and shares["a3"].parents == (
        Member(0, 11),)
    assert shares["c3"].members == (Member(0, 1),) and shares["e2"].mask == 0xFF00
    assert Fabric.from_config(json.loads(json.dumps(fab.to_config()))) == fab
    with pytest.raises(ValueError, match=r"^k must be even, 4\.\.16"):
        Fabric.fat_tree(8, k=18)
    with pytest.raises(ValueError, match=r"^a k=4 fat tree has 16 hosts, got 20$"):
        Fabric.fat_tree(20, k=4)


def test_a_tree_of_every_depth_and_a_hypothetical_star():
    assert [max(Fabric.tree(1024, d).tiers().values()) for d in (1, 2, 3)] == [1, 2, 3]
    three = Fabric.tree(1024, 3, rate=100_000, uplink_rate=100_000)
    assert [three.hosts_under(s) for s in ("l1", "a1", "c1")] == [11, 121, 1024]
    assert [len(three.children(s)) for s in ("l1", "a1", "c1")] == [11, 11, 9] and three.is_tree
    assert Fabric.tree(1024, 2).top == ("s1",) and len(Fabric.tree(1024, 2).children("s1")) == 32
    star = Fabric.star(1024)  # more ports than a switch hina configures takes: a simulator's, described all the same
    assert star.tiers() == {"l1": 1} and star.hosts[1023].port == 1024
    assert (star.hosts[253].ip, star.hosts[254].ip, star.hosts[254].mac) == ("10.0.0.254", "10.1.0.1",
                                                                            "02:00:00:01:01:01")


def test_a_switch_sends_its_slots_up_to_every_root_or_to_one():
    # x1 lies on the way up to c1 and c2 but not to c3, which l1 reaches directly: slot s would go up to
    # parent s mod 2 there, not to the root of s mod 3
    cfg = {"switches": [{"name": n} for n in ("l1", "x1", "c1", "c2", "c3")], "hosts": [{"switch": "l1"}],
           "links": [{"a": "l1", "b": "x1"}, {"a": "x1", "b": "c1"}, {"a": "x1", "b": "c2"}, {"a": "l1", "b": "c3"}],
           "roots": ["c1", "c2", "c3"]}
    with pytest.raises(ValueError, match=r"^topology roots \(c1, c2, c3: as named\): switch x1 sends slots up to "
                                         r"roots c1, c2 but lies on no worker's way up to root c3; a switch sends its "
                                         r"slots up to every root or to one"):
        load(cfg)


def test_a_switch_has_one_member_id_under_every_parent():
    # y1 is the first of c1's switch children (x1 comes after it) and the second of c2's (after l1)
    cfg = {"switches": [{"name": n} for n in ("l1", "l2", "y1", "x1", "c1", "c2")],
           "hosts": [{"switch": "l1"}, {"switch": "l2"}],
           "links": [{"a": "l1", "b": "x1"}, {"a": "x1", "b": "c1"}, {"a": "l1", "b": "c2"}, {"a": "l2", "b": "y1"},
                     {"a": "y1", "b": "c1"}, {"a": "y1", "b": "c2"}], "roots": ["c1", "c2"]}
    with pytest.raises(ValueError, match=r"^topology roots \(c1, c2: as named\): switch y1 would be member 0 of "
                                         r"c1's job and member 1 of c2's; a switch has one member id in its parents' "
                                         r"jobs"):
        load(cfg)


# -- the shipped examples -----------------------------------------------------------------------------
def example(name: str) -> Fabric:
    return load(json.loads((EXAMPLES / f"{name}.json").read_text()))


def test_the_examples_shipped():
    assert sorted(p.stem for p in EXAMPLES.glob("*.json")) == ["leafspine-4to1", "star4", "three-tier",
                                                               "uneven-racks"]


@pytest.mark.parametrize("name,tiers,top,hosts", [
    ("star4", {"s1": 1}, ("s1",), {"s1": 4}),
    ("leafspine-4to1", {"l1": 1, "l2": 1, "s1": 2}, ("s1",), {"l1": 4, "l2": 4}),
    ("three-tier", {"l1": 1, "l2": 1, "l3": 1, "l4": 1, "a1": 2, "a2": 2, "c1": 3}, ("c1",),
     {"l1": 2, "l2": 2, "l3": 2, "l4": 2}),
    ("uneven-racks", {"l1": 1, "l2": 1, "l3": 1, "s1": 2}, ("s1",), {"l1": 4, "l2": 2, "l3": 1}),
])
def test_each_example_loads_and_describes_a_valid_tree(name, tiers, top, hosts):
    fab = example(name)
    assert fab.description and fab.is_tree
    assert (fab.tiers(), fab.top) == (tiers, top)
    assert {s: fab.hosts_under(s) for s, t in tiers.items() if t == 1} == hosts
    shares = fab.shares(every_host(fab))
    assert set(shares) == set(tiers)  # every switch sums a part of the job
    for sw, cfg in shares.items():  # one parent per switch below the root, none at the root
        assert len(cfg.parents) == (0 if sw in top else 1), (sw, cfg)
        assert cfg.children == len([h for h in fab.hosts if h.switch == sw] or
                                   [ln for ln in fab.links if ln.b == sw])
    assert load(fab.to_config()) == fab


def test_the_leafspine_example_is_the_flags_leafspine_at_4_to_1():
    fab, flag = example("leafspine-4to1"), Fabric.leaf_spine(8, rack=4, spines=1)
    assert fab.shares(every_host(fab)) == flag.shares(every_host(flag))
    assert (fab.switches, fab.hosts, fab.links, fab.oversubscription) == (flag.switches, flag.hosts, flag.links, 4)


def test_uneven_racks_one_partial_per_leaf_whatever_its_size():
    fab = example("uneven-racks")
    shares = fab.shares(every_host(fab))
    assert [shares[leaf].children for leaf in ("l1", "l2", "l3")] == [4, 2, 1]
    assert shares["s1"].children == 3
    assert [ln.oversubscription for ln in fab.links] == [2, None, None]


# -- every fault: one line, the field, the fix ---------------------------------------------------------
def nine_spines(c):
    c["switches"][2:] = [{"name": f"s{k}"} for k in range(1, 10)]
    c["links"] = [{"a": leaf, "b": f"s{k}"} for leaf in ("l1", "l2") for k in range(1, 10)]


UNEVEN_DEPTH = changed(THREE_TIER, lambda c: (c["switches"].pop(5), c["links"].__setitem__(2, {"a": "l3", "b": "c1"}),
                                             c["links"].__setitem__(3, {"a": "l4", "b": "c1"}), c["links"].pop(5)))

FAULTS = [
    # fields, one by one
    ("unknown host switch", TWO_TIER, lambda c: c["hosts"][3].update(switch="l9"),
     "topology hosts[3].switch: no switch named 'l9' (switches are l1, l2, s1)"),
    ("link to unknown switch", TWO_TIER, lambda c: c["links"][1].update(b="s9"),
     "topology links[1].b: no switch named 's9' (switches are l1, l2, s1)"),
    ("link to itself", TWO_TIER, lambda c: c["links"][1].update(a="s1"),
     "topology links[1]: joins s1 to itself; a link joins two switches"),
    ("negative rate", TWO_TIER, lambda c: c["links"][0].update(rate=-5),
     "topology links[0].rate: must be a positive number of Mbit/s, got -5 (or leave it out: the rate follows "
     "from --bw and the oversubscription)"),
    ("zero rate", TWO_TIER, lambda c: c["links"][0].update(rate=0), "topology links[0].rate: must be a positive"),
    ("rate not a number", TWO_TIER, lambda c: c["links"][0].update(rate="fast"),
     "topology links[0].rate: must be a positive number of Mbit/s, got 'fast'"),
    ("rate a boolean", TWO_TIER, lambda c: c["links"][0].update(rate=True),
     "topology links[0].rate: must be a positive number of Mbit/s, got True"),
    ("link oversubscription", TWO_TIER, lambda c: c["links"][1].update(oversubscription=0),
     "topology links[1].oversubscription: must be a positive ratio (4 for 4:1), got 0 (or leave it out)"),
    ("rate and oversubscription", TWO_TIER, lambda c: c["links"][1].update(oversubscription=2, rate=100),
     "topology links[1]: gives both rate and oversubscription; keep one (rate: the link's Mbit/s; "
     "oversubscription: derived from the hosts' rate)"),
    ("topology oversubscription", TWO_TIER, lambda c: c.update(oversubscription=-1),
     "topology oversubscription: must be a positive ratio (4 for 4:1), got -1 (or leave it out: --oversubscription)"),
    ("target", TWO_TIER, lambda c: c["switches"][2].update(target="tofino"),
     "topology switches[2].target: must be emulator, bmv2 or xdp, got 'tofino' (or leave it out: the run's "
     "--switch, --spine-switch above the leaves)"),
    ("mac", TWO_TIER, lambda c: c["switches"][0].update(mac="zz"),
     "topology switches[0].mac: must be a MAC address such as 02:00:00:00:10:01, got 'zz' (or leave it out: one "
     "is given by position)"),
    ("mac twice", TWO_TIER, lambda c: (c["switches"][0].update(mac="02:00:00:00:10:01"),
                                       c["hosts"][1].update(mac="02:00:00:00:10:01")),
     "topology hosts[1].mac: 02:00:00:00:10:01 is also switches[0]'s; give every switch and host its own (or "
     "leave it out)"),
    ("ip", TWO_TIER, lambda c: c["hosts"][0].update(ip="10.0.0.300"),
     "topology hosts[0].ip: must be an IPv4 address, got '10.0.0.300' (or leave it out: one is given by position)"),
    ("name twice", TWO_TIER, lambda c: c["hosts"][2].update(name="l1"),
     "topology hosts[2].name: 'l1' is taken by switches[0]; give every switch and host its own name"),
    ("name with a space", TWO_TIER, lambda c: c["switches"][2].update(name="spine 1"),
     "topology switches[2].name: must be a name without spaces, got 'spine 1'"),
    ("name not a string", TWO_TIER, lambda c: c["switches"][2].update(name=7),
     "topology switches[2].name: must be a name without spaces, got 7"),
    ("port out of range", TWO_TIER, lambda c: c["hosts"][0].update(port=0),
     "topology hosts[0].port: must be a port number from 1, got 0 (or leave it out: the switch's lowest free "
     "port)"),
    ("port not an integer", TWO_TIER, lambda c: c["links"][0].update(a_port="3"),
     "topology links[0].a_port: must be a port number from 1, got '3'"),
    ("hosts' rate", TWO_TIER, lambda c: c.update(rate="fast"),
     "topology rate: must be a positive number of Mbit/s (the hosts' links), got 'fast' (or leave it out: "
     "Mininet's --bw)"),
    ("queue", TWO_TIER, lambda c: c.update(queue=2.5),
     "topology queue: must be a whole number of packets from 1, got 2.5 (or leave it out: no limit)"),
    ("port twice", TWO_TIER, lambda c: (c["hosts"][0].update(port=1), c["links"][0].update(a_port=1)),
     "topology links[0].a_port: ports used twice: l1 port 1 is also hosts[0]'s; give it a free port (or leave it "
     "out)"),
    # the file's shape
    ("not an object", TWO_TIER, lambda c: c.clear() or c.update(switches=1, hosts=[]),
     'topology switches: must be a list of switch objects, got 1'),
    ("unknown field", TWO_TIER, lambda c: c.update(spines=["s1"]),
     "topology: unknown fabric fields: spines (a topology has switches, hosts, links, roots, oversubscription, "
     "rate, queue, description)"),
    ("unknown host field", TWO_TIER, lambda c: c["hosts"][1].update(rack=1),
     "topology hosts[1]: unknown field: rack (a host has switch, name, port, mac, ip)"),
    ("unknown link field", TWO_TIER, lambda c: c["links"][1].update(bw=1, delay=2),
     "topology links[1]: unknown fields: bw, delay (a link has a, b, a_port, b_port, rate, oversubscription)"),
    ("host without switch", TWO_TIER, lambda c: c["hosts"][1].pop("switch"),
     'topology hosts[1]: lacks "switch" (the name of the switch it hangs on)'),
    ("switch without name", TWO_TIER, lambda c: c["switches"][1].pop("name"),
     'topology switches[1]: lacks "name" (its name)'),
    ("link without end", TWO_TIER, lambda c: c["links"][1].pop("b"),
     'topology links[1]: lacks "b" (the name of the other)'),
    ("no hosts field", TWO_TIER, lambda c: c.pop("hosts"), 'topology: lacks "hosts" (a list of hosts)'),
    ("entry not an object", TWO_TIER, lambda c: c["hosts"].__setitem__(1, "h2"),
     'topology hosts[1]: a host is a JSON object with switch, name, port, mac, ip, got "h2"'),
    ("no switches", TWO_TIER, lambda c: c.update(switches=[], hosts=[], links=[]),
     "topology switches: none given; a topology needs at least one switch"),
    ("no hosts", TWO_TIER, lambda c: c.update(hosts=[]),
     "topology hosts: none given; a topology needs at least one host on a switch"),
    ("description", TWO_TIER, lambda c: c.update(description=["two", "racks"]),
     "topology description: must be a string, got ['two', 'racks']"),
    # roots
    ("unknown root", TWO_TIER, lambda c: c.update(roots=["c9"]),
     "topology roots[0]: no switch named 'c9' (switches are l1, l2, s1)"),
    ("root twice", TWO_TIER, lambda c: c.update(roots=["s1", "s1"]),
     "topology roots[1]: s1 is named twice; name each root once"),
    ("roots not a list", TWO_TIER, lambda c: c.update(roots="s1"),
     'topology roots: must be a list of switch names such as ["c1"], got "s1"'),
    ("nine roots", TWO_TIER, lambda c: (nine_spines(c), c.update(roots=[f"s{k}" for k in range(1, 10)])),
     "topology roots: at most 8 (a switch spreads its slots over at most 8 parents), got 9"),
    ("nine spines", TWO_TIER, nine_spines,
     "topology roots (s1, s2, s3, s4, s5, s6, s7, s8, s9: the top tier, as none are named): at most 8 (a switch "
     "spreads its slots over at most 8 parents), got 9; name at most 8 in roots"),
    ("missing root", TWO_TIER, lambda c: (c["switches"].pop(2), c.update(links=[])),
     "topology roots: none to be found: hosts hang on l1, l2 and no switch without hosts lies above them; add one "
     "to switches and link each of them to it (links)"),
    ("root at a leaf", THREE_TIER, lambda c: c.update(roots=["l1"]),
     'topology roots (l1: as named): switch l1 would have both workers and switches (a1) below it; a switch with '
     'hosts is a leaf; set "roots" to one switch: ["c1"] (or ["a1"], ["a2"])'),
    ("a root below another", THREE_TIER, lambda c: c.update(roots=["a1", "c1"]),
     'topology roots (a1, c1: as named): a2 reaches root a1 only through root c1; link a2 to a1, or set "roots" '
     'to one switch: ["c1"] (or ["a1"], ["a2"])'),
    ("uneven depth, two roots", UNEVEN_DEPTH, lambda c: None,
     'topology roots (a1, c1: the top tier, as none are named): l3 reaches root a1 only through root c1; link l3 '
     'to a1, or set "roots" to one switch: ["a1"] (or ["c1"])'),
    ("a spine missing a link", TWO_TIER, lambda c: (c["switches"].append({"name": "s2"}),
                                                    c["links"].append({"a": "l1", "b": "s2"})),
     'topology roots (s1, s2: the top tier, as none are named): l2 reaches root s2 only through root s1; link l2 '
     'to s2, or set "roots" to one switch: ["s1"]'),
    # the shape of the tree
    ("cycle", THREE_TIER, lambda c: c["links"].append({"a": "l1", "b": "a2"}),
     "topology links[6] (l1 port 4 - a2 port 4): closes a cycle: l1 and a2 reach the roots (c1) another way, so "
     "no partial crosses it; remove it"),
    ("cycle between aggregation switches", THREE_TIER, lambda c: c["links"].append({"a": "a1", "b": "a2"}),
     "topology links[6] (a1 port 4 - a2 port 4): closes a cycle: a1 and a2 reach the roots (c1) another way, so "
     "no partial crosses it; remove it"),
    ("two cables", TWO_TIER, lambda c: c["links"].append({"a": "l1", "b": "s1"}),
     "topology links[2] (l1 port 4 - s1 port 3): closes a cycle: l1 and s1 reach the roots (s1) another way, so no "
     "partial crosses it; remove it"),
    ("leaves linked", TWO_TIER, lambda c: c["links"].append({"a": "l1", "b": "l2"}),
     "topology links[2]: joins l1 and l2, which both hold hosts: a switch with hosts is a leaf, linked only to "
     "switches above it; remove the link"),
    ("leaves linked, no spine", TWO_TIER, lambda c: (c["switches"].pop(2), c.update(links=[{"a": "l1", "b": "l2"}])),
     "topology links[0]: joins l1 and l2, which both hold hosts: a switch with hosts is a leaf, linked only to "
     "switches above it; remove the link and add a switch above the leaves, linked to each"),
    ("switch unlinked", TWO_TIER, lambda c: c["switches"].append({"name": "x1"}),
     "topology switches[3] ('x1'): no host can reach it: no link joins it to the switches holding hosts; link it "
     "(links) or remove it"),
    ("switch on no way up", TWO_TIER, lambda c: (c["switches"].append({"name": "x1"}),
                                                 c["links"].append({"a": "s1", "b": "x1"}), c.update(roots=["s1"])),
     "topology switches[3] ('x1'): no host can reach it: it lies on no host's way up to the roots (s1); remove it, "
     "or link it between the hosts and a root"),
    ("rack cut off", TWO_TIER, lambda c: c["links"].pop(1),
     "topology switches[1] ('l2'): its hosts cannot reach those on l1: no links join them; link l2 to a switch "
     "above (links)"),
]


@pytest.mark.parametrize("base,change,message", [f[1:] for f in FAULTS], ids=[f[0] for f in FAULTS])
def test_a_fault_is_one_line_naming_the_field_and_the_fix(base, change, message):
    with pytest.raises(ValueError) as caught:
        load(changed(base, change))
    text = str(caught.value)
    assert "\n" not in text and text.startswith(message), text


def test_the_uneven_depth_tree_loads_once_its_root_is_named():
    fab = load(changed(UNEVEN_DEPTH, lambda c: c.update(roots=["c1"])))
    assert fab.top == ("c1",) and fab.tiers() == {"l1": 1, "l2": 1, "l3": 1, "l4": 1, "a1": 2, "c1": 3}
    assert fab.shares(every_host(fab))["c1"].children == 3  # a1 and the leaves l3, l4 hung on the core


def test_a_fabric_made_in_code_is_checked_too():
    fab = Fabric.leaf_spine(4, rack=2, spines=1)
    with pytest.raises(ValueError, match=r"^topology links\[2\]\.a_port: ports used twice: l1 port 3 is also "
                                         r"links\[0\]'s"):
        Fabric(fab.switches, fab.hosts, fab.links + fab.links[:1])
    with pytest.raises(ValueError, match=r"^topology roots\[0\]: no switch named 's9'"):
        Fabric(fab.switches, fab.hosts, fab.links, roots=("s9",))


def test_jobs_without_a_range_get_one_free_on_every_switch_of_their_tree():
    """A rack's job holds slots on its leaf only; a job over both racks gets a range free on both leaves and the
    spine; a fixed range is kept as given; a tree with no room is refused naming its switches."""
    fab = Fabric.leaf_spine(4, rack=2, spines=1)
    a = TreeJob(1, 32, None, 16, ("h1", "h2"))
    b = TreeJob(2, 32, None, 24, ("h3", "h4"))
    c = TreeJob(3, 32, None, 8, ("h1", "h2", "h3", "h4"))
    fixed = TreeJob(4, 32, 100, 4, ("h1", "h3"))
    placed = {j.job_id: j for j in fab.place([a, b, fixed, c], policy="request")}
    assert [(placed[j].slot_base, placed[j].slots) for j in (1, 2, 3, 4)] == [(0, 16), (0, 24), (24, 8), (100, 4)]
    topologies = fab.topologies([a, b, fixed, c])  # placed the same way when it is handed unplaced jobs
    ranges = {sw: sorted((j.job_id, j.slot_base, j.slots) for j in t.jobs) for sw, t in topologies.items()}
    assert ranges == {"l1": [(1, 0, 16), (3, 24, 8), (4, 100, 4)], "l2": [(2, 0, 24), (3, 24, 8), (4, 100, 4)],
                      "s1": [(3, 24, 8), (4, 100, 4)]}
    with pytest.raises(ValueError, match=r"job 5: no range of 4096 slots is free on every switch of its tree "
                                         r"\(l1, l2, s1, 4096 slots each\)"):
        fab.place([c, TreeJob(5, 32, None, 4096, ("h1", "h4"))], policy="request")
