"""hina on ns-3 (hina.sim.ns3sim): the fabrics, exact sums through ns-3's links and queues, and the
cross-check with the scale model at 8 workers.  The ns-3 cases skip where ns-3's Python bindings are
not installed (pip install 'hina[ns3]'; `make install` does)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hina.codec.params import MAX_WORKERS
from hina.sim import ns3sim
from hina.sim.scale import aggregation_seconds, preset_rounds, round_chunks, union_stats

ROOT = Path(__file__).resolve().parents[2]
missing = ns3sim.available()
needs_ns3 = pytest.mark.skipif(missing is not None, reason=str(missing))


# -- fabrics (no ns-3 needed) ---------------------------------------------------------------------
def _links_up(fabric: ns3sim.Fabric) -> dict[int, set[int]]:
    return {i: set(s.parents) for i, s in enumerate(fabric.switches)}


def test_star_holds_at_most_a_bitmap_of_workers():
    assert ns3sim.star(MAX_WORKERS, 100.0).shape == (MAX_WORKERS,)
    with pytest.raises(ValueError, match="leaf_spine or fat_tree"):
        ns3sim.star(MAX_WORKERS + 1, 100.0)


def test_leaf_spine_wires_every_leaf_to_every_spine():
    f = ns3sim.leaf_spine(1024, 100.0, rack=32, spines=4, uplink_gbps=25.0)
    leaves = [s for s in f.switches if s.tier == 0]
    spines = [i for i, s in enumerate(f.switches) if s.tier == 1]
    assert len(leaves) == 32 and len(spines) == 4
    assert all(set(s.parents) == set(spines) for s in leaves)
    assert sorted(w for s in leaves for w in s.children) == list(range(1024))
    assert f.shape == (32, 32) and f.oversubscription == 32 * 100 / (4 * 25)
    net = f.network()
    assert net.fanins == (32, 32) and net.rate(1) == 4 * 25e9  # the four uplinks as one of their sum


def test_fat_tree_roots_each_slot_class_at_one_core_for_every_pod():
    f = ns3sim.fat_tree(1024, 100.0, k=16)
    tiers = [sum(s.tier == t for s in f.switches) for t in range(3)]
    assert tiers == [128, 16 * 8, 8]  # edges, aggregation switches, the cores that root the job
    assert all(len(s.children) <= MAX_WORKERS for s in f.switches)
    up = _links_up(f)
    for i, s in enumerate(f.switches):
        if s.tier == 0:
            assert len(up[i]) == 8 and all(f.switches[p].tier == 1 for p in up[i])
        if s.tier == 1:  # aggregation switch j of its pod goes to core j (the job's j-th root)
            j = [a for a, t in enumerate(f.switches) if t.tier == 1 and set(t.children) == set(s.children)].index(i)
            (core,) = s.parents
            assert [c for c, t in enumerate(f.switches) if t.tier == 2].index(core) == j
    assert f.shape == (8, 8, 16)
    part = ns3sim.fat_tree(64, 100.0, k=16)  # the first 64 hosts: one pod
    assert part.shape == (8, 8, 1) and sum(s.tier == 2 for s in part.switches) == 8


@pytest.mark.parametrize("make, bad", [(lambda: ns3sim.fat_tree(8, 100.0, k=5), "k must be even"),
                                       (lambda: ns3sim.fat_tree(20, 100.0, k=4), "16 hosts"),
                                       (lambda: ns3sim.leaf_spine(2048, 100.0), "at most 32")])
def test_fabrics_refuse_what_they_cannot_build(make, bad):
    with pytest.raises(ValueError, match=bad):
        make()


# -- on ns-3 ---------------------------------------------------------------------------------------
FABRICS = [ns3sim.star(8, 100.0), ns3sim.leaf_spine(8, 100.0, rack=4, spines=2), ns3sim.fat_tree(8, 100.0, k=4),
           ns3sim.fat_tree(16, 10.0, k=4)]


@needs_ns3
@pytest.mark.parametrize("fabric", FABRICS, ids=lambda f: f"{f.name}-{f.workers}")
def test_every_worker_gets_the_exact_sum_through_ns3(fabric):
    rng = np.random.default_rng(fabric.workers)
    payloads = [rng.integers(-2 ** 24, 2 ** 24, size=3000, dtype=np.int32) for _ in range(fabric.workers)]
    run = ns3sim.simulate(fabric, [], payloads=payloads, words=97, slots=8)
    want = np.sum(payloads, axis=0, dtype=np.int32)
    assert all(np.array_equal(r, want) for r in run.results)
    assert run.retransmissions == 0 and run.drops == 0
    assert run.frames == fabric.workers * -(-3000 // 97)


@needs_ns3
def test_sums_stay_exact_when_an_oversubscribed_uplink_drops():
    # 4 workers at 10 Gbit/s under a leaf whose one uplink runs at 1 Gbit/s and queues 4 packets
    fabric = ns3sim.leaf_spine(8, 10.0, rack=4, spines=1, uplink_gbps=1.0)
    rng = np.random.default_rng(7)
    payloads = [rng.integers(-2 ** 20, 2 ** 20, size=20000, dtype=np.int32) for _ in range(8)]
    run = ns3sim.simulate(fabric, [], payloads=payloads, words=200, slots=16, queue=4)
    want = np.sum(payloads, axis=0, dtype=np.int32)
    assert all(np.array_equal(r, want) for r in run.results)
    assert run.drops > 0 and run.retransmissions > 0  # the queue overflowed and the senders recovered


@needs_ns3
@pytest.mark.parametrize("mode", ["dense", "blocks", "auto"])
def test_eight_workers_agree_with_the_scale_model(mode):
    """DeepLight's rounds at 8 workers on a star: the same frames on the same links take the same time
    on both simulators (the frame's padding, the links' rate and delay, the switch's latency)."""
    st = union_stats("deeplight", [8])[0]
    plan = preset_rounds(st, st.length, mode, 100.0)
    fabric = ns3sim.star(8, 100.0)
    model = aggregation_seconds(fabric.network(), plan["rounds"], plan["residual_chance"], cap=256)
    run = ns3sim.simulate(fabric, plan["rounds"], cap=256)
    assert run.seconds == pytest.approx(model["seconds"], rel=2e-3)
    assert len(run.rounds) == len(plan["rounds"])
    assert run.retransmissions == model["retransmissions"] == 0


@needs_ns3
def test_shallow_queues_on_an_oversubscribed_uplink_agree_with_the_scale_model_given_the_same_queues():
    """A rack of 32 at 100 Gbit/s under 2 spines at 25 (64:1), switch ports of 16 packets: the uplinks drop,
    every child's resend sends the partial up again, and the scale model given the same queues and that
    rule lands within 25% of ns-3; without the queues it is 3 times too fast."""
    st = union_stats("deeplight", [32])[0]
    plan = preset_rounds(st, st.length, "auto", 100.0)
    fabric = ns3sim.leaf_spine(32, 100.0, rack=32, spines=2, uplink_gbps=25.0)
    every = max(round_chunks(r, fabric.network().words) for r in plan["rounds"])
    run = ns3sim.simulate(fabric, plan["rounds"], cap=None, queue=16)
    model = aggregation_seconds(fabric.network(queue=16), plan["rounds"], cap=every)
    bare = aggregation_seconds(fabric.network(), plan["rounds"], cap=every)
    assert run.drops > 0 and run.retransmissions > 0 and model["retransmissions"] > 0
    assert 0.75 < run.seconds / model["seconds"] < 1.25
    assert run.seconds / bare["seconds"] > 3


@needs_ns3
def test_the_cli_writes_rows_and_tables(tmp_path):
    out = tmp_path / "ns3.json"
    cmd = [sys.executable, str(ROOT / "benchmarks/ns3_scale.py"), "--workers", "8", "--fabrics", "star,leaf_spine",
           "--presets", "deeplight", "--modes", "dense,auto", "--rack", "4", "--spines", "2", "--out", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    assert [(r["fabric"], r["mode"]) for r in result["rows"]] == [
        ("star", "dense"), ("star", "auto"), ("leaf_spine", "dense"), ("leaf_spine", "auto")]
    assert all(abs(r["ratio"] - 1) < 0.05 for r in result["rows"])
    assert {s["fabric"] for s in result["speedups"]} == {"star", "leaf_spine"}
    assert (tmp_path / "ns3_star.png").exists() and (tmp_path / "ns3_breakdown.png").exists()
    tables = subprocess.run([sys.executable, str(ROOT / "benchmarks/ns3_scale.py"), "--tables", str(out)],
                            capture_output=True, text=True, timeout=60)
    assert "| deeplight | star | 8 | auto (aligned) |" in tables.stdout


@pytest.mark.parametrize("argv, says", [(["--fabrics", "ring"], "unknown 'ring'"),
                                        (["--workers", "0"], "workers"),
                                        (["--cap", "100"], "at least 4 windows")])
def test_the_cli_refuses_bad_input_in_one_line(argv, says):
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks/ns3_scale.py"), *argv],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert says in done.stderr and "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
