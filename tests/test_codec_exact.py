"""Bit-exactness of the codec: `fixed` is the dense sum of the quantized arrays, for every input."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import codec
from helpers import SUPPORTS, assert_exact, dense_fixed_sum, sparse_gradients

LANES = 1024


@st.composite
def jobs(draw):
    workers = draw(st.integers(1, 32))
    length = draw(st.one_of(st.integers(1, 3000), st.integers(1, 200_000)))
    density = draw(st.one_of(st.sampled_from([0.0, 0.001, 0.01, 0.05, 0.2, 0.5, 1.0]), st.floats(0, 1)))
    support = draw(st.sampled_from(SUPPORTS))
    dtype = draw(st.sampled_from([np.float16, np.float32, np.float64, np.int32]))
    cancel = draw(st.booleans())
    seed = draw(st.integers(0, 2**32 - 1))
    return workers, length, density, support, dtype, cancel, seed


@settings(max_examples=200)
@given(jobs())
def test_exact_for_random_jobs(job):
    workers, length, density, support, dtype, cancel, seed = job
    rng = np.random.default_rng(seed)
    grads = sparse_gradients(rng, workers, length, density, support=support, dtype=dtype, cancel=cancel)
    result = codec.simulate_allreduce(grads)
    assert_exact(result, grads)
    assert result.shift is None if dtype == np.int32 else isinstance(result.shift, int)


@pytest.mark.parametrize("support", SUPPORTS)
@pytest.mark.parametrize("workers,length,density", [(2, 200_000 - 1, 0.05), (8, 123_457, 0.01), (32, 50_001, 0.2)])
def test_exact_for_each_support_pattern(support, workers, length, density):
    assert length % LANES != 0
    grads = sparse_gradients(np.random.default_rng(workers), workers, length, density, support=support)
    result = codec.simulate_allreduce(grads)
    assert_exact(result, grads)
    assert result.union > 0
    assert ("sketch" in result.bytes_per_worker) != result.workers[0].fell_back


def test_values_that_cancel_are_exact_zero():
    rng = np.random.default_rng(3)
    grads = sparse_gradients(rng, 4, 70_001, 0.1, cancel=True)
    result = codec.simulate_allreduce(grads)
    assert_exact(result, grads)
    assert not result.fixed.any() and not result.sum.any()
    assert result.union > 0  # the union still holds them: cancellation is decoded, not assumed


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_extreme_magnitudes_in_one_tensor(dtype):
    rng = np.random.default_rng(4)
    grads = sparse_gradients(rng, 5, 100_003, 0.05, dtype=dtype, magnitudes=(1e-30, 1e30))
    result = codec.simulate_allreduce(grads)
    assert_exact(result, grads)
    biggest = max(np.abs(g.astype(np.float64)).max() for g in grads)
    assert result.shift == 30 - int(np.frexp(biggest)[1]) - 3
    assert_within_quantization(result, grads)


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


def test_int32_input_has_no_shift_and_sums_as_int64():
    grads = sparse_gradients(np.random.default_rng(6), 4, 30_000, 0.1, dtype=np.int32)
    result = codec.simulate_allreduce(grads)
    assert_exact(result, grads)
    assert result.shift is None and result.bytes_per_worker["scale"] == 8  # overflow check and count
    assert result.sum.dtype == np.int64
    assert np.array_equal(result.sum, sum(g.astype(np.int64) for g in grads))


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_all_zero_input(dtype):
    grads = [np.zeros(5000, dtype=dtype) for _ in range(3)]
    result = codec.simulate_allreduce(grads)
    assert_exact(result, grads)
    assert result.union == 0 and "sketch" not in result.bytes_per_worker
    if dtype == np.float32:
        assert result.shift == 30 - codec.EXPONENT_FLOOR - 2


def test_shapes_are_kept():
    grads = [g.reshape(100, 70) for g in sparse_gradients(np.random.default_rng(7), 2, 7000, 0.1)]
    result = codec.simulate_allreduce(grads)
    assert result.fixed.shape == (100, 70) and result.sum.shape == (100, 70)
    assert_exact(result, grads)


def test_sketch_cells_wrap_like_the_switch():
    """Many large values in one cell overflow int32 mid-sketch; the decode is exact modulo 2**32."""
    rng = np.random.default_rng(8)
    grads = [np.zeros(LANES * 64, dtype=np.int32) for _ in range(2)]
    for g in grads:
        g[::LANES] = rng.integers(2**29, 2**30 - 1, size=64)  # lane 0 of every block: cells overflow
    result = codec.simulate_allreduce(grads, cells_per_element=0.5)
    assert_exact(result, grads)


def test_dense_mode_is_exact_and_sends_every_element():
    grads = sparse_gradients(np.random.default_rng(9), 4, 12_345, 0.01)
    result = codec.simulate_allreduce(grads, mode="dense")
    assert_exact(result, grads)
    assert result.bytes_per_worker == {"check": 8, "scale": 8, "dense": 4 * 12_345, "total": 16 + 4 * 12_345}
    assert result.union is None


def test_bytes_per_worker_follow_the_layout():
    grads = sparse_gradients(np.random.default_rng(10), 8, 100_000, 0.01)
    result = codec.simulate_allreduce(grads)
    b = result.bytes_per_worker
    assert b["check"] == 8 and b["scale"] == 8
    assert b["index"] == 4 * -(-100_000 // 32)
    assert b["sketch"] == 12 * result.rows * LANES
    assert b.get("residual", 0) == 4 * result.residual
    assert b["total"] == sum(v for k, v in b.items() if k != "total")


def test_every_worker_decodes_the_same_bits():
    grads = sparse_gradients(np.random.default_rng(11), 6, 40_000, 0.05)
    result = codec.simulate_allreduce(grads)
    for r in result.workers[1:]:
        assert np.array_equal(r.fixed, result.fixed)
    assert dense_fixed_sum(grads, result.shift).dtype == np.int32


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


def test_dense_union_falls_back_to_a_dense_add():
    grads = sparse_gradients(np.random.default_rng(21), 8, 100_003, 0.3)  # union ~94%
    result = codec.simulate_allreduce(grads)
    assert_exact(result, grads)
    assert all(w.fell_back for w in result.workers)
    b = result.bytes_per_worker
    assert set(b) == {"check", "scale", "index", "dense", "total"} and b["dense"] == 4 * 100_003
    assert b["total"] == 8 + 8 + 4 * -(-100_003 // 32) + 4 * 100_003  # never more than dense + the index
    assert result.union == np.count_nonzero(np.any(np.stack(grads) != 0, axis=0))


def test_dense_workers_skip_the_index_and_go_dense_at_once():
    """One worker at 80% already bounds the union: the sketch cannot pay, nobody sends an index."""
    grads = sparse_gradients(np.random.default_rng(24), 4, 50_000, 0.02)
    grads[2] = np.random.default_rng(25).standard_normal(50_000).astype(np.float32)
    grads[2][::5] = 0
    result = codec.simulate_allreduce(grads)
    assert_exact(result, grads)
    assert set(result.bytes_per_worker) == {"check", "scale", "dense", "total"}
    assert all(w.fell_back for w in result.workers) and result.union is None


def test_max_union_moves_the_fall_back_threshold():
    """A 7.7% union keeps the sketch by the byte rule; with max_union below it, everyone goes dense
    after the index phase, and with max_union below one worker's own density, before it."""
    grads = sparse_gradients(np.random.default_rng(26), 8, 100_003, 0.01)
    kept = codec.simulate_allreduce(grads)
    assert not kept.workers[0].fell_back and 0.06 < kept.union / 100_003 < 0.09
    after_index = codec.simulate_allreduce(grads, max_union=0.05)
    assert_exact(after_index, grads)
    assert all(w.fell_back for w in after_index.workers) and after_index.union == kept.union
    assert set(after_index.bytes_per_worker) == {"check", "scale", "index", "dense", "total"}
    at_once = codec.simulate_allreduce(grads, max_union=0.005)
    assert_exact(at_once, grads)
    assert all(w.fell_back for w in at_once.workers) and at_once.union is None
    assert set(at_once.bytes_per_worker) == {"check", "scale", "dense", "total"}
    assert np.array_equal(at_once.fixed, kept.fixed) and np.array_equal(after_index.fixed, kept.fixed)


