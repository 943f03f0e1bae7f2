"""Topology files on the command line: `--topology NAME` finds a shipped example, `--topology FILE` reads a
file, a bad one is one line and exit status 2 from mininet/run.py and compare.py before anything runs, the
link rates a file gives, and compare.py's baselines' fabric of plain bridges for a three-tier file.  Needs
Debian's Mininet importable (not root): nothing here starts a network."""

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

topo = pytest.importorskip("hina.mininet.topo", reason="needs Debian's Mininet (importable; root is not needed)")

ROOT = Path(__file__).resolve().parents[2]
BAD = {"switches": [{"name": "l1"}, {"name": "l2"}, {"name": "s1"}],
       "hosts": [{"switch": "l1"}, {"switch": "l1"}, {"switch": "l2"}, {"switch": "l9"}],
       "links": [{"a": "l1", "b": "s1"}, {"a": "l2", "b": "s1"}]}
BAD_LINE = "topology hosts[3].switch: no switch named 'l9' (switches are l1, l2, s1)"


def test_a_shipped_example_by_name_or_by_path():
    assert topo.examples() == ["leafspine-4to1", "star4", "three-tier", "uneven-racks"]
    by_name = topo.parse_topology("three-tier")
    assert by_name == topo.parse_topology(str(ROOT / "mininet" / "topologies" / "three-tier.json"))
    assert by_name.top == ("c1",) and len(by_name.hosts) == 8
    # the hosts take hina_net's addresses by rank, which the workers are told
    assert [(h.mac, h.ip) for h in by_name.hosts][7] == ("02:00:00:00:01:08", "10.0.0.8")
    assert topo.parse_topology("star") is None
    assert topo.parse_topology("leafspine:2,1,4").describe() == topo.parse_topology("leafspine-4to1").describe()


def test_a_name_that_is_neither_lists_the_examples():
    with pytest.raises(ValueError, match=r"^--topology must be star, leafspine:LEAVES,SPINES,HOSTS_PER_LEAF, a "
                                         r"FILE\.json or the name of a shipped example \(leafspine-4to1, star4, "
                                         r"three-tier, uneven-racks\), got 'four-tier'$"):
        topo.parse_topology("four-tier")


def test_a_bad_file_is_one_line(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(BAD))
    with pytest.raises(ValueError) as caught:
        topo.parse_topology(str(path))
    assert str(caught.value) == f"--topology {path}: {BAD_LINE}"
    path.write_text("{\"switches\": [")
    with pytest.raises(ValueError, match=r"^--topology .*bad\.json: not JSON \(Expecting value: line 1"):
        topo.parse_topology(str(path))
    with pytest.raises(ValueError, match=r"^--topology .*none\.json: No such file or directory$"):
        topo.parse_topology(str(tmp_path / "none.json"))


def test_switch_names_mininet_cannot_take(tmp_path):
    path = tmp_path / "long.json"
    path.write_text(json.dumps({"switches": [{"name": "aggregation1"}], "hosts": [{"switch": "aggregation1"}]}))
    with pytest.raises(ValueError) as caught:
        topo.parse_topology(str(path))
    assert str(caught.value) == (f"--topology {path}: topology switches[0].name: 'aggregation1' will not do in "
                                 f"Mininet: lower-case letters and digits, at most 4 characters (its interfaces are "
                                 f"<run id>hsw<name>-eth<port>, at most 15 characters)")
    path.write_text(json.dumps({"switches": [{"name": "S1"}], "hosts": [{"switch": "S1"}]}))
    with pytest.raises(ValueError, match=r"'S1' will not do in Mininet: lower-case letters and digits"):
        topo.parse_topology(str(path))
    path.write_text(json.dumps({"switches": [{"name": "s1"}], "hosts": [{"switch": "s1"}] * 33}))
    with pytest.raises(ValueError, match=r": 1\.\.32 hosts in Mininet \(the workers' addresses\), got 33$"):
        topo.parse_topology(str(path))


