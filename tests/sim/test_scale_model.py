"""benchmarks/scale_model.py: the clock against analytic times, the codec's words, the tree's bytes, the ring."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchmarks import scale_model as sm
from hina.host.synthetic import synthetic_gradient

ROOT = Path(__file__).resolve().parents[2]
TREES = pytest.mark.skipif(not sm.has_trees(),
                           reason="the switch's tree rule (JobConfig.parent) is not in this checkout")


def ideal(workers: int = 1, **kw) -> sm.Network:
    return sm.Network(workers=workers, gbps=kw.pop("gbps", 100.0), delay=0.0, switch_latency=0.0, **kw)


@pytest.mark.parametrize("chunks", [1, 7, 500])
def test_one_worker_round_is_the_line_rate_plus_one_frame(chunks):
    # a lossless store-and-forward path: the uplink never idles, the last RESULT follows one frame later
    net = ideal()
    got = sm.aggregation_seconds(net, [(chunks * net.words,)])
    assert got["chunks"] == chunks and got["retransmissions"] == 0
    assert got["seconds"] == pytest.approx(net.line_rate_seconds(chunks + 1), rel=1e-12)


def test_delay_and_latency_add_one_round_trip():
    net = sm.Network(workers=4, gbps=10.0, delay=3e-6, switch_latency=2e-6)
    base = ideal(4, gbps=10.0)
    rounds = [(300 * net.words,)]
    extra = sm.aggregation_seconds(net, rounds)["seconds"] - sm.aggregation_seconds(base, rounds)["seconds"]
    assert extra == pytest.approx(2 * 3e-6 + 2e-6, rel=1e-9)


def test_a_small_window_bounds_the_rate():
    # K = 32: a frame is 210 bytes on the wire (17 ns at 100 Gbit/s), so 64 slots cover 1.1 us of a round
    # trip of over 11 us: the window, not the link, sets the rate (W chunks per round trip)
    net = sm.Network(workers=8, gbps=100.0, delay=5e-6, switch_latency=1e-6, words=32, slots=64)
    got = sm.aggregation_seconds(net, [(20_000 * 32,)])
    rtt = 2 * (5e-6 + net.frame_bytes * 8 / 100e9) + 1e-6
    window_bound = 20_000 / 64 * rtt
    assert got["seconds"] > 2 * net.line_rate_seconds(20_000)
    assert got["seconds"] == pytest.approx(window_bound, rel=0.05)


def test_extrapolated_steady_state_matches_the_full_run():
    net = sm.Network(workers=8, gbps=0.1, delay=25e-6, switch_latency=0.0, switch_service=sm.EMULATOR_SERVICE,
                     overhead=sm.FRAME_OVERHEAD)
    rounds = [sm.first_round(), (3000 * net.words,)]
    short = sm.aggregation_seconds(net, rounds, cap=256)
    full = sm.aggregation_seconds(net, rounds, cap=10_000)
    assert short["rounds"][1]["simulated"] == 256 and full["rounds"][1]["simulated"] == 3000
    assert short["seconds"] == pytest.approx(full["seconds"], rel=1e-6)


def test_a_software_switch_that_cannot_keep_up_sets_the_time():
    # 8 children: 16 frames handled per chunk at 10 us each is 160 us, far over a 10 Gbit/s frame's 7 us
    fast = ideal(8, gbps=10.0, switch_service=10e-6)
    got = sm.aggregation_seconds(fast, [(2000 * fast.words,)])
    assert got["seconds"] == pytest.approx(2000 * 16 * 10e-6, rel=0.02)


@pytest.mark.parametrize("mode", ["dense", "blocks", "aligned", "sketch", "auto"])
def test_preset_rounds_are_the_codecs_words(mode):
    # the words the projection computes from union statistics equal what the codec really sends
    length, workers = 1 << 16, 4
    grads = [synthetic_gradient(length, 0.01, seed=3, rank=r) for r in range(workers)]
    ran = sm.codec_rounds(grads, mode, link_gbps=10.0)
    stats = sm.UnionStats.from_supports([g != 0 for g in grads], length)
    model = sm.preset_rounds(stats, length, mode, 10.0)
    assert model["encoding"] == ran["encoding"]
    want = ran["rounds"][:-1] if ran["residual"] else ran["rounds"]  # the residual is charged by its chance
    assert model["rounds"] == want
    if mode in ("aligned", "sketch"):
        assert model["union"] == ran["union"]


def test_union_stats_scale_to_full_length():
    # a table twice as tall with twice the rows touched (as a preset at twice the scale): the same
    # fractions of groups up to a row's width (16), twice the counts; wider groups straddle rows, whose
    # neighbours are random in a preset (not here), so the test stops at the row
    rng = np.random.default_rng(0)
    rows = [rng.choice(1000, 40, replace=False) for _ in range(3)]

    def supports(factor):
        out = []
        for r in rows:
            s = np.zeros((1000 * factor, 16), bool)
            for k in range(factor):
                s[r * factor + k] = True
            out.append(s.reshape(-1))
        return out
    small = sm.UnionStats.from_supports(supports(1), 16_000)
    big = sm.UnionStats.from_supports(supports(2), 32_000)
    assert small.occupied[:5] == big.occupied[:5]
    for group in (1, 2, 16):
        assert small.union_groups(group, 32_000) == big.union_groups(group) > 0
    assert small.estimate(32_000).max_nnz == big.estimate().max_nnz == 2 * 40 * 16


@TREES
def test_leaves_that_aggregate_put_fanin_times_fewer_bytes_on_the_uplink():
    net = sm.Network(workers=64, gbps=100.0, depth=2)
    assert net.fanins == (8, 8)
    agg = sm.link_bytes(net, 1000)
    fwd = sm.link_bytes(net, 1000, aggregate=False)
    assert agg[0] == fwd[0]  # the worker's own link carries the same either way
    assert fwd[1]["up"] == net.fanins[0] * agg[1]["up"] == 8 * 1000 * net.frame_bytes


@TREES
def test_a_tree_costs_its_extra_hops_once_per_round_not_per_chunk():
    star, tree = ideal(64), ideal(64, depth=2)
    rounds = [(1000 * star.words,)]
    s = sm.aggregation_seconds(star, rounds)["seconds"]
    t = sm.aggregation_seconds(tree, rounds)["seconds"]
    # two more store-and-forward hops (up to the root and back down), each one frame time
    assert t - s == pytest.approx(2 * star.frame_bytes * 8 / 100e9, rel=1e-9)


@TREES
def test_a_slow_uplink_sets_the_trees_rate():
    net = sm.Network(workers=64, gbps=100.0, depth=2, uplink_gbps=25.0, delay=0.0, switch_latency=0.0)
    got = sm.aggregation_seconds(net, [(2000 * net.words,)])
    assert net.oversubscription == (32.0,)
    assert got["seconds"] == pytest.approx(2000 * net.frame_bytes * 8 / 25e9, rel=0.01)


def test_ring_is_the_alpha_beta_formula():
    n, size, rate, alpha = 16, 4e8, 100e9, 5e-6
    assert sm.ring_seconds(n, size, rate, alpha) == pytest.approx(2 * 15 * alpha + 2 * 15 / 16 * size * 8 / rate)
    assert sm.ring_seconds(1, size, rate, alpha) == 0.0
    net = sm.Network(workers=n, gbps=100.0, delay=1e-6, switch_latency=0.5e-6)
    wire = sm.ring_wire_bytes(net, 4.0 * 1_000_000)
    assert wire > 4e6
    assert sm.ring_for(net, 1_000_000) == pytest.approx(sm.ring_seconds(n, wire, 100e9, 2e-6 + 0.5e-6))


def test_dense_in_network_beats_the_ring_about_twice_on_a_big_dense_gradient():
    # a star at 100 Gbit/s: INA sends the gradient once, the ring 2 (N - 1) / N times
    net = sm.Network(workers=64, gbps=100.0)
    length = 50_000_000
    ina = sm.aggregation_seconds(net, [sm.first_round(), (length,)])["seconds"]
    ring = sm.ring_for(net, length)
    assert 1.7 < ring / ina < 2.1


@pytest.mark.slow
def test_bad_flags_are_one_line_and_status_2():
    for flag in (["--workers", "0"], ["--gbps", "-1"], ["--topologies", "ring"], ["--validate", "/nonexistent"],
                 ["--scale", "2"]):
        proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "scale_model.py"), *flag],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2, (flag, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.slow
def test_cli_projects_and_writes_provenance(tmp_path):
    out = tmp_path / "sm.json"
    assert sm.main(["--presets", "deeplight", "--workers", "8,16", "--gbps", "100", "--topologies", "star",
                    "--scale", "0.002", "--cap", "256", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert {"command", "date", "machine", "commit"} <= set(data["meta"])
    rows = data["projection"]
    assert [r["workers"] for r in rows] == [8, 16]
    for r in rows:
        assert r["dense_ina"]["encoding"] == "dense" and r["hina_auto"]["encoding"] != "dense"
        assert r["speedup_vs_dense"] > 1
        assert math.isclose(r["dense_ina"]["words_per_worker"], r["length"] + sum(sm.first_round()))


def test_group_counts_from_ranges_are_the_codecs():
    # embedding-like supports (whole rows of 10, some touching) and a dense run, against the bitmap kernel
    from hina.codec import bitmap
    rng = np.random.default_rng(1)
    support = np.zeros(100_003, bool)
    for row in rng.choice(9000, 700, replace=False):
        support[row * 10 : row * 10 + 10] = True
    support[95_001:97_777] = True
    words = np.packbits(support, bitorder="little")
    words = np.concatenate([words, np.zeros(-words.size % 4, np.uint8)]).view("<u4").astype(np.uint32)
    assert list(sm.group_counts(*sm._ranges(support))) == list(bitmap.group_counts(words))


def test_a_mininet_run_is_modelled_with_its_own_gradients_and_verdict(tmp_path):
    cfg = {"workers": 4, "switch": "emulator", "bw": 100.0, "delay": 0.0, "loss": 0.0, "length": 1 << 16,
           "density": 0.01, "mtu": 9000, "slots": 64, "seed": 0, "workload": None, "scale": 0.02}
    runs = [{"mode": mode, "seconds": 0.5, "phase_seconds": {"a": 0.3, "b": 0.1}, "compute_seconds": {"encode": 0.05},
             "fidelity": {"verdict": "network-bound", "detail": "s1-eth1 at 97%"}} for mode in ("dense", "aligned")]
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"config": cfg, "runs": runs, "command": "mininet/run.py ..."}))
    dense, aligned = sm.mininet_case(path)
    assert dense["payload_bytes_model"] == 4 * (sum(sm.first_round()) + (1 << 16))
    assert aligned["encoding"] == "aligned" and aligned["payload_bytes_model"] < dense["payload_bytes_model"] / 10
    net = sm.Network(workers=4, gbps=0.1, overhead=sm.FRAME_OVERHEAD)
    assert dense["model_network_seconds"] > net.line_rate_seconds(1 + -(-(1 << 16) // net.words))
    assert dense["model_seconds"] == pytest.approx(dense["model_network_seconds"] + 0.05)
    assert dense["ratio"] == pytest.approx(0.5 / dense["model_seconds"])
    assert dense["verdict"] == "network-bound (s1-eth1 at 97%)"
    cfg["loss"] = 1.0
    path.write_text(json.dumps({"config": cfg, "runs": runs}))
    with pytest.raises(ValueError, match="lossless"):
        sm.mininet_case(path)