def test_sparse_union_keeps_the_sketch():
    grads = sparse_gradients(np.random.default_rng(22), 8, 100_003, 0.01)
    result = codec.simulate_allreduce(grads)
    assert not result.workers[0].fell_back and "sketch" in result.bytes_per_worker
    assert result.bytes_per_worker["total"] < 0.5 * 4 * 100_003


@pytest.mark.parametrize("support", SUPPORTS)
def test_blocks_mode_is_exact_and_sends_only_union_blocks(support):
    grads = sparse_gradients(np.random.default_rng(23), 4, 70_001, 0.002, support=support)
    result = codec.simulate_allreduce(grads, mode="blocks")
    assert_exact(result, grads)
    nonzero_blocks = np.unique(np.concatenate([np.flatnonzero(g) // 256 for g in grads]))
    b = result.bytes_per_worker
    assert b["blocks"] == 4 * 256 * nonzero_blocks.size
    blocks = -(-70_001 // 256)
    assert b["block_index"] == 4 * -(-blocks // 32)
    assert result.union == 256 * nonzero_blocks.size


@pytest.mark.parametrize("length", [1, 31, 32, 33, 10_007])
def test_support_bitmap_from_a_mask_equals_the_one_from_indices(length):
    from codec import index

    mask = np.random.default_rng(length).random(length) < 0.3
    assert np.array_equal(index.support_words_dense(mask), index.support_words(np.flatnonzero(mask), length))


def test_dense_enough_workers_still_use_the_sketch_when_the_union_allows():
    """15% per worker (whole-array kernels), union ~28%: the sketch path, exact."""
    grads = sparse_gradients(np.random.default_rng(26), 2, 400_000, 0.15)
    result = codec.simulate_allreduce(grads)
    assert_exact(result, grads)
    assert "sketch" in result.bytes_per_worker and not result.workers[0].fell_back
