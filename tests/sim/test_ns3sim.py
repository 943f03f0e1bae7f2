"""hina on ns-3 (hina.sim.ns3sim) over the one `Fabric`: what each switch holds, exact sums through ns-3's
links and queues, the cross-check with the scale model, the model's domain against ns-3's drops, and the
command line's exactness column.  The ns-3 cases skip where ns-3's Python bindings are not installed (pip
install 'hina[ns3]'; `make install` does)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hina.benchmarks import ns3_scale
from hina.codec.params import MAX_WORKERS
from hina.control import Fabric, Member
from hina.sim import ns3sim
from hina.sim.scale import Setup, aggregation_seconds, first_round, preset_rounds, union_stats

ROOT = Path(__file__).resolve().parents[2]
missing = ns3sim.available()
needs_ns3 = pytest.mark.skipif(missing is not None, reason=str(missing))
GBIT = 1000  # Mbit/s, the fabric's unit


# -- what each switch holds, what the workers send (no ns-3 needed) -------------------------------------
def test_a_switch_holds_at_most_a_bitmap_of_children():
    jobs, _ = ns3sim.switch_jobs(Fabric.star(MAX_WORKERS), 32, 8)
    assert jobs[0].children == MAX_WORKERS
    with pytest.raises(ValueError, match=r"^switch l1 has 33 children; a switch's arrival bitmap holds 32: more "
                                         r"workers need a tree"):
        ns3sim.switch_jobs(Fabric.star(MAX_WORKERS + 1), 32, 8)
    with pytest.raises(ValueError, match="switch s1 has 33 children"):
        ns3sim.switch_jobs(Fabric.leaf_spine(33 * 4, rack=4, spines=1), 32, 8)


def test_1024_workers_each_known_at_its_leaf_and_each_leaf_at_its_spines():
    fab = Fabric.leaf_spine(1024, rack=32, spines=4, rate=100 * GBIT, uplink_rate=25 * GBIT)
    jobs, leaf_of = ns3sim.switch_jobs(fab, 2239, 64)
    assert leaf_of[0] == (0, 0) and leaf_of[1023] == (31, 31)  # worker 1023: the last of leaf 31
    leaf, spine = jobs[31], jobs[32]
    assert leaf.members == tuple(Member(k, k + 1) for k in range(32))
    assert leaf.parents == tuple(Member(31, 33 + k) for k in range(4))  # member 31 of every spine, ports 33..36
    assert spine.members == tuple(Member(i, i + 1) for i in range(32)) and spine.parents == ()
    assert fab.oversubscription_at("l1") == 32 * 100 / (4 * 25)


def test_a_fat_tree_sends_each_slot_class_up_to_one_core():
    fab = Fabric.fat_tree(1024, k=16, rate=100 * GBIT)
    jobs, _ = ns3sim.switch_jobs(fab, 2239, 64)
    at = {s.name: i for i, s in enumerate(fab.switches)}
    edge, agg, core = jobs[at["e9"]], jobs[at["a11"]], jobs[at["c3"]]
    assert [p.source for p in edge.parents] == list(range(9, 17)) and {p.worker_id for p in edge.parents} == {0}
    assert agg.parents == (Member(1, 11),) and agg.members == tuple(Member(i, i + 1) for i in range(8))
    assert core.members == tuple(Member(p, p + 1) for p in range(16))


def test_real_words_are_a_rotated_gradient_per_worker_and_their_sum_is_numpys():
    data = ns3sim.RealWords.of_preset("deeplight", 8)
    block = data.block
    assert block.dtype == np.int32 and 0 < np.count_nonzero(block) < block.size / 10  # the preset's density
    payloads = [data.payload(w, 3 * block.size + 5) for w in range(8)]
    assert len({p.tobytes() for p in payloads}) == 8  # every worker sends other words
    assert all(p.base is payloads[0].base for p in payloads)  # views of one array: one round's memory
    total = np.sum(payloads, axis=0, dtype=np.int32)
    assert data.check(total) and data.check(total[1000:4000], 1000)
    total[2 * block.size + 17] += 1
    assert not data.check(total)


# -- on ns-3 ---------------------------------------------------------------------------------------
FABRICS = [Fabric.star(8, rate=100 * GBIT), Fabric.leaf_spine(8, rack=4, spines=2, rate=100 * GBIT),
           Fabric.fat_tree(8, k=4, rate=100 * GBIT), Fabric.fat_tree(16, k=4, rate=10 * GBIT),
           Fabric.tree(27, 3, rate=10 * GBIT)]


@needs_ns3
@pytest.mark.parametrize("fabric", FABRICS, ids=lambda f: f.description)
def test_every_worker_gets_the_exact_sum_through_ns3(fabric):
    rng = np.random.default_rng(len(fabric.hosts))
    payloads = [rng.integers(-2 ** 24, 2 ** 24, size=3000, dtype=np.int32) for _ in fabric.hosts]
    run = ns3sim.simulate(fabric, [], payloads=payloads, words=97, slots=8)
    want = np.sum(payloads, axis=0, dtype=np.int32)
    assert all(np.array_equal(r, want) for r in run.results)
    assert run.exact and run.checked == len(fabric.hosts) * -(-3000 // 97)
    assert run.retransmissions == 0 and run.drops == 0
    assert run.frames == len(fabric.hosts) * -(-3000 // 97)


@needs_ns3
def test_sums_stay_exact_when_an_oversubscribed_uplink_drops():
    # 4 workers at 10 Gbit/s under a leaf whose one uplink runs at 1 Gbit/s, every switch port queueing 4 packets
    fabric = Fabric.leaf_spine(8, rack=4, spines=1, rate=10 * GBIT, uplink_rate=1 * GBIT, queue=4)
    rng = np.random.default_rng(7)
    payloads = [rng.integers(-2 ** 20, 2 ** 20, size=20000, dtype=np.int32) for _ in range(8)]
    run = ns3sim.simulate(fabric, [], payloads=payloads, words=200, slots=16)
    want = np.sum(payloads, axis=0, dtype=np.int32)
    assert all(np.array_equal(r, want) for r in run.results) and run.exact
    assert run.drops > 0 and run.retransmissions > 0  # the queue overflowed and the senders recovered


@needs_ns3
@pytest.mark.parametrize("mode", ["dense", "blocks", "auto"])
def test_eight_workers_agree_with_the_scale_model_and_their_real_words_are_exact(mode):
    """DeepLight's rounds at 8 workers on a leaf/spine: the same frames on the same links take the same time
    on both simulators (the frame's padding, each uplink's rate and delay, the switch's latency), and the
    preset's own words, every RESULT checked, do not change it."""
    st = union_stats("deeplight", [8])[0]
    plan = preset_rounds(st, st.length, mode, 100.0)
    fabric = Fabric.leaf_spine(8, rack=4, spines=2, rate=100 * GBIT, uplink_rate=100 * GBIT)
    model = aggregation_seconds(Setup(fabric), plan["rounds"], plan["residual_chance"], cap=256)
    run = ns3sim.simulate(fabric, plan["rounds"], cap=256, data=ns3sim.RealWords.of_preset("deeplight", 8))
    assert run.seconds == pytest.approx(model["seconds"], rel=2e-3)
    assert len(run.rounds) == len(plan["rounds"])
    assert run.retransmissions == model["retransmissions"] == 0
    assert run.exact and run.checked == 8 * sum(r["simulated"] for r in run.rounds)


K = 2239
ROUNDS = [first_round(), (400 * K,)]  # a short round of 400 chunks: a window's burst fills the uplinks


@needs_ns3
def test_the_model_is_in_its_domain_exactly_where_no_switch_port_of_ns3_drops():
    """8 workers at 100 Gbit/s under one 25 Gbit/s uplink: the deepest queue the model finds is the deepest
    ns-3 finds, ports that hold it drop nothing on ns-3 and leave the model in its domain; one packet less
    and ns-3 drops, and the model says the case is outside its domain, naming the port."""
    def fabric(queue=None):
        return Fabric.leaf_spine(8, rack=8, spines=1, rate=100 * GBIT, uplink_rate=25 * GBIT, queue=queue)

    free = aggregation_seconds(Setup(fabric()), ROUNDS, cap=10_000)
    deepest = free["deepest_queue"]
    assert free["in_domain"] and deepest > 10
    assert ns3sim.simulate(fabric(), ROUNDS, cap=None).max_queue == deepest
    for queue, drops in ((deepest, False), (deepest - 1, True)):
        model = aggregation_seconds(Setup(fabric(queue)), ROUNDS, cap=10_000)
        run = ns3sim.simulate(fabric(queue), ROUNDS, cap=None)
        assert (run.drops > 0) is drops and model["in_domain"] is not drops
        assert model["seconds"] == free["seconds"]  # the model never drops: it says where it would
    assert model["overflows"] == [{"port": "l1 up to s1", "queued": deepest}]


@needs_ns3
def test_two_25g_uplinks_are_not_one_of_50g():
    """A rack of 32 at 100 Gbit/s under one 50 Gbit/s uplink, or under two of 25: each uplink of the two
    carries half the slots at half the rate, so it queues less deep, and its frames take twice as long; the
    model sees both as ns-3 does.  With ports one packet short of what each queued, both drop on ns-3, and
    the model says both lie outside its domain, naming each uplink."""
    one, two = ((spines, 50 * GBIT / spines) for spines in (1, 2))
    seen = {}
    for spines, uplink in (one, two):
        fab = Fabric.leaf_spine(32, rack=32, spines=spines, rate=100 * GBIT, uplink_rate=uplink)
        model = aggregation_seconds(Setup(fab), ROUNDS, cap=10_000)
        run = ns3sim.simulate(fab, ROUNDS, cap=None)
        assert model["seconds"] == pytest.approx(run.seconds, rel=1e-3)
        assert model["deepest_queue"] == run.max_queue
        seen[spines] = model
    assert seen[1]["deepest_queue"] > 1.5 * seen[2]["deepest_queue"]
    assert seen[2]["seconds"] > seen[1]["seconds"]
    for spines, uplink in (one, two):
        queue = seen[spines]["deepest_queue"] - 1
        fab = Fabric.leaf_spine(32, rack=32, spines=spines, rate=100 * GBIT, uplink_rate=uplink, queue=queue)
        model = aggregation_seconds(Setup(fab), ROUNDS, cap=10_000)
        assert not model["in_domain"] and ns3sim.simulate(fab, ROUNDS, cap=None).drops > 0
        assert [p["port"] for p in model["overflows"]] == [f"l1 up to s{k + 1}" for k in range(spines)]


# -- the command line -----------------------------------------------------------------------------------
@needs_ns3
def test_the_cli_writes_rows_with_their_exactness_and_domain_and_tables(tmp_path):
    out = tmp_path / "ns3.json"
    cmd = [sys.executable, str(ROOT / "benchmarks/ns3_scale.py"), "--workers", "8", "--fabrics", "star,leaf_spine",
           "--presets", "deeplight", "--modes", "dense,auto", "--rack", "4", "--spines", "2", "--out", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    rows = result["rows"]
    assert [(r["fabric"], r["mode"]) for r in rows] == [
        ("star", "dense"), ("star", "auto"), ("leaf_spine", "dense"), ("leaf_spine", "auto")]
    assert all(abs(r["ratio"] - 1) < 0.005 and r["model_in_domain"] for r in rows)
    assert all(r["exact"] and r["checked_results"] >= 8 * sum(x["simulated"] for x in r["rounds"]) for r in rows)
    assert rows[0]["payload"]["preset"] == "deeplight" and 0 < rows[0]["payload"]["density"] < 0.1
    assert {s["fabric"] for s in result["speedups"]} == {"star", "leaf_spine"}
    assert (tmp_path / "ns3_star.png").exists() and (tmp_path / "ns3_breakdown.png").exists()
    tables = subprocess.run([sys.executable, str(ROOT / "benchmarks/ns3_scale.py"), "--tables", str(out)],
                            capture_output=True, text=True, timeout=60)
    assert "| deeplight | star | 8 | auto (aligned) |" in tables.stdout and "| in | yes |" in tables.stdout


class _Corrupting(ns3sim.Pipeline):
    """A switch whose one RESULT (the first it multicasts to more than one port) carries a wrong last word."""

    spoiled = 0

    def update(self, data, source, length=None):
        emit = super().update(data, source, length)
        if emit is None or len(emit.dests) < 2 or _Corrupting.spoiled:
            return emit
        _Corrupting.spoiled += 1
        frame = bytearray(emit.frame)
        frame[-1] ^= 1
        return type(emit)(emit.dests, bytes(frame))


@needs_ns3
def test_the_cli_fails_a_point_whose_sum_is_corrupted(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(ns3sim, "Pipeline", _Corrupting)
    out = tmp_path / "ns3.json"
    argv = ["--workers", "8", "--fabrics", "star", "--presets", "deeplight", "--modes", "auto", "--out", str(out)]
    assert ns3_scale.main(argv) == 1
    assert _Corrupting.spoiled == 1
    (row,) = json.loads(out.read_text())["rows"]
    assert row["exact"] is False
    said = capsys.readouterr().err
    assert "deeplight star 8 workers auto (aligned): ns-3" in said and "NOT EXACT" in said
    assert said.strip().splitlines()[-1].startswith("ns3_scale.py: 1 of 1 points NOT EXACT")
    assert "**NO**" in ns3_scale.tables(json.loads(out.read_text()))


@pytest.mark.parametrize("argv, says", [(["--fabrics", "ring"], "unknown 'ring'"),
                                        (["--workers", "0"], "workers"),
                                        (["--k", "6x"], "--k"), (["--k", "18"], "must be even, 4..16"),
                                        (["--cap", "100"], "at least 4 windows")])
def test_the_cli_refuses_bad_input_in_one_line(argv, says):
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks/ns3_scale.py"), *argv],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert says in done.stderr and "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
