"""The scale model's engine (sim/scale.py) on the one `Fabric`: the clock against analytic times, the codec's
words, the tree's bytes, each uplink on its own, the model's domain, the ring."""

from __future__ import annotations

import numpy as np
import pytest

from hina.control import Fabric
from hina.host.synthetic import synthetic_gradient
from hina.sim import scale
from hina.wire.headers import FRAME_OVERHEAD


def net(workers: int = 1, gbps: float = 100.0, depth: int = 1, uplink_gbps: float | None = None,
        queue: int | None = None, **kw) -> scale.Setup:
    """A star or a tree of `depth` tiers, its uplinks at the workers' rate unless given."""
    rate = gbps * 1000
    fabric = (Fabric.star(workers, rate=rate, queue=queue) if depth == 1 else
              Fabric.tree(workers, depth, rate=rate, uplink_rate=(uplink_gbps or gbps) * 1000, queue=queue))
    return scale.Setup(fabric, **kw)


def ideal(workers: int = 1, **kw) -> scale.Setup:
    return net(workers, delay=0.0, switch_latency=0.0, **kw)


@pytest.mark.parametrize("chunks", [1, 7, 500])
def test_one_worker_round_is_the_line_rate_plus_one_frame(chunks):
    # a lossless store-and-forward path: the uplink never idles, the last RESULT follows one frame later
    one = ideal()
    got = scale.aggregation_seconds(one, [(chunks * one.words,)])
    assert got["chunks"] == chunks and got["retransmissions"] == 0
    assert got["seconds"] == pytest.approx(one.line_rate_seconds(chunks + 1), rel=1e-12)


def test_delay_and_latency_add_one_round_trip():
    slow = net(4, gbps=10.0, delay=3e-6, switch_latency=2e-6)
    base = ideal(4, gbps=10.0)
    rounds = [(300 * slow.words,)]
    extra = scale.aggregation_seconds(slow, rounds)["seconds"] - scale.aggregation_seconds(base, rounds)["seconds"]
    assert extra == pytest.approx(2 * 3e-6 + 2e-6, rel=1e-9)


def test_a_small_window_bounds_the_rate():
    # K = 32: a frame is 210 bytes on the wire (17 ns at 100 Gbit/s), so 64 slots cover 1.1 us of a round
    # trip of over 11 us: the window, not the link, sets the rate (W chunks per round trip)
    small = net(8, delay=5e-6, switch_latency=1e-6, words=32, slots=64)
    got = scale.aggregation_seconds(small, [(20_000 * 32,)])
    rtt = 2 * (5e-6 + small.frame_bytes * 8 / 100e9) + 1e-6
    window_bound = 20_000 / 64 * rtt
    assert got["seconds"] > 2 * small.line_rate_seconds(20_000)
    assert got["seconds"] == pytest.approx(window_bound, rel=0.05)


def test_extrapolated_steady_state_matches_the_full_run():
    mininet = net(8, gbps=0.1, delay=25e-6, switch_latency=0.0, switch_service=scale.EMULATOR_SERVICE,
                  overhead=FRAME_OVERHEAD)
    rounds = [scale.first_round(), (3000 * mininet.words,)]
    short = scale.aggregation_seconds(mininet, rounds, cap=256)
    full = scale.aggregation_seconds(mininet, rounds, cap=10_000)
    assert short["rounds"][1]["simulated"] == 256 and full["rounds"][1]["simulated"] == 3000
    assert short["seconds"] == pytest.approx(full["seconds"], rel=1e-6)


def test_a_software_switch_that_cannot_keep_up_sets_the_time():
    # 8 children: 16 frames handled per chunk at 10 us each is 160 us, far over a 10 Gbit/s frame's 7 us
    fast = ideal(8, gbps=10.0, switch_service=10e-6)
    got = scale.aggregation_seconds(fast, [(2000 * fast.words,)])
    assert got["seconds"] == pytest.approx(2000 * 16 * 10e-6, rel=0.02)


@pytest.mark.parametrize("mode", ["dense", "blocks", "aligned", "sketch", "auto"])
def test_preset_rounds_are_the_codecs_words(mode):
    # the words the projection computes from union statistics equal what the codec really sends
    length, workers = 1 << 16, 4
    grads = [synthetic_gradient(length, 0.01, seed=3, rank=r) for r in range(workers)]
    ran = scale.codec_rounds(grads, mode, link_gbps=10.0)
    stats = scale.UnionStats.from_supports([g != 0 for g in grads], length)
    model = scale.preset_rounds(stats, length, mode, 10.0)
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
    small = scale.UnionStats.from_supports(supports(1), 16_000)
    big = scale.UnionStats.from_supports(supports(2), 32_000)
    assert small.occupied[:5] == big.occupied[:5]
    for group in (1, 2, 16):
        assert small.union_groups(group, 32_000) == big.union_groups(group) > 0
    assert small.estimate(32_000).max_nnz == big.estimate().max_nnz == 2 * 40 * 16


def test_leaves_that_aggregate_put_fanin_times_fewer_bytes_on_the_uplink():
    tree = net(64, depth=2)
    assert tree.fanins == (8, 8)
    agg = scale.link_bytes(tree, 1000)
    fwd = scale.link_bytes(tree, 1000, aggregate=False)
    assert agg[0] == fwd[0]  # the worker's own link carries the same either way
    assert fwd[1]["up"] == tree.fanins[0] * agg[1]["up"] == 8 * 1000 * tree.frame_bytes


