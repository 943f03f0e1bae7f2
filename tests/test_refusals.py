"""Bad input is refused with a clear ValueError before anything is sent."""

import numpy as np
import pytest

import codec


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
