"""Host-based baselines (ring, SparCML, Ok-Topk, Zen): sums on loopback against numpy, and their pieces.

The loopback tests start real gloo process groups (3 workers, and 4 for
recursive doubling without folding) and check every lossless baseline
within float32 rounding of numpy's float64 sum: |result - exact| <=
gamma_(N-1) x sum_r |g_r| at every element, gamma_m = m 2^-24 / (1 - m 2^-24),
with every rank holding the same bits.  The lossy Ok-Topk top-k is labelled
lossy and its error reported.
"""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import assert_baseline_exact, torch_missing

from hina.baselines import check, comm, registry, sparcml, zen
from hina.baselines.comm import Piece

pytestmark = [pytest.mark.torch, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]

TORCH_MISSING = torch_missing()

needs_torch = pytest.mark.skipif(TORCH_MISSING is not None, reason=f"loopback baselines: {TORCH_MISSING}")


@needs_torch
def test_every_baseline_sums_3_workers_on_loopback():
    from hina.baselines import launch

    offered = [b.name for b in registry.compared()]
    spec = {"length": 30_000, "density": 0.05, "baselines": offered, "seeds": [0, 1], "topk_density": 0.01}
    runs = {r["mode"]: r for r in launch.run_loopback(spec, workers=3, timeout=180)}
    assert set(runs) == set(offered)
    for name in (b.name for b in registry.compared() if not b.lossy):  # a new lossless baseline is held to it too
        assert_baseline_exact(runs[name])
        assert runs[name]["max_abs_diff"] > 0 or runs[name]["max_diff_over_bound"] == 0
    lossy = runs["oktopk_topk"]
    assert lossy["lossy"] and not lossy["exact"] and lossy["identical"]
    # k = 300 of a union of about 4,300 non-zeros: a large, reported error, far fewer bytes than lossless
    assert 0.1 < lossy["rel_l2_error"] < 1.0
    assert lossy["payload_bytes_per_worker"] < runs["oktopk"]["payload_bytes_per_worker"]
    assert lossy["encoding"] == "k = 300"
    # ring ships the dense vector: 2 (N-1)/N x 4 bytes per element; the sparse ones ship far less here
    assert runs["ring"]["payload_by_phase"]["dense"] == round(2 * 2 * 4 * 30_000 / 3)
    for name in ("sparcml", "oktopk", "zen"):
        assert runs[name]["payload_bytes_per_worker"] < runs["ring"]["payload_bytes_per_worker"] / 2, name


@needs_torch
# 3 workers: recursive doubling folds a pair; 4: it does not.  At 0.4 per worker the merged vectors pass
# 50%, DSAR's switch to dense; at 0.7 the inputs are dense already
@pytest.mark.parametrize(("workers", "density"), [(3, 0.02), (3, 0.4), (3, 0.7), (4, 0.4)])
def test_sparcml_both_schemes_sparse_and_past_the_dense_switch(workers, density):
    from hina.baselines import launch

    spec = {"length": 20_000, "density": density, "baselines": ["sparcml_rd", "sparcml_sa", "zen"], "seeds": [3]}
    runs = {r["mode"]: r for r in launch.run_loopback(spec, workers=workers, timeout=180)}
    for run in runs.values():
        assert_baseline_exact(run)
    rd, sa = runs["sparcml_rd"], runs["sparcml_sa"]
    assert rd["encoding"].startswith("recursive doubling") and sa["encoding"].startswith("split-allgather")
    if density >= 0.4:
        assert rd["encoding"] == "recursive doubling, ended dense"
        assert sa["encoding"] == f"split-allgather, {workers} dense partitions"
        assert rd["payload_by_phase"]["dense"] > 0 and sa["payload_by_phase"]["dense"] > 0
    else:
        assert rd["payload_by_phase"]["dense"] == 0 and sa["payload_by_phase"]["dense"] == 0


def test_merge_adds_on_the_union_and_is_the_same_either_way_round():
    rng = np.random.default_rng(1)
    n = 1000
    a = Piece(np.sort(rng.choice(n, 100, replace=False)), rng.standard_normal(100, dtype=np.float32))
    b = Piece(np.sort(rng.choice(n, 150, replace=False)), rng.standard_normal(150, dtype=np.float32))
    ab, ba = comm.merge(a, b, n), comm.merge(b, a, n)
    want = np.zeros(n, np.float32)
    want[a.index] += a.values
    want[b.index] += b.values
    assert np.array_equal(ab.index, ba.index) and ab.values.tobytes() == ba.values.tobytes()
    assert np.array_equal(comm.densify(ab, n).values, want)
    dense = comm.densify(a, n)
    assert comm.merge(dense, b, n).values.tobytes() == comm.merge(b, dense, n).values.tobytes()
    assert np.array_equal(comm.merge(dense, b, n).values, want)