def test_a_tree_costs_its_extra_hops_once_per_round_not_per_chunk():
    star, tree = ideal(64), ideal(64, depth=2)
    rounds = [(1000 * star.words,)]
    s = scale.aggregation_seconds(star, rounds)["seconds"]
    t = scale.aggregation_seconds(tree, rounds)["seconds"]
    # two more store-and-forward hops (up to the root and back down), each one frame time
    assert t - s == pytest.approx(2 * star.frame_bytes * 8 / 100e9, rel=1e-9)


def test_a_slow_uplink_sets_the_trees_rate():
    slow = ideal(64, depth=2, uplink_gbps=25.0)
    got = scale.aggregation_seconds(slow, [(2000 * slow.words,)])
    assert slow.fabric.oversubscription_at("l1") == 32.0
    assert got["seconds"] == pytest.approx(2000 * slow.frame_bytes * 8 / 25e9, rel=0.01)


def test_ring_is_the_alpha_beta_formula():
    n, size, rate, alpha = 16, 4e8, 100e9, 5e-6
    assert scale.ring_seconds(n, size, rate, alpha) == pytest.approx(2 * 15 * alpha + 2 * 15 / 16 * size * 8 / rate)
    assert scale.ring_seconds(1, size, rate, alpha) == 0.0
    star = net(n, delay=1e-6, switch_latency=0.5e-6)
    wire = scale.ring_wire_bytes(star, 4.0 * 1_000_000)
    assert wire > 4e6
    assert scale.ring_for(star, 1_000_000) == pytest.approx(scale.ring_seconds(n, wire, 100e9, 2e-6 + 0.5e-6))


def test_dense_in_network_beats_the_ring_about_twice_on_a_big_dense_gradient():
    # a star at 100 Gbit/s: INA sends the gradient once, the ring 2 (N - 1) / N times
    star = net(64)
    length = 50_000_000
    ina = scale.aggregation_seconds(star, [scale.first_round(), (length,)])["seconds"]
    ring = scale.ring_for(star, length)
    assert 1.7 < ring / ina < 2.1


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
    assert list(scale.group_counts(*scale._ranges(support))) == list(bitmap.group_counts(words))


def leaf_spine(spines: int, uplink_gbps: float, queue: int | None = None, **kw) -> scale.Setup:
    """A rack of 32 at 100 Gbit/s under `spines` spines."""
    return scale.Setup(Fabric.leaf_spine(32, rack=32, spines=spines, rate=100_000, uplink_rate=uplink_gbps * 1000,
                                         queue=queue), **kw)


def test_every_uplink_is_a_link_of_its_own():
    """Two 25 Gbit/s uplinks are not one of 50: each carries the slots of its spine (slot s up to spine
    s mod 2), queues less deep than the one would, and takes twice as long per frame; a port of each
    holds what it holds, and the model says which would drop."""
    rounds = [scale.first_round(), (400 * 2239,)]
    one, two = leaf_spine(1, 50.0), leaf_spine(2, 25.0)
    assert [h.name for h in two.hops] == ["l1", "s1", "s2"] and two.hops[0].parents == (1, 2)
    assert [h.rate for h in two.hops[1:]] == [25e9, 25e9] and one.hops[1].rate == 50e9
    a, b = (scale.aggregation_seconds(n, rounds, cap=10_000) for n in (one, two))
    assert a["in_domain"] and b["in_domain"]  # no queue limit given
    ports = {p["port"]: p["queued"] for p in scale.PathModel(two, cap=10_000).ports()}
    assert set(ports) == {"l1 down to a worker", "l1 up to s1", "s1 down to l1", "l1 up to s2", "s2 down to l1"}
    assert a["deepest_queue"] > 1.5 * b["deepest_queue"] and b["seconds"] > a["seconds"]
    # the same two fabrics with ports one packet short of what each queued: both would drop, and the model says where
    qa, qb = a["deepest_queue"] - 1, b["deepest_queue"] - 1
    a, b = (scale.aggregation_seconds(leaf_spine(s, u, q), rounds, cap=10_000) for s, u, q in ((1, 50, qa),
                                                                                                (2, 25, qb)))
    assert [p["port"] for p in a["overflows"]] == ["l1 up to s1"]
    assert [p["port"] for p in b["overflows"]][0] == "l1 up to s1"
    assert scale.outside(b).startswith(f"l1 up to s1 would queue {b['overflows'][0]['queued']} packets, "
                                       f"a port holds {qb}")


def test_the_domain_flag_is_set_exactly_where_a_port_would_overflow():
    rounds = [scale.first_round(), (400 * 2239,)]
    deepest = scale.aggregation_seconds(leaf_spine(1, 25.0), rounds, cap=10_000)["deepest_queue"]
    seen = {q: scale.aggregation_seconds(leaf_spine(1, 25.0, q), rounds, cap=10_000)
            for q in (deepest + 1, deepest, deepest - 1, 1)}
    assert [seen[q]["in_domain"] for q in seen] == [True, True, False, False]
    assert scale.outside(seen[deepest]) is None
    assert scale.outside(seen[deepest - 1]).startswith(f"l1 up to s1 would queue {deepest} packets, a port "
                                                       f"holds {deepest - 1}")
    assert len({round(r["seconds"], 15) for r in seen.values()}) == 1  # the model never drops: it says so
    # at the workers' rate the uplink never queues: in the domain with one-packet ports
    assert scale.aggregation_seconds(leaf_spine(1, 100.0, 1), rounds, cap=10_000)["in_domain"]


def test_the_model_needs_the_hosts_rate():
    with pytest.raises(ValueError, match=r"^the scale model needs the hosts' rate"):
        scale.Setup(Fabric.star(4))