def test_link_rates_at_every_tier_and_as_the_file_gives_them(tmp_path):
    three = topo.parse_topology("three-tier")
    # a leaf's uplink carries its 2 hosts' rate over R, an aggregation switch's its 4 hosts' over R
    assert topo.uplink_rate(three, bw=100, oversubscription=2) == {
        ("l1", "a1"): 100, ("l2", "a1"): 100, ("l3", "a2"): 100, ("l4", "a2"): 100, ("a1", "c1"): 200,
        ("a2", "c1"): 200}
    assert set(topo.uplink_rate(three, bw=None, oversubscription=2).values()) == {None}
    # the file's oversubscription beats the flag's; a link's own, or its rate, beat the file's
    assert topo.uplink_rate(topo.parse_topology("leafspine-4to1"), bw=80, oversubscription=1) == {
        ("l1", "s1"): 80, ("l2", "s1"): 80}
    assert topo.uplink_rate(topo.parse_topology("uneven-racks"), bw=100, oversubscription=1) == {
        ("l1", "s1"): 200, ("l2", "s1"): 200, ("l3", "s1"): 100}
    cfg = json.loads((ROOT / "mininet" / "topologies" / "uneven-racks.json").read_text())
    cfg["links"][2] = {"a": "s1", "b": "l3", "rate": 25}  # written upside down: still l3's uplink
    (tmp_path / "rated.json").write_text(json.dumps({**cfg, "oversubscription": 4}))
    assert topo.uplink_rate(topo.parse_topology(str(tmp_path / "rated.json")), bw=None, oversubscription=1) == {
        ("l1", "s1"): None, ("l2", "s1"): None, ("l3", "s1"): 25}
    assert topo.uplink_rate(topo.parse_topology(str(tmp_path / "rated.json")), bw=100, oversubscription=1) == {
        ("l1", "s1"): 200, ("l2", "s1"): 50, ("l3", "s1"): 25}


def test_a_file_may_name_each_switchs_target():
    fab = topo.parse_topology("leafspine-4to1")
    mixed = dataclasses.replace(fab, switches=(fab.switches[0], fab.switches[1],
                                               dataclasses.replace(fab.switches[2], target="bmv2")))
    cfg = topo.TreeConfig(workers=8, bw=100.0, length=60_000, ping=False)
    experiment = topo.TreeExperiment(cfg, mixed, log=lambda m: None)  # builds nothing until run()
    assert experiment.kinds == {"l1": "emulator", "l2": "emulator", "s1": "bmv2"}
    assert experiment.cfg.words == 32 and cfg.words > 32  # K = 32 on every switch once BMv2 is anywhere
    assert topo.TreeExperiment(cfg, topo.parse_topology("three-tier"), log=lambda m: None)._roots == ("c1",)


def run(script: str, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / script), *flags], capture_output=True, text=True, timeout=120,
                          cwd=ROOT)


def test_run_py_says_a_bad_file_in_one_line_with_status_2(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(BAD))
    out = run("mininet/run.py", "--topology", str(path))
    assert (out.returncode, out.stderr.splitlines()) == (2, [f"mininet/run.py: --topology {path}: {BAD_LINE}"])
    out = run("mininet/run.py", "--topology", "nosuch")
    assert out.returncode == 2 and out.stderr.startswith("mininet/run.py: --topology must be star, ")
    shown = "".join(run("mininet/run.py", "--help").stdout.split())  # argparse wraps at hyphens
    assert "mininet/topologies/:leafspine-4to1,star4,three-tier,uneven-racks" in shown


def test_compare_py_says_a_bad_file_in_one_line_with_status_2(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(BAD))
    out = run("benchmarks/compare.py", "--topology", str(path))
    assert (out.returncode, out.stderr.splitlines()) == (2, [f"compare.py: --topology {path}: {BAD_LINE}"])
    out = run("benchmarks/compare.py", "--topology", "leafspine:4,2,2")  # the baselines would loop: said first
    assert out.returncode == 2 and "run over plain bridges, which loop where switches form a cycle" in out.stderr


def test_compare_py_takes_a_three_tier_file_and_builds_the_baselines_plain_bridges():
    from hina.benchmarks import compare
    from hina.control.fabric import Fabric
    from hina.mininet import plain_star

    args = compare.parse_args(["--topology", "three-tier", "--bws", "80", "--oversubscription", "2"])
    fabric = args.tree["fabric"]
    assert (args.workers, fabric.top, args.tree["oversubscription"]) == (8, ("c1",), 2.0)
    # as run_baselines_mininet hands it over: the fabric's config, then plain_star's Mininet topology
    again = Fabric.from_config(fabric.to_config())
    rates = topo.uplink_rate(again, bw=80, oversubscription=2.0)
    net = plain_star.PlainFabricTopo(fabric=again, link={"bw": 80}, uplinks={k: {"bw": r} for k, r in rates.items()})
    assert sorted(net.switches()) == [f"{plain_star.BRIDGE}{s}" for s in ("a1", "a2", "c1", "l1", "l2", "l3", "l4")]
    assert len(net.hosts()) == 8 and len(net.links()) == 8 + 6
    assert net.linkInfo(f"{plain_star.BRIDGE}a1", f"{plain_star.BRIDGE}c1")["bw"] == 160


def test_plain_star_takes_a_three_tier_tree():
    from hina.mininet import plain_star

    fabric = topo.parse_topology("three-tier")
    assert plain_star._fabric(plain_star.StarConfig(workers=8, fabric=fabric.to_config())).top == ("c1",)
