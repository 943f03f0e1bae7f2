"""Mininet experiments through the XDP switch (root, Mininet, clang and libbpf): `mininet/run.py --switch xdp`,
the rules in the kernel on the switch's veths: stars, ranks sharing a host, trees of XDP switches and trees that
mix them with the emulator, BMv2 and plain leaves; every worker's sum exact, and every XDP switch's program
counted the frames it ran on."""

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import tree_modes, uplinks_carry_one_worker_each

from hina.emulator.xdp.build import cannot_load

try:
    from hina.mininet import hina_net, topo
except ImportError:  # Mininet (Debian package) absent: the `mininet` marker skips every test here
    hina_net = None

pytestmark = [pytest.mark.mininet, pytest.mark.slow,
              pytest.mark.skipif(cannot_load() is not None, reason=f"the XDP switch: {cannot_load()}")]
RUN = "txd"  # these tests' run id


def experiment(**kw):
    cfg = hina_net.ExperimentConfig(**{"workers": 4, "switch": "xdp", "mtu": 3506, "bw": 100.0, "length": 60_000,
                                       "density": 0.05, "deadline": 30.0, "ping": False, **kw})
    return hina_net.Experiment(cfg, log=lambda m: None, run_id=RUN).run()


def test_a_star_through_the_xdp_switch_is_exact_under_loss():
    """Four workers, auto and dense, 2% loss on the links: every round exact; the switch's counters are the
    kernel's (RESULTs sent, the programs' runs counted by bpf_stats_enabled)."""
    results = experiment(modes=("auto", "dense"), loss=2.0, rounds=2, ping=True)
    assert results["ping"]["received"] >= 3  # ARP and ICMP through the MAC table in XDP
    assert [r["exact"] for r in results["runs"]] == [True, True], results["runs"]
    counters = results["counters"]
    assert counters["jobs"][1]["results"] > 100 and counters["forwarded"] > 0
    assert counters["profile"]["xdp_ingress_runs"] >= counters["frames"] > 0
    assert counters["profile"]["xdp_egress_runs"] > 0 and counters["unsent"] == 0
    assert all(r["switch_profile"]["xdp_ingress_s"] > 0 for r in results["runs"][1]["rounds"])


def test_the_workers_segmentation_offload_reaches_the_xdp_switch_as_frames():
    """With offload (the default) the workers send batches as UDP_SEGMENT messages, fewer messages than frames,
    and the hosts' stacks cut them before their links (the program takes no super-frame): every frame reaches
    the program whole, none dropped, every round exact.  Frame by frame, a message per frame.  (At 400 Mbit/s a
    pacing quantum holds several frames; at 100 a worker's batches are mostly one frame.)"""
    for offload in (True, False):
        results = experiment(modes=("dense",), density=1.0, length=1_000_000, bw=400.0, offload=offload)
        run = results["runs"][0]
        assert run["exact"] and results["config"]["offload"] is offload, run
        assert (run["messages"] < run["frames"] / 2) if offload else run["messages"] >= run["frames"]
        counters = results["counters"]
        assert not {"truncated", "bad_length"} & counters["drops"].keys()
        assert counters["profile"]["xdp_ingress_runs"] >= counters["frames"] >= run["frames"]


