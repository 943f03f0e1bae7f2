"""Phase 2, index (OR): the support bitmap, 32 elements per word.

Element i is bit (i % 32) of word i // 32.  The switch ORs the workers'
bitmaps, so every worker ends up with the union support U exactly: it is a
bitmap, not a Bloom filter, so there are no false positives.
"""

from __future__ import annotations

import numpy as np


def support_words(indices: np.ndarray, length: int) -> np.ndarray:
    """Pack the (sorted or not) non-zero positions into ceil(length/32) int32 words."""
    nwords = -(-length // 32)
    bits = np.zeros(nwords * 32, dtype=np.bool_)
    bits[indices] = True
    return np.packbits(bits, bitorder="little").view("<i4")


def support_words_dense(nonzero: np.ndarray) -> np.ndarray:
    """The same words from a boolean mask of the whole tensor (no index list needed)."""
    nwords = -(-nonzero.size // 32)
    if nonzero.size != nwords * 32:
        nonzero = np.concatenate([nonzero, np.zeros(nwords * 32 - nonzero.size, dtype=np.bool_)])
    return np.packbits(nonzero, bitorder="little").view("<i4")


def union_indices(words: np.ndarray, length: int) -> np.ndarray:
    """Unpack an aggregated bitmap into the sorted union positions.

    Raises if a bit beyond `length` is set: that bitmap did not come from
    workers of this job.
    """
    words = np.asarray(words)
    nwords = -(-length // 32)
    if words.shape != (nwords,):
        raise ValueError(f"index phase: expected {nwords} words for length {length}, got {words.shape[0]}")
    raw = np.ascontiguousarray(words, dtype="<i4").view(np.uint8)
    bits = np.unpackbits(raw, bitorder="little").view(np.bool_)
    if bits[length:].any():
        raise ValueError(f"index phase: union bitmap has bits set beyond length {length}")
    return np.flatnonzero(bits[:length])