@pytest.mark.parametrize("piece", [
    Piece(np.array([3, 9, 12]), np.array([1.5, -2.0, 0.25], np.float32)),
    Piece(None, np.arange(5, dtype=np.float32), lo=7),
    Piece(None, np.array([4.0, 5.0], np.float32), bitmap=np.packbits([0, 1, 0, 0, 0, 0, 0, 1, 0, 0],
                                                                      bitorder="little")),
])
def test_pack_unpack_round_trip_and_the_bytes_counted(piece):
    buf = comm.pack(piece)
    assert buf.dtype == np.int32 and buf.size == comm.wire_words(piece)
    back = comm.unpack(buf, comm.header_count(piece), piece.lo, piece.values.size)
    assert np.array_equal(back.values, piece.values) and back.lo == piece.lo
    assert (back.index is None) == (piece.index is None) and (back.bitmap is None) == (piece.bitmap is None)
    if piece.index is not None:
        assert np.array_equal(back.index, piece.index)
    if piece.bitmap is not None:
        assert np.array_equal(back.bitmap[: piece.bitmap.size], piece.bitmap)
    c = comm.Comm.__new__(comm.Comm)
    c.sent = dict.fromkeys(comm.KINDS, 0)
    comm.Comm.count(c, piece, copies=2)
    assert sum(c.sent.values()) == 2 * (4 * buf.size + comm.SIZE_HEADER_BYTES)


def test_zen_hash_spreads_skewed_indices_evenly_and_its_bitmap_round_trips():
    n, world = 100_000, 8
    owner, owned, slot = zen.owner_map(n, world)
    assert sum(o.size for o in owned) == n and all(np.all(owner[o] == s) for s, o in enumerate(owned))
    assert all(np.array_equal(slot[o], np.arange(o.size)) and np.all(np.diff(o) > 0) for o in owned)
    hot = np.arange(5_000)  # one contiguous hot region: a range split would give it all to rank 0
    counts = np.bincount(owner[hot], minlength=world)
    assert counts.max() < 1.15 * hot.size / world
    rng = np.random.default_rng(2)
    for density in (0.01, 0.5):  # sparse: an index list; dense: the hash bitmap is smaller
        present = rng.random(owned[3].size) < density
        vals = rng.standard_normal(int(present.sum()), dtype=np.float32)
        piece = zen.encode_pull(owned[3], present, vals)
        assert (piece.bitmap is not None) == (density == 0.5)
        assert np.array_equal(zen.decode_pull(piece, owned[3]), owned[3][present])


def test_sparcml_cost_model_picks_recursive_doubling_for_small_data_and_split_allgather_for_large():
    small = sparcml.predicted_seconds(k=100, n=10_000_000, world=8, link_gbps=10)
    large = sparcml.predicted_seconds(k=1_000_000, n=10_000_000, world=8, link_gbps=10)
    assert min(small, key=small.get) == "recursive_double"
    assert min(large, key=large.get) == "split_allgather"


def test_rounding_bound_holds_for_float32_sums_in_any_order_and_flags_a_wrong_one():
    rng = np.random.default_rng(3)
    grads = [rng.standard_normal(10_000).astype(np.float32) * 10.0 ** rng.integers(-3, 3) for _ in range(8)]
    exact = np.sum(np.array(grads, np.float64), axis=0)
    abs_sum = np.sum(np.abs(np.array(grads, np.float64)), axis=0)
    forward = np.zeros(10_000, np.float32)
    for g in grads:
        forward += g
    backward = np.zeros(10_000, np.float32)
    for g in grads[::-1]:
        backward += g
    for result in (forward, backward):
        c = check.compare(result, exact, abs_sum, 8, lossy=False)
        assert c["within_bound"] and c["max_diff_over_bound"] <= 1.0, c
    wrong = forward.copy()
    wrong[17] += 1e-3 * abs(wrong[17]) + 1e-6
    assert not check.compare(wrong, exact, abs_sum, 8, lossy=False)["within_bound"]


