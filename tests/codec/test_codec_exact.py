"""Bit-exactness of the codec in every mode: `fixed` is the dense sum of the quantized arrays, for every
input; what auto picks; the two-level index and the bitmap kernels it is built from."""

import contextlib

import numpy as np
import pytest
from helpers import (
    EACH_MODE,
    GROUP_SIZES,
    LANES,
    SUPPORTS,
    assert_exact,
    codec_jobs,
    dense_fixed_sum,
    random_bitmap,
    sparse_gradients,
    union_mask,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from hina import codec
from hina.codec import bitmap, values


def words(n):
    return -(-n // 32)


def check_report(result, grads, mode, group):
    """What every worker reports agrees with the inputs: encoding, group, union, bytes, rounds."""
    r0 = result.workers[0]
    for r in result.workers[1:]:
        assert (r.encoding, r.group, r.union, r.rows, r.residual, r.rounds, r.bytes_sent, r.shift) == \
               (r0.encoding, r0.group, r0.union, r0.rows, r0.residual, r0.rounds, r0.bytes_sent, r0.shift)
    if mode != "auto":
        assert result.encoding == mode
    d = result.params.length
    u = int(union_mask(grads).sum())
    b = result.bytes_per_worker
    assert (b["check"], b["scale"], b["stats"]) == (8, 8, 44)
    assert b["total"] == sum(v for k, v in b.items() if k != "total")
    index = {k: v for k, v in b.items() if k.startswith("index")}
    if result.encoding == "dense":
        assert result.union is None and result.group == 0 and b["dense"] == 4 * d
        assert set(b) == {"check", "scale", "stats", "dense", "total"} and r0.rounds == 2
    elif result.encoding == "blocks":
        blocks = np.unique(np.flatnonzero(union_mask(grads)) // 256)
        assert result.union == 256 * blocks.size and result.group == 0
        assert b["block_index"] == 4 * words(-(-d // 256)) and b.get("blocks", 0) == 4 * 256 * blocks.size
        assert r0.rounds == (3 if blocks.size else 2)
    else:
        assert result.union == u
        assert result.group == group if group else result.group in GROUP_SIZES
        if result.group == 1:
            assert set(index) == {"index"} and index["index"] == 4 * words(d)
        else:
            assert b["index_coarse"] == 4 * words(-(-d // result.group))
            union_groups = np.unique(np.flatnonzero(union_mask(grads)) // result.group).size
            assert b.get("index_fine", 0) == 4 * words(union_groups * result.group)
        index_rounds = 1 if result.group == 1 or u == 0 else 2
        if result.encoding == "aligned":
            assert b.get("values", 0) == 4 * u and result.rows == 0 and result.residual == 0
            assert r0.rounds == 1 + index_rounds + (u > 0)
        else:
            assert result.encoding == "sketch"
            assert b.get("sketch", 0) == 4 * 3 * result.rows * result.params.lanes
            assert b.get("residual", 0) == 4 * result.residual and result.residual <= u
            assert r0.rounds == 1 + index_rounds + (result.residual > 0)


@settings(max_examples=200)
@given(codec_jobs())
def test_exact_for_random_jobs(job):
    workers, length, density, support, dtype, cancel, seed, mode, group, lanes = job
    rng = np.random.default_rng(seed)
    grads = sparse_gradients(rng, workers, length, density, support=support, dtype=dtype, cancel=cancel)
    result = codec.simulate_allreduce(grads, mode=mode, group=group, lanes=lanes)
    assert_exact(result, grads)
    assert result.shift is None if dtype == np.int32 else isinstance(result.shift, int)
    check_report(result, grads, mode, group)


@EACH_MODE
@pytest.mark.parametrize("support", SUPPORTS)
def test_exact_for_each_support_pattern(mode, group, support):
    length = 50_001
    assert length % LANES and length % 256 and length % 16
    grads = sparse_gradients(np.random.default_rng(7), 8, length, 0.01, support=support)
    result = codec.simulate_allreduce(grads, mode=mode, group=group)
    assert_exact(result, grads)
    check_report(result, grads, mode, group)


@EACH_MODE
def test_values_that_cancel_are_exact_zero(mode, group):
    grads = sparse_gradients(np.random.default_rng(3), 4, 20_001, 0.1, cancel=True)
    result = codec.simulate_allreduce(grads, mode=mode, group=group)
    assert_exact(result, grads)
    assert not result.fixed.any() and not result.sum.any()
    if result.encoding != "dense":  # the union still holds them: cancellation is decoded, not assumed
        assert result.union >= union_mask(grads).sum() > 0
    check_report(result, grads, mode, group)


@EACH_MODE
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_extreme_magnitudes_in_one_tensor(mode, group, dtype):
    """1e-30 beside 1e30: the small ones quantize to 0 but stay in the union (g != 0); still exact."""
    rng = np.random.default_rng(4)
    grads = sparse_gradients(rng, 5, 30_003, 0.05, dtype=dtype, magnitudes=(1e-30, 1e30))
    result = codec.simulate_allreduce(grads, mode=mode, group=group)
    assert_exact(result, grads)
    biggest = max(np.abs(g.astype(np.float64)).max() for g in grads)
    assert result.shift == 30 - int(np.frexp(biggest)[1]) - 3
    assert_within_quantization(result, grads)
    check_report(result, grads, mode, group)


@EACH_MODE
def test_union_is_the_support_before_quantization(mode, group):
    """A value too small to survive quantization still counts in |U|; -0.0 does not."""
    grads = [np.zeros(1000, dtype=np.float32) for _ in range(2)]
    grads[0][10] = 1.0
    grads[1][500] = 1e-20  # quantizes to 0 at shift 30 - 1 - 1
    grads[1][900] = -0.0
    result = codec.simulate_allreduce(grads, mode=mode, group=group)
    assert_exact(result, grads)
    assert np.flatnonzero(result.fixed).tolist() == [10]
    if result.encoding in ("aligned", "sketch"):
        assert result.union == 2
    check_report(result, grads, mode, group)


def assert_within_quantization(result, grads):
    """Each worker's rounding costs at most half a unit of 2**-shift."""
    true = sum(g.astype(np.float64) for g in grads)
    bound = len(grads) * 0.5 * 2.0 ** -result.shift
    assert np.abs(result.sum - true).max() <= bound


def test_float_sum_is_fixed_over_two_to_the_shift():
    grads = sparse_gradients(np.random.default_rng(5), 3, 10_000, 0.3)
    result = codec.simulate_allreduce(grads)
    assert result.sum.dtype == np.float64
    assert np.array_equal(result.sum, result.fixed.astype(np.float64) * 2.0 ** -result.shift)
    assert_within_quantization(result, grads)


@EACH_MODE
def test_int32_input_has_no_shift_and_sums_as_int64(mode, group):
    grads = sparse_gradients(np.random.default_rng(6), 4, 30_000, 0.1, dtype=np.int32)
    result = codec.simulate_allreduce(grads, mode=mode, group=group)
    assert_exact(result, grads)
    assert result.shift is None and result.bytes_per_worker["scale"] == 8  # overflow check and count
    assert result.sum.dtype == np.int64
    assert np.array_equal(result.sum, sum(g.astype(np.int64) for g in grads))
    check_report(result, grads, mode, group)


@EACH_MODE
@pytest.mark.parametrize("workers", [2, 7, 32])
def test_int32_at_the_overflow_bound(mode, group, workers):
    """Every worker at +-floor((2**31 - 1) / N) at the same positions: the extreme sums fit exactly;
    one more unit anywhere is refused by every worker before any gradient data is sent."""
    bound = (2**31 - 1) // workers
    grads = [np.zeros(4099, dtype=np.int32) for _ in range(workers)]
    for g in grads:
        g[::3] = bound
        g[1::3] = -bound
    result = codec.simulate_allreduce(grads, mode=mode, group=group)
    assert_exact(result, grads)
    assert result.fixed[0] == workers * bound and result.fixed[1] == -workers * bound
    check_report(result, grads, mode, group)
    grads[-1][5] = -bound - 1
    with pytest.raises(ValueError, match="could overflow"):
        codec.simulate_allreduce(grads, mode=mode, group=group)


@EACH_MODE
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.int32])
def test_all_zero_input(mode, group, dtype):
    grads = [np.zeros(5000, dtype=dtype) for _ in range(3)]
    result = codec.simulate_allreduce(grads, mode=mode, group=group)
    assert_exact(result, grads)
    assert not result.fixed.any()
    assert "values" not in result.bytes_per_worker and "residual" not in result.bytes_per_worker
    assert "blocks" not in result.bytes_per_worker and "index_fine" not in result.bytes_per_worker
    if result.encoding != "dense":
        assert result.union == 0
    if dtype != np.int32:
        assert result.shift == 30 - codec.EXPONENT_FLOOR - 2
    check_report(result, grads, mode, group)


@EACH_MODE
def test_float16_input(mode, group):
    rng = np.random.default_rng(16)
    grads = sparse_gradients(rng, 6, 12_345, 0.05, dtype=np.float16, magnitudes=(1e-7, 6e4))
    grads[0][7] = np.float16(6.1e-5)  # subnormal float16 beside the normal ones
    result = codec.simulate_allreduce(grads, mode=mode, group=group)
    assert_exact(result, grads)
    assert_within_quantization(result, grads)
    check_report(result, grads, mode, group)


@EACH_MODE
@pytest.mark.parametrize("workers", [1, 32])
def test_one_and_thirty_two_workers(mode, group, workers):
    grads = sparse_gradients(np.random.default_rng(workers), workers, 9_999, 0.02)
    result = codec.simulate_allreduce(grads, mode=mode, group=group)
    assert_exact(result, grads)
    assert len(result.workers) == workers
    assert result.shift == 30 - max(codec.exponent(g) for g in grads) - (workers - 1).bit_length()
    if workers == 1:  # one worker's sum is its own quantized gradient
        assert np.array_equal(result.fixed, codec.quantize(grads[0], result.shift))
    check_report(result, grads, mode, group)


@EACH_MODE
@pytest.mark.parametrize("length", [1, 2, 31, 33, 255, 257, 1023, 1025, 10_007, 65_537])
def test_lengths_that_are_multiples_of_nothing(mode, group, length):
    grads = sparse_gradients(np.random.default_rng(length), 3, length, 0.3)
    grads[0][-1] = 2.5  # the partial last word, group, block and sketch block are used
    result = codec.simulate_allreduce(grads, mode=mode, group=group)
    assert_exact(result, grads)
    check_report(result, grads, mode, group)


@EACH_MODE
def test_shapes_are_kept(mode, group):
    grads = [g.reshape(100, 70) for g in sparse_gradients(np.random.default_rng(7), 2, 7000, 0.1)]
    result = codec.simulate_allreduce(grads, mode=mode, group=group)
    assert result.fixed.shape == (100, 70) and result.sum.shape == (100, 70)
    assert_exact(result, grads)
    check_report(result, grads, mode, group)


@EACH_MODE
def test_every_worker_decodes_the_same_bits(mode, group):
    grads = sparse_gradients(np.random.default_rng(11), 6, 40_000, 0.05)
    result = codec.simulate_allreduce(grads, mode=mode, group=group)
    for r in result.workers[1:]:
        assert np.array_equal(r.fixed, result.fixed)
    assert dense_fixed_sum(grads, result.shift).dtype == np.int32
    check_report(result, grads, mode, group)


def test_sketch_cells_wrap_like_the_switch():
    """Many large values in one cell overflow int32 mid-sketch and peeling stalls: the residual
    carries the core and the decode is exact modulo 2**32."""
    rng = np.random.default_rng(8)
    grads = [np.zeros(LANES * 64, dtype=np.int32) for _ in range(2)]
    for g in grads:
        g[::LANES] = rng.integers(2**29, 2**30 - 1, size=64)  # lane 0 of every block: cells overflow
    result = codec.simulate_allreduce(grads, mode="sketch", group=1, cells_per_element=0.5)
    assert result.encoding == "sketch" and result.residual > 0
    assert np.abs(dense_fixed_sum(grads, None).astype(np.int64)).max() >= 2**30  # sums beside the wrap
    assert_exact(result, grads)
    check_report(result, grads, "sketch", 1)


@given(st.integers(0, 2**32 - 1), st.integers(0, 60))
def test_float32_quantizer_matches_float64_arithmetic(seed, coarser):
    """Scaling float32 in float32 rounds exactly as scaling in float64 would: ties, subnormals, all."""
    rng = np.random.default_rng(seed)
    exps = rng.integers(-152, 1, size=4000)
    g = np.ldexp(rng.uniform(0.5, 1.0, size=4000), exps).astype(np.float32)
    g *= rng.choice(np.array([-1, 1], dtype=np.float32), size=g.size)
    shift = codec.shift_for(codec.exponent(g), 1) - coarser
    g[:500] = ((2 * rng.integers(0, 2**20, size=500) + 1) * 2.0 ** (-shift - 1)).astype(np.float32)  # exact ties
    expected = np.rint(np.ldexp(g.astype(np.float64), shift)).astype(np.int32)
    assert np.array_equal(codec.quantize(g, shift), expected)
    assert np.any(np.abs(g) < 2.0**-126)  # subnormals are in the mix


# -- what auto picks ----------------------------------------------------------------


def test_auto_picks_an_index_encoding_for_a_very_sparse_union():
    d = 1_000_003
    grads = sparse_gradients(np.random.default_rng(22), 8, d, 1e-4)
    result = codec.simulate_allreduce(grads)
    assert_exact(result, grads)
    assert result.encoding in ("aligned", "sketch")
    assert result.union == union_mask(grads).sum()
    assert result.bytes_per_worker["total"] < 0.2 * 4 * d
    check_report(result, grads, "auto", 0)
    aligned = codec.simulate_allreduce(grads, mode="aligned", group=1)
    assert aligned.bytes_per_worker["values"] == 4 * aligned.union
    assert aligned.bytes_per_worker["index"] == 4 * words(d)
    assert np.array_equal(aligned.fixed, result.fixed)


def test_auto_picks_dense_for_a_full_tensor():
    d = 100_003
    rng = np.random.default_rng(23)
    grads = [(rng.standard_normal(d) + 8).astype(np.float32) for _ in range(4)]
    assert union_mask(grads).all()
    result = codec.simulate_allreduce(grads)
    assert_exact(result, grads)
    assert result.encoding == "dense" and result.union is None
    assert result.bytes_per_worker == {"check": 8, "scale": 8, "stats": 44, "dense": 4 * d,
                                       "total": 60 + 4 * d}
    assert result.workers[0].estimate.union == d


def test_auto_picks_dense_when_one_worker_is_full():
    """max nnz bounds |U| from below: one dense worker makes every index too dear."""
    grads = sparse_gradients(np.random.default_rng(24), 4, 50_000, 0.001)
    grads[2] = (np.random.default_rng(25).standard_normal(50_000) + 8).astype(np.float32)
    result = codec.simulate_allreduce(grads)
    assert_exact(result, grads)
    assert result.encoding == "dense" and result.workers[0].estimate.max_nnz == 50_000


@pytest.mark.parametrize("support", ["identical", "independent"])
def test_auto_sends_about_the_union_for_whole_nonzero_blocks(support):
    """Whole 256-element blocks non-zero: blocks (or aligned) wins, and the value words sent are the
    union's, not the tensor's."""
    rng = np.random.default_rng(26)
    d, nblocks = 256 * 2000 + 77, 2001
    chosen = rng.choice(nblocks - 1, 60, replace=False)
    grads = []
    for _ in range(4):
        g = np.zeros(d, dtype=np.float32)
        for b in (chosen if support == "identical" else rng.choice(nblocks - 1, 60, replace=False)):
            g[b * 256 : (b + 1) * 256] = rng.standard_normal(256) + 8
        grads.append(g)
    u = union_mask(grads).sum()
    assert u % 256 == 0
    result = codec.simulate_allreduce(grads)
    assert_exact(result, grads)
    assert result.encoding in ("blocks", "aligned")
    b = result.bytes_per_worker
    assert b.get("blocks", 0) + b.get("values", 0) == 4 * u
    assert b["total"] < 4 * u + 4 * words(d) + 60
    check_report(result, grads, "auto", 0)


def test_auto_chooses_alike_on_every_worker_from_the_aggregate_only():
    """Workers with very different own densities still run one plan (the choice reads only the
    scale round's aggregate)."""
    rng = np.random.default_rng(27)
    grads = sparse_gradients(rng, 5, 80_000, 0.001)
    grads[0] = sparse_gradients(rng, 1, 80_000, 0.3)[0]
    result = codec.simulate_allreduce(grads)
    assert_exact(result, grads)
    assert len({(r.encoding, r.group, r.estimate) for r in result.workers}) == 1
    check_report(result, grads, "auto", 0)


@pytest.mark.parametrize("length,density", [(10_000, 1e-3), (100_003, 1e-3), (1_000_003, 1e-4)])
def test_auto_never_picks_an_encoding_that_aligned_beats_on_rounds_and_bytes(length, density):
    """Small unions get sketches of R = 1 or 2, whose lanes almost surely hold an unpeelable pair:
    the cost model charges that residual round (auto.residual_chance), so it does not pick them."""
    grads = sparse_gradients(np.random.default_rng(22), 8, length, density)
    chosen = codec.simulate_allreduce(grads)
    aligned = codec.simulate_allreduce(grads, mode="aligned", group=chosen.group or 1)
    assert_exact(chosen, grads)
    dominated = (chosen.workers[0].rounds >= aligned.workers[0].rounds
                 and chosen.bytes_per_worker["total"] > aligned.bytes_per_worker["total"])
    assert not dominated, (f"auto chose {chosen.encoding} (|U| {chosen.union}, R {chosen.rows}, residual "
                           f"{chosen.residual}): {chosen.workers[0].rounds} rounds, "
                           f"{chosen.bytes_per_worker['total']} bytes; aligned: {aligned.workers[0].rounds} "
                           f"rounds, {aligned.bytes_per_worker['total']} bytes")


# -- the two-level index ----------------------------------------------------------------


@pytest.mark.parametrize("group", GROUP_SIZES[1:])
@pytest.mark.parametrize("length,density", [(10_007, 0.003), (3 * 1024 + 5, 0.05), (70_001, 0.0005)])
def test_two_level_index_is_exact_and_sends_the_group_bitmap(group, length, density):
    assert length % group
    grads = sparse_gradients(np.random.default_rng(group), 4, length, density)
    grads[1][-1] = -3.0  # the partial last group is in the union
    result = codec.simulate_allreduce(grads, mode="aligned", group=group)
    assert_exact(result, grads)
    assert result.encoding == "aligned" and result.group == group
    u = union_mask(grads)
    assert result.union == u.sum()
    ngroups = -(-length // group)
    b = result.bytes_per_worker
    assert b["index_coarse"] == 4 * words(ngroups)
    union_groups = np.unique(np.flatnonzero(u) // group).size
    assert b["index_fine"] == 4 * words(union_groups * group)
    assert b["values"] == 4 * u.sum() and "index" not in b
    assert result.workers[0].rounds == 4
    check_report(result, grads, "aligned", group)


@pytest.mark.parametrize("group", [2, 32, 1024])
def test_two_level_index_with_an_empty_union_stops_after_the_groups(group):
    grads = [np.zeros(3001, dtype=np.float32) for _ in range(2)]
    for mode in ("aligned", "sketch"):
        result = codec.simulate_allreduce(grads, mode=mode, group=group)
        assert_exact(result, grads)
        assert result.union == 0 and result.workers[0].rounds == 2
        assert set(result.bytes_per_worker) == {"check", "scale", "stats", "index_coarse", "total"}


def group_mask(mask, group):
    pad = np.zeros(-(-mask.size // group) * group, dtype=bool)
    pad[: mask.size] = mask
    return pad.reshape(-1, group).any(axis=1)


def pack(bits):
    """bool array -> uint32 words, bit i = bit (i % 32) of word i // 32."""
    return bitmap.from_positions(np.flatnonzero(bits), max(bits.size, 1))[: words(bits.size)]


@st.composite
def bitmaps(draw):
    length = draw(st.one_of(st.integers(1, 100), st.integers(1, 5000)))
    group = draw(st.sampled_from(GROUP_SIZES[1:]))
    density = draw(st.sampled_from([0.0, 0.001, 0.01, 0.1, 0.5, 1.0]))
    seed = draw(st.integers(0, 2**32 - 1))
    return length, group, density, seed


# Both ways the bitmap kernels build the group bitmaps and the fine stream: 64 elements per pext/pdep
# (where the CPU has them fast) and one group at a time (everywhere else, and for sparse unions).
BIT_EXTRACT = [pytest.param(True, id="pext", marks=pytest.mark.skipif(
                   not bitmap.FAST_BIT_EXTRACT, reason="this CPU has no fast pext/pdep")),
               pytest.param(False, id="by-group")]


@contextlib.contextmanager
def bit_extract(fast):
    saved = bitmap.FAST_BIT_EXTRACT
    bitmap.FAST_BIT_EXTRACT = fast
    try:
        yield
    finally:
        bitmap.FAST_BIT_EXTRACT = saved


@pytest.mark.parametrize("fast", BIT_EXTRACT)
@settings(max_examples=150)
@given(bitmaps())
def test_bitmap_coarse_fine_expand_match_numpy(fast, case):
    with bit_extract(fast):
        check_coarse_fine_expand(*case)


def check_coarse_fine_expand(length, group, density, seed):
    rng = np.random.default_rng(seed)
    mask, own = random_bitmap(rng, length, density)
    ngroups = -(-length // group)

    assert np.array_equal(bitmap.positions(own), np.flatnonzero(mask))
    assert bitmap.count(own) == mask.sum()
    groups = group_mask(mask, group)
    coarse = bitmap.coarse(own, length, group)
    assert coarse.dtype == np.uint32 and coarse.size == words(ngroups)
    assert np.array_equal(coarse, pack(groups))

    # a group union: this worker's groups and some others (as other workers would add); sparse and
    # dense unions take the kernels' two ways where the CPU has pext
    union_groups = groups | (rng.random(ngroups) < rng.choice([0.0, 0.02, 0.2, 1.0]))
    chosen = np.flatnonzero(union_groups)
    fine = bitmap.fine(own, pack(union_groups), length, group, chosen.size)
    padded = np.zeros(ngroups * group, dtype=bool)
    padded[:length] = mask
    stream = np.concatenate([padded[g * group : (g + 1) * group] for g in chosen]) if chosen.size else \
        np.zeros(0, dtype=bool)
    assert fine.size == words(chosen.size * group)
    assert np.array_equal(fine, pack(stream))

    # OR in another worker's bits within the same groups, then expand both levels
    other = np.zeros_like(padded)
    for g in chosen:
        other[g * group : (g + 1) * group] = rng.random(group) < 0.3
    other[length:] = False
    other_mask = other[:length]
    union_fine = fine | bitmap.fine(bitmap.from_positions(np.flatnonzero(other_mask), length),
                                    pack(union_groups), length, group, chosen.size)
    expanded, size = bitmap.expand(pack(union_groups), union_fine, length, group)
    assert np.array_equal(expanded, pack(mask | other_mask)) and size == (mask | other_mask).sum()


@settings(max_examples=100)
@given(bitmaps())
def test_bitmap_group_counts_match_numpy(case):
    length, _, density, seed = case
    mask, own = random_bitmap(np.random.default_rng(seed), length, density)
    expected = [group_mask(mask, g).sum() for g in GROUP_SIZES]
    assert bitmap.group_counts(own).tolist() == expected


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
@pytest.mark.parametrize("length", [1, 31, 32, 33, 63, 64, 65, 10_007])
@pytest.mark.parametrize("density", [0.0, 0.01, 0.3, 1.0])
def test_bitmap_scan_matches_numpy(dtype, length, density):
    """Support bitmap of g != 0 and the non-zeros in order; -0.0 is zero, NaN is not.  Words with none,
    one and many non-zeros, the last element alone, and -0.0 everywhere a non-zero could be."""
    rng = np.random.default_rng(length)
    g = np.where(rng.random(length) < density, rng.integers(1, 10, size=length) * rng.choice([-1, 1], length), 0)
    g = g.astype(dtype)
    if dtype != np.int32:
        g[(g == 0) & (rng.random(length) < 0.5)] = -0.0
        if length > 5 and density:
            g[5] = np.nan
    if density == 0.01:
        g[-1] = 7  # a lone non-zero in the last, partial word
    out = np.empty(words(length), dtype=np.uint32)
    compact = np.full(length, 99, dtype=dtype)
    nnz = bitmap.scan(g, out, compact)
    nonzero = ~(g == 0)
    assert nnz == nonzero.sum()
    assert np.array_equal(out, pack(nonzero))
    assert np.array_equal(compact[:nnz], g[nonzero], equal_nan=dtype != np.int32)


@pytest.mark.parametrize("length", [1, 32, 33, 1000, 4097])
@pytest.mark.parametrize("union_density,own_share", [(0.0, 0.0), (0.005, 0.5), (0.05, 0.0), (0.05, 0.5),
                                                      (0.3, 1.0), (0.9, 0.5), (1.0, 1.0)])
def test_values_gather_and_scatter_match_numpy(length, union_density, own_share):
    """values.gather (this worker's values at the union's bits) and values.scatter (the sum back into
    place) against numpy: empty and full unions and owns, words with more than four bits, the last word
    alone, and both of scatter's ways (a sparse union zeroes first; a denser one writes each word once)."""
    rng = np.random.default_rng(length + int(union_density * 1000))
    union_mask = rng.random(length) < union_density
    own_mask = union_mask & (rng.random(length) < own_share)
    union, own = pack(union_mask), pack(own_mask)
    mine = rng.integers(-2**31, 2**31, size=int(own_mask.sum()), dtype=np.int64).astype(np.int32)
    out = np.full(int(union_mask.sum()) + 1, 12345, dtype=np.int32)
    expected = np.zeros(length, dtype=np.int32)
    expected[own_mask] = mine
    assert np.array_equal(values.gather(union, own, mine, out), expected[union_mask])

    summed = rng.integers(-2**31, 2**31, size=int(union_mask.sum()), dtype=np.int64).astype(np.int32)
    dense = np.full(length, -7, dtype=np.int32)
    values.scatter(union, summed, dense)
    expected = np.zeros(length, dtype=np.int32)
    expected[union_mask] = summed
    assert np.array_equal(dense, expected)
    with pytest.raises(ValueError, match="values for a bitmap"):
        values.scatter(union, np.append(summed, 1).astype(np.int32), dense)


@pytest.mark.parametrize("length", [1, 255, 256, 257, 5000])
@pytest.mark.parametrize("density", [0.0, 0.002, 0.5])
def test_values_group_gather_and_scatter_match_numpy(length, density):
    """The blocks encoding's kernels: every element of the union's groups (zeros past the tensor's end,
    a partial last group included), and back, with zeros between the groups."""
    rng = np.random.default_rng(length)
    g = np.where(rng.random(length) < density, rng.standard_normal(length), 0).astype(np.float32)
    if length > 1:
        g[-1] = 0.5
    chosen = group_mask(g != 0, 256)
    coarse = pack(chosen)
    out = np.empty(chosen.sum() * 256, dtype=np.int32)
    padded = np.zeros(chosen.size * 256, dtype=np.int32)
    padded[:length] = codec.quantize(g, 20)
    expected = padded.reshape(-1, 256)[chosen].reshape(-1)
    assert np.array_equal(values.gather_groups(g, coarse, 256, 20, out), expected)

    back = np.full(length, -7, dtype=np.int32)
    values.scatter_groups(coarse, 256, expected, back)
    assert np.array_equal(back, np.where(np.repeat(chosen, 256)[:length], padded[:length], 0))
    with pytest.raises(ValueError, match="values for"):
        values.scatter_groups(coarse, 256, np.append(expected, 0).astype(np.int32), back)


def test_bitmap_refuses_bits_past_the_tensor():
    length, group = 100, 8  # 13 groups, the last one holds 4 elements
    own = bitmap.from_positions(np.array([99]), length)
    union_groups = bitmap.coarse(own, length, group)
    with pytest.raises(ValueError, match="groups beyond length"):
        bitmap.fine(own, union_groups | np.uint32(1 << 13), length, group, 2)
    fine = bitmap.fine(own, union_groups, length, group, 1)
    assert fine.tolist() == [1 << 3]
    with pytest.raises(ValueError, match="beyond length 100"):
        bitmap.expand(union_groups, fine | np.uint32(1 << 5), length, group)  # element 101


@pytest.mark.parametrize("mode", codec.MODES)
@pytest.mark.parametrize("dtype", [">f4", ">f8", ">f2", ">i4"])
def test_big_endian_input_is_exact(mode, dtype):
    native = sparse_gradients(np.random.default_rng(31), 3, 20_011, 0.02, dtype=np.dtype(dtype).newbyteorder("="))
    grads = [g.astype(dtype) for g in native]
    result = codec.simulate_allreduce(grads, mode=mode)
    assert_exact(result, native)


def test_workers_results_do_not_share_memory():
    grads = sparse_gradients(np.random.default_rng(32), 3, 5_000, 1.0)
    result = codec.simulate_allreduce(grads, mode="dense")
    a, b = result.workers[0].fixed, result.workers[1].fixed
    assert not np.shares_memory(a, b) and not np.shares_memory(a, result.aggregates[-1])
