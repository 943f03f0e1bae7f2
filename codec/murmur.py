"""MurmurHash3_x86_32 of 4-byte little-endian keys, vectorized in numpy.

The sketch picks a row and a sign per block from murmur3 of the uint32 block
number (docs/design.md, "The encodings").  Every worker, and anything else that has to
agree with them, must compute the same bits, so this is the reference
algorithm (Austin Appleby's MurmurHash3_x86_32) specialised to one 4-byte
block and no tail: murmur3(key 0, seed 0) == 0x2362f9de.
"""

from __future__ import annotations

import functools

import numpy as np

_C1 = np.uint32(0xCC9E2D51)
_C2 = np.uint32(0x1B873593)
_M = np.uint32(5)
_N = np.uint32(0xE6546B64)
_F1 = np.uint32(0x85EBCA6B)
_F2 = np.uint32(0xC2B2AE35)
_KEY_BYTES = np.uint32(4)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def murmur3_32(keys: np.ndarray | int, seed: int) -> np.ndarray:
    """Hash each uint32 key (as 4 little-endian bytes) under `seed`.

    Returns a uint32 array shaped like `keys`.  uint32 arithmetic in numpy
    wraps modulo 2**32, which is exactly the C algorithm's arithmetic.
    """
    if not 0 <= int(seed) <= 0xFFFFFFFF:
        raise ValueError(f"seed must be a uint32, got {seed}")
    k = np.asarray(keys)
    if k.dtype != np.uint32:
        if k.size and (k.min() < 0 or k.max() > 0xFFFFFFFF):
            raise ValueError("murmur3_32 keys must fit in uint32")
        k = k.astype(np.uint32)
    with np.errstate(over="ignore"):  # 0-d inputs are numpy scalars, which warn on wrap
        k = k * _C1
        k = _rotl(k, 15)
        k = k * _C2
        h = np.uint32(seed) ^ k
        h = _rotl(h, 13)
        h = h * _M + _N
        h = h ^ _KEY_BYTES
        h = h ^ (h >> np.uint32(16))
        h = h * _F1
        h = h ^ (h >> np.uint32(13))
        h = h * _F2
        h = h ^ (h >> np.uint32(16))
    return h


@functools.lru_cache(maxsize=16)
def block_hashes(nblocks: int, seeds: tuple[int, ...]) -> np.ndarray:
    """murmur3 of block numbers 0..nblocks-1 under each seed: shape (len(seeds), nblocks).

    Cached and read-only: the same job hashes the same blocks in every phase
    and every step.
    """
    blocks = np.arange(nblocks, dtype=np.uint32)
    out = np.stack([murmur3_32(blocks, s) for s in seeds])
    out.flags.writeable = False
    return out