def test_compare_rejects_an_unknown_baseline_in_one_line_with_status_2():
    out = subprocess.run([sys.executable, "benchmarks/compare.py", "--baselines", "bogus", "--mininet", "off"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "bogus" in lines[0], out.stderr


def _plain_star():
    if TORCH_MISSING:
        return None, f"torch: {TORCH_MISSING}"
    try:
        from hina.mininet import plain_star
    except ImportError as exc:  # Mininet (Debian package) absent
        return None, str(exc)
    return plain_star, plain_star.missing_requirements()


@pytest.mark.skipif(_plain_star()[1] is not None, reason=f"Mininet baselines: {_plain_star()[1]}")
def test_baselines_on_a_plain_bridge_star_are_exact_and_their_wire_bytes_are_measured():
    plain_star, _ = _plain_star()
    cfg = plain_star.StarConfig(workers=3, bw=1000, length=100_000, density=0.02, rounds=2,
                                baselines=("ring", "sparcml", "zen"))
    runs = {r["mode"]: r for r in plain_star.run(cfg)}
    for run in runs.values():
        assert_baseline_exact(run)
        # the interface counters include TCP/IP headers and ACKs: at least the payload, not wildly more
        assert run["bytes_measured"]
        payload = run["payload_bytes_per_worker"]
        assert payload <= run["bytes_per_worker"] < 1.5 * payload + 20_000
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    for run in runs.values():  # this run's bridge and its links are gone
        bridge = plain_star.Names(run["run_id"]).bridge
        assert f"{bridge}-eth" not in links and f" {bridge}:" not in links


def _compare():
    from hina.benchmarks import compare

    return compare


def test_compare_systems_pick_modes_and_baselines_and_bad_combinations_exit_2(capsys):
    compare = _compare()
    args = compare.parse_args(["--systems", "auto", "ring", "zen", "--mininet", "off"])
    assert args.systems == ["auto", "ring", "zen"]
    assert compare.parse_args([]).baselines == [b.name for b in registry.compared()]
    for bad in (["--baselines", "none", "ring"], ["--topk-density", "1.5"], ["--workers", "0"], ["--bws", "0"]):
        with pytest.raises(SystemExit) as exc:
            compare.parse_args(bad)
        assert exc.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("compare.py: "), err


def test_compare_table_puts_baselines_next_to_hina_with_speedups_and_their_result():
    compare = _compare()
    dens = {"per_worker": 0.01, "union": 0.03}
    hina = {"seconds": 0.5, "bytes_per_worker": 1000, "retransmissions": 2, "exact": True, "mode": "dense",
            "payload_by_phase": {"dense": 1000}}
    ring = {"seconds": 0.25, "bytes_per_worker": 1500, "retransmissions": None, "exact": True, "mode": "ring",
            "payload_by_phase": {"dense": 1500}, "lossy": False, "max_abs_diff": 2e-7,
            "max_diff_over_bound": 0.5, "rel_l2_error": 1e-9, "encoding": ""}
    topk = {**ring, "mode": "oktopk_topk", "seconds": 0.1, "lossy": True, "exact": False, "rel_l2_error": 0.67,
            "encoding": "k = 10", "payload_by_phase": {"index": 40, "values": 40, "meta": 16}}
    rows = [compare.row("loopback", "lstm", r["mode"], 1000, dens, r) for r in (hina, ring, topk)]
    meta = {"date": "now", "machine": "m", "cpus": 2, "workers": 3, "command": "c", "scales": {"lstm": 0.01}}
    table = compare.markdown(rows, compare.rule_checks(rows), meta)
    lines = {line.split(" | ")[3]: line for line in table.splitlines() if line.startswith("| lstm")}
    assert "| 1.00x | 0.50x |" in lines["dense (SwitchML-style)"] and "exact (fixed point)" in lines[
        "dense (SwitchML-style)"]
    assert "| n/a (TCP) |" in lines["ring allreduce (gloo)"] and "| 2.00x | 1.00x |" in lines["ring allreduce (gloo)"]
    assert "within float32 rounding: max diff 2.0e-07 (0.50 of bound)" in lines["ring allreduce (gloo)"]
    assert "lossy: rel. L2 error 0.67" in lines["Ok-Topk top-k (lossy)"] and "| k = 10 |" in lines[
        "Ok-Topk top-k (lossy)"]
    assert rows[2]["byte_shares"] == {"index": 0.5, "values": 0.5, "dense": 0.0}