def test_tcp_crosses_the_xdp_star_beside_the_workers_offload():
    """With the workers' offload on (the hosts keep transmit checksum offload, so their TCP checksums leave
    partial) a TCP stream between two hosts arrives whole through the switch's MAC table: the program completes
    each segment's checksum, which a redirect would otherwise leave partial for the receiver to drop (DDP's gloo
    pairs hung so)."""
    sent = 256 * 8000
    server = ("import socket, hashlib; s = socket.create_server(('', 5201)); c, _ = s.accept(); h = hashlib.sha256(); "
              "n = 0\nwhile b := c.recv(65536): h.update(b); n += len(b)\nprint(n, h.hexdigest())")
    client = (f"import socket; c = socket.create_connection(('{{ip}}', 5201), timeout=10); "
              f"c.sendall(bytes(range(256)) * {sent // 256}); c.close()")

    class Stream(hina_net.Experiment):
        def _aggregate(self, mode, topology):
            h1, h2 = self._hosts()[:2]
            listening = h2.popen([sys.executable, "-c", server], stdout=subprocess.PIPE, text=True)
            for _ in range(50):
                if "5201" in h2.cmd("ss -ltn"):
                    break
            h1.cmd(f"timeout 20 {sys.executable} -c \"{client.format(ip=h2.IP())}\"")
            out, _ = listening.communicate(timeout=20)
            return {"received": out.split(), "runs": []}

    cfg = hina_net.ExperimentConfig(workers=2, switch="xdp", mtu=3506, bw=200.0, modes=("tcp",), ping=False)
    assert cfg.offload
    stream = Stream(cfg, log=lambda m: None, run_id=RUN)
    want = [str(sent), hashlib.sha256(bytes(range(256)) * (sent // 256)).hexdigest()]
    assert stream.run()["runs"][0]["received"] == want


def test_ranks_sharing_a_host_each_get_their_own_replica():
    """Two ranks a host: the job's group holds the port twice, and the egress program addresses each copy to
    its rank's UDP port (the broadcast's per-CPU numbering)."""
    results = experiment(ranks_per_host=2, modes=("dense",))
    assert results["runs"][0]["exact"], results["runs"]
    assert not results["counters"]["drops"].get("unauthorized")


@pytest.mark.parametrize("flags", [["--switch", "xdp"], ["--topology", "leafspine:2,1,2", "--spine-switch", "xdp"]],
                         ids=["star", "xdp-spine"])
def test_a_frame_larger_than_the_program_takes_is_refused_before_any_network(flags):
    out = subprocess.run([sys.executable, str(Path(hina_net.__file__).with_name("run.py")), *flags, "--mtu", "9000"],
                         capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stderr.splitlines()) == (2, [
        "mininet/run.py: mtu 9000: the XDP switch takes frames of an MTU up to 3506 (the kernel broadcasts no "
        "larger frame); give --mtu 3506 or less"]), out.stderr


def tree_experiment(spec, **kw):
    fabric = topo.parse_topology(spec)
    cfg = topo.TreeConfig(**{"workers": len(fabric.hosts), "bw": 100.0, "length": 60_000, "density": 0.05,
                             "deadline": 30.0, "ping": False, **kw})
    return topo.TreeExperiment(cfg, fabric, log=lambda m: None, run_id=RUN).run()


def ran_the_program(counters: dict) -> bool:
    """The switch's XDP program ran on every frame it counted, and sent RESULT copies through its egress."""
    profile = counters["profile"]
    return profile["xdp_ingress_runs"] >= counters["frames"] > 0 and profile["xdp_egress_runs"] > 0


def check_tree(results: dict, kinds: dict[str, str]) -> None:
    """Every mode exact; each leaf sent a partial up for every chunk its spine completed and took each total
    once (where their counters say: BMv2 counts drops only); every XDP switch's program ran on the frames it
    counted; each uplink carried about one worker's bytes each way, more only as its counters say it went
    again."""
    assert results["topology"]["switches"] == kinds
    assert results["config"]["mtu"] == 3506  # the XDP switch's largest frame, on every link of the tree
    # the uplink directions an XDP switch sends on, said: its redirects skip the port's queue
    assert results["topology"]["unshaped"] == [f"{leaf}-s1 {way}" for leaf in ("l1", "l2")
                                               for way, end in (("up", leaf), ("down", "s1")) if kinds[end] == "xdp"]
    for run, mode in tree_modes(results):
        assert set(mode) == {name for name, kind in kinds.items() if kind != "bmv2"}
        chunks = mode["s1"]["results"] if "s1" in mode else 1
        for name in ("l1", "l2"):
            leaf = mode.get(name)
            assert leaf is None or leaf["sent_up"] >= chunks > 0 and leaf["results"] == leaf["sent_up"], (
                name, leaf, chunks)
        for name, kind in kinds.items():
            assert kind != "xdp" or ran_the_program(run["switches"][name]), (name, run["switches"][name])
        uplinks_carry_one_worker_each(results, run, mode)


def test_a_tree_of_xdp_switches_is_exact_under_loss_one_partial_per_uplink():
    """Two leaves and a spine, each the XDP program: a leaf sums its rack in the kernel and redirects one
    partial up, the spine sums the leaves and broadcasts the total down; under 1% loss on every link."""
    results = tree_experiment("leafspine:2,1,2", switch="xdp", modes=("dense", "auto"), loss=1.0)
    check_tree(results, {"l1": "xdp", "l2": "xdp", "s1": "xdp"})


@pytest.mark.parametrize("leaves,spine", [
    ("xdp", "emulator"), ("emulator", "xdp"),
    pytest.param("xdp", "bmv2", marks=pytest.mark.bmv2), pytest.param("bmv2", "xdp", marks=pytest.mark.bmv2)],
    ids=["xdp-leaves-emulator-spine", "emulator-leaves-xdp-spine", "xdp-leaves-bmv2-spine",
         "bmv2-leaves-xdp-spine"])
def test_mixed_trees_are_exact(leaves, spine, request):
    """The XDP switch beside the emulator and BMv2 in one tree, each tier configured through its own target;
    K = 32 words on every switch once BMv2 is anywhere."""
    if "bmv2" in (leaves, spine):
        request.getfixturevalue("p4_build")
    results = tree_experiment("leafspine:2,1,2", switch=leaves, spine_switch=spine, modes=("dense", "auto"),
                              length=20_000 if "bmv2" in (leaves, spine) else 60_000, deadline=60.0)
    check_tree(results, {"l1": leaves, "l2": leaves, "s1": spine})


def test_a_topology_files_xdp_target_sets_the_links_mtu(tmp_path):
    """A switch the file names "target": "xdp" runs the program whatever --switch says, and the links' MTU left
    to its default is then the XDP switch's."""
    fabric = json.loads((topo.TOPOLOGIES / "leafspine-4to1.json").read_text())
    fabric["switches"][2]["target"] = "xdp"
    path = tmp_path / "xdp-spine.json"
    path.write_text(json.dumps(fabric))
    results = tree_experiment(str(path), switch="emulator", modes=("dense",), length=30_000)
    check_tree(results, {"l1": "emulator", "l2": "emulator", "s1": "xdp"})


def test_plain_leaves_under_an_xdp_spine_each_uplink_carries_its_rack():
    """Linux bridges for leaves, the XDP spine summing every worker: each worker's UPDATE crosses its leaf's
    uplink, the spine answers each leaf once at the broadcast address, every sum exact."""
    results = tree_experiment("leafspine:2,1,2", switch="xdp", leaves="plain", modes=("dense", "auto"))
    assert results["topology"]["switches"] == {"l1": "bridge", "l2": "bridge", "s1": "xdp"}
    assert results["topology"]["unshaped"] == ["l1-s1 down", "l2-s1 down"]
    for run in results["runs"]:
        assert run["exact"] and all(r["exact"] and not r["errors"] for r in run["rounds"]), run
        assert set(run["switches"]) == {"s1"} and ran_the_program(run["switches"]["s1"])
        per_worker = run["wire_bytes_per_worker"]
        for k, v in run["uplinks"].items():
            assert 1.7 * per_worker < v["up"] < 2.5 * per_worker, (k, v, per_worker)
            assert 0 < v["down"] < 1.5 * per_worker, (k, v, per_worker)


def test_two_jobs_at_once_through_the_xdp_switch_each_exact_on_its_own_slots():
    """Two jobs of three workers on the same three hosts, each host a rank of each at UDP ports of their own:
    both jobs in the program's maps on ranges the allocation chose, both modes exact for both jobs, at once,
    under 1% loss; each job's counters moved and the program ran on every frame."""
    from hina.mininet.shared_switch import SharedSwitchExperiment

    cfg = hina_net.ExperimentConfig(workers=6, ranks_per_host=2, switch="xdp", modes=("auto", "dense"), bw=100.0,
                                    loss=1.0, length=40_000, density=0.02, slots=16, ping=False, deadline=30.0)
    results = SharedSwitchExperiment(cfg, jobs=2, log=lambda m: None, run_id=RUN).run()
    for run in results["runs"]:
        assert run["exact"], run["rounds"]
        assert [(j["job_id"], j["slot_base"], j["slots"]) for j in run["jobs"]] == [(1, 0, 16), (2, 16, 16)]
        for rnd in run["rounds"]:
            assert [j["exact"] for j in rnd["jobs"]] == [True, True]
    counters = results["counters"]
    assert all(counters["jobs"][job]["results"] > 0 for job in (1, 2)), counters["jobs"]
    assert ran_the_program(counters) and not counters["drops"].get("unauthorized")


def test_the_tenants_benchmark_runs_two_jobs_through_the_xdp_star(tmp_path):
    """benchmarks/tenants.py --star xdp (no sharing runs): its result says both jobs were exact in both modes
    and keeps the switch's counters, the program's runs among them."""
    bench = Path(hina_net.__file__).resolve().parent.parent / "benchmarks" / "tenants.py"
    out = subprocess.run([sys.executable, str(bench), "--jobs", "--star", "xdp", "--bw", "100",
                          "--out", str(tmp_path / "tenants.json")], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    star = json.loads((tmp_path / "tenants.json").read_text())["star"]["xdp"]
    assert star["mtu"] == 3506 and [(r["mode"], r["exact"]) for r in star["runs"]] == [("dense", True),
                                                                                        ("auto", True)]
    assert all(len(r["jobs"]) == 2 for r in star["runs"]) and ran_the_program(star["counters"])


def test_the_budget_runs_the_xdp_switch_beside_the_emulator(tmp_path):
    """benchmarks/budget.py --switches emulator xdp, small: every row exact (each switch's two data paths); the
    emulator's switch CPU is its process's, the XDP switch's its programs' run time (rules per frame received,
    send per copy), which ran on every frame the switch counted; the table holds both."""
    bench = Path(hina_net.__file__).resolve().parent.parent / "benchmarks" / "budget.py"
    out = subprocess.run([sys.executable, str(bench), "--workers", "3", "--bws", "100", "--modes", "dense",
                          "--length", "100000", "--rounds", "2", "--switches", "emulator", "xdp", "--no-ceiling",
                          "--out", str(tmp_path / "budget.json")], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = {(r["switch"], r["variant"]): r for r in json.loads((tmp_path / "budget.json").read_text())["hina"]}
    assert set(rows) == {("emulator", "frame by frame, unpaced"), ("emulator", "offload and pacing"),
                         ("xdp", "frame by frame, paced"), ("xdp", "offload and pacing")}
    assert all(r["exact"] for r in rows.values())
    for variant in ("frame by frame, paced", "offload and pacing"):
        xdp = rows["xdp", variant]
        assert xdp["mtu"] == 3506 and ran_the_program(xdp["switch_counters"])
        for rnd in xdp["rounds"]:
            seconds = rnd["cpu_seconds"]
            assert seconds["switch rules"] > 0 and seconds["switch send"] > 0 and seconds["switch receive"] == 0
    assert all(rows["emulator", v]["cpu_seconds"]["switch receive"] > 0 for v in ("frame by frame, unpaced",
                                                                                 "offload and pacing"))
    assert "| 100 Mbit/s | dense | xdp | frame by frame, paced |" in out.stdout


def test_the_comparison_runs_hina_through_the_xdp_switch_and_the_baselines_on_its_links(tmp_path):
    """benchmarks/compare.py --switch xdp on a 2-leaf tree, small: hina's modes exact through XDP leaves and
    spine, gloo's ring over plain bridges with the same links (their MTU the XDP switch's), rows for both."""
    from helpers import torch_missing

    if torch_missing():
        pytest.skip(f"torch: {torch_missing()}")
    bench = Path(hina_net.__file__).resolve().parent.parent / "benchmarks" / "compare.py"
    out = subprocess.run([sys.executable, str(bench), "--switch", "xdp", "--topology", "leafspine:2,1,2",
                          "--presets", "lstm", "--scale", "0.002", "--bws", "100", "--rounds", "1", "--loopback",
                          "off", "--systems", "dense", "auto", "ring", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads((tmp_path / "compare.json").read_text())
    assert (result["meta"]["switch"], result["meta"]["mtu"]) == ("xdp", 3506)
    rows = {r["mode"]: r for r in result["rows"]}
    assert set(rows) == {"dense", "auto", "ring"} and rows["dense"]["exact"] and rows["auto"]["exact"]
    assert all(rows[m]["uplink_bytes_per_aggregation"] > 0 for m in rows)
