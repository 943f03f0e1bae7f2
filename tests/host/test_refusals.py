"""Bad input is refused with a clear ValueError before anything is sent."""

import numpy as np
import pytest

from hina import codec


def grads(n=3, d=100, dtype=np.float32):
    return [np.ones(d, dtype=dtype) for _ in range(n)]


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_non_finite(bad, dtype):
    g = grads(dtype=dtype)
    g[1][37] = bad
    with pytest.raises(ValueError, match=r"worker 1's gradient holds a non-finite value .* at flat index 37"):
        codec.simulate_allreduce(g)


def test_different_lengths():
    g = grads()
    g[2] = np.ones(99, dtype=np.float32)
    with pytest.raises(ValueError, match="different shapes"):
        codec.simulate_allreduce(g)


def test_different_dtypes():
    g = grads()
    g[0] = g[0].astype(np.float64)
    with pytest.raises(ValueError, match="different dtypes"):
        codec.simulate_allreduce(g)


def test_empty_list():
    with pytest.raises(ValueError, match="no gradients"):
        codec.simulate_allreduce([])


def test_empty_gradient():
    with pytest.raises(ValueError, match="empty"):
        codec.simulate_allreduce([np.zeros(0, dtype=np.float32)])


@pytest.mark.parametrize("dtype", [np.int64, np.uint32, np.int16, np.complex64, np.bool_])
def test_unsupported_dtype(dtype):
    with pytest.raises(ValueError, match="unsupported dtype"):
        codec.simulate_allreduce(grads(dtype=dtype))


def test_more_than_32_workers():
    with pytest.raises(ValueError, match="at most 32"):
        codec.simulate_allreduce(grads(n=33))


def test_single_array_instead_of_a_list():
    with pytest.raises(ValueError, match="one gradient per worker"):
        codec.simulate_allreduce(np.ones((2, 10), dtype=np.float32))


def test_quantize_needs_the_right_shift():
    with pytest.raises(ValueError, match="needs the shift"):
        codec.quantize(np.ones(3, dtype=np.float32), None)
    with pytest.raises(ValueError, match="already fixed point"):
        codec.quantize(np.ones(3, dtype=np.int32), 3)
    with pytest.raises(ValueError, match="overflows int32"):
        codec.quantize(np.ones(3, dtype=np.float32), 31)


def test_int32_sum_that_could_overflow_is_refused_before_any_data():
    a = np.zeros(1000, dtype=np.int32)
    b = np.zeros(1000, dtype=np.int32)
    a[5], b[900] = 2**30, -(2**30)  # at different positions: the sum would fit, but the bound says it could not
    sessions = [codec.WorkerSession(codec.CodecParams(length=1000, workers=2, dtype="int32"), g) for g in (a, b)]
    sent = []
    with pytest.raises(ValueError, match=r"int32 input could overflow: 2 workers with values up to \|1073741824\|"):
        while True:
            phases = [s.next_phase() for s in sessions]
            sent.append(phases[0].name)
            agg = codec.aggregate_round(phases)
            for s in sessions:
                s.receive(agg)
    assert sent == ["check+scale+stats"]  # refused after the first round: no gradient data left a worker


def test_int32_sums_within_range_are_accepted_at_the_edge():
    n = 3
    edge = (2**31 - 1) // n
    grads = [np.full(10, edge, dtype=np.int32) for _ in range(n)]
    r = codec.simulate_allreduce(grads)
    assert r.fixed.tolist() == [3 * edge] * 10
    single = codec.simulate_allreduce([np.array([-(2**31), 2**31 - 1], dtype=np.int32)])
    assert single.fixed.tolist() == [-(2**31), 2**31 - 1]  # one worker cannot overflow


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("workers", [1, 2, 3, 31, 32])
def test_float_sums_cannot_overflow_even_at_the_largest_magnitudes(dtype, workers):
    """Every worker holds the largest finite value, same sign, same places: |S| <= 2**30 < 2**31."""
    big = np.finfo(dtype).max
    g = np.array([big, -big, np.nextafter(big, 0), big / 3, 0], dtype=dtype)
    result = codec.simulate_allreduce([g.copy() for _ in range(workers)])
    k = (workers - 1).bit_length()
    per_worker = codec.quantize(g, result.shift).astype(np.int64)
    assert np.abs(per_worker).max() <= 2 ** (30 - k)
    assert np.array_equal(result.fixed.astype(np.int64), workers * per_worker)  # no wrap happened
    assert np.abs(result.fixed.astype(np.int64)).max() <= 2**30
    if dtype != np.float64:  # float64 sums this large are beyond float64 itself: `sum` is then +-inf
        assert np.allclose(result.sum, workers * g.astype(np.float64), rtol=2.0 ** (k - 29))
