"""MurmurHash3_x86_32: the reference value, and agreement with an independent implementation."""

import struct

import mmh3
import numpy as np
import pytest

from hina.codec.murmur import block_hashes, murmur3_32


def test_reference_value():
    assert int(murmur3_32(0, seed=0)) == 0x2362F9DE


@pytest.mark.parametrize("seed", [0, 1, 2, 0xDEADBEEF, 0xFFFFFFFF])
def test_matches_mmh3(seed):
    rng = np.random.default_rng(seed & 0xFFFF)
    keys = np.concatenate([np.arange(300), rng.integers(0, 2**32, 700), [2**32 - 1]]).astype(np.uint32)
    expected = [mmh3.hash(struct.pack("<I", int(k)), seed, signed=False) for k in keys]
    assert murmur3_32(keys, seed).tolist() == expected


def test_scalar_and_array_agree():
    assert int(murmur3_32(12345, 7)) == int(murmur3_32(np.array([12345], dtype=np.uint32), 7)[0])


def test_block_hashes_are_cached_and_read_only():
    h = block_hashes(10, (0, 1, 2))
    assert h.shape == (3, 10)
    assert h is block_hashes(10, (0, 1, 2))
    assert int(h[0, 0]) == 0x2362F9DE
    with pytest.raises(ValueError):
        h[0, 0] = 1


@pytest.mark.parametrize("bad", [-1, 2**32])
def test_rejects_keys_and_seeds_outside_uint32(bad):
    with pytest.raises(ValueError, match="uint32"):
        murmur3_32(np.array([bad]), 0)
    with pytest.raises(ValueError, match="seed"):
        murmur3_32(0, bad)
