"""Fixed-point values in and out of bitmaps: the compiled gathers and scatters every encoding uses.

Quantizing is q = rint(g * 2**shift) (round half to even) as int32.  The
kernels compute it in float64, where multiplying a float16/32/64 value by a
power of two is exact, as two factors f1 * f2 so that shifts beyond
float64's exponent range (tiny gradients) stay exact too; int32 input uses
f1 = f2 = 1, which is the identity.  `scale.quantize` is the reference they
match bit for bit.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from hina import kernels

from .bitmap import _count, _ctz, _popcount

# Its kernels compile as this module is imported: one process on a machine compiles them while any
# other waits, then loads them (hina.kernels); finished at the end of the module.
_claim = kernels.hold("codec-values")

_GRADS = ("float32", "float64", "int32")


def _sigs(template: str) -> list[str]:
    return [template.format(g=g) for g in _GRADS]


@njit("int32(float64, float64, float64)", cache=True, inline="always")
def _q(x, f1, f2):
    return np.int32(np.rint(x * f1 * f2))


@njit(_sigs("void({g}[::1], float64, float64, int32[::1])"), cache=True)
def _quantize_all(g, f1, f2, out):
    for i in range(g.size):
        out[i] = _q(np.float64(g[i]), f1, f2)


@njit("int64(uint32[::1], uint32[::1], int32[::1], int32[::1])", cache=True)
def _gather(union, own, mine, out):
    """At every set bit of `union`, in position order: this worker's value where `own` has the
    bit (its quantized non-zeros, in order, are `mine`), else 0.  `own` must lie inside `union`.

    `out` holds one slot past the union's elements.  Zeros first, then each own non-zero goes to its
    rank among the union's bits; a word's first one is stored whether or not there is one (to that
    spare slot if not), so only words with two or more take a branch.
    """
    out[:] = 0
    if mine.size == 0:
        return _count(union)
    # unsigned positions: numba adds no negative-index fix-up to every load and store
    spare = np.uint64(out.size - 1)
    last = np.uint64(mine.size - 1)
    k = np.uint64(0)  # union elements before word w
    j = np.uint64(0)  # own non-zeros before word w
    for w in range(union.size):
        u = union[w]
        o = own[w]
        below = np.uint32((np.uint32(1) << np.uint32(_ctz(np.uint32(o | np.uint32(0x80000000))))) - np.uint32(1))
        out[k + np.uint64(_popcount(np.uint32(u & below))) if o else spare] = mine[min(j, last)]
        j += np.uint64(o != 0)
        o = np.uint32(o & (o - np.uint32(1)))
        while o:
            below = np.uint32((np.uint32(1) << np.uint32(_ctz(o))) - np.uint32(1))
            out[k + np.uint64(_popcount(np.uint32(u & below)))] = mine[min(j, last)]
            j += np.uint64(1)
            o = np.uint32(o & (o - np.uint32(1)))
        k += np.uint64(_popcount(u))
    return np.int64(k)


@njit("void(uint32[::1], int32[::1], int64[::1], int32[::1])", cache=True)
def _own_at(own, mine, positions, out):
    """This worker's value at sorted `positions` (0 where `own` lacks the bit)."""
    rank = 0  # own bits before word w
    w = 0
    for k in range(positions.size):
        p = positions[k]
        while w < (p >> 5):
            rank += _popcount(own[w])
            w += 1
        bit = np.uint32(1) << np.uint32(p & 31)
        out[k] = mine[rank + _popcount(own[w] & (bit - np.uint32(1)))] if own[w] & bit else 0


SPARSE = 3  # fewer than one word in this many holds a union element: zero the output, then store the values


@njit("int64(uint32[::1], int32[::1], int32[::1])", cache=True)
def _scatter(words, values, out):
    """out = values at the set bits of `words` (in order), 0 elsewhere; returns values used.

    Few non-zero words (a sparse or a clustered union): a memset, then one store per set bit.
    Otherwise one pass: each word's 32 slots zeroed, then its first four values stored
    unconditionally (a bit that is not there is bit 32, the next word's first slot, which that word
    zeroes next), the rest (rare) by a loop.
    """
    n = out.size
    if values.size == 0 or n == 0:
        out[:] = 0
        return _count(words)
    last = values.size - 1  # reads stay inside `values` even for a bitmap with more bits (the caller checks)
    busy = 0
    for w in range(words.size):  # vectorized
        busy += np.int64(words[w] != 0)
    if busy * SPARSE < words.size:
        out[:] = 0
        k = 0
        for w in range(words.size):
            x = words[w]
            base = w * 32
            while x:
                out[base + _ctz(x)] = values[min(k, last)]
                x = np.uint32(x & (x - np.uint32(1)))
                k += 1
        return k
    k = 0
    for w in range(words.size - 1):
        x = words[w]
        base = w * 32
        for j in range(32):
            out[base + j] = 0
        kk = k
        for _ in range(4):
            out[base + _ctz(x)] = values[min(kk, last)]
            kk += 1
            x = np.uint32(x & (x - np.uint32(1)))
        while x:
            out[base + _ctz(x)] = values[min(kk, last)]
            kk += 1
            x = np.uint32(x & (x - np.uint32(1)))
        k += _popcount(words[w])
    base = (words.size - 1) * 32  # the last word: no next word to take a stray store
    for j in range(base, n):
        out[j] = 0
    x = words[words.size - 1]
    while x:
        out[base + _ctz(x)] = values[min(k, last)]
        k += 1
        x = np.uint32(x & (x - np.uint32(1)))
    return k


@njit(_sigs("int64({g}[::1], uint32[::1], int64, float64, float64, int32[::1])"), cache=True)
def _gather_groups(g, coarse, group, f1, f2, out):
    """q of every element of every group set in `coarse` (G values a group, zeros past the end)."""
    n = g.size
    k = 0
    for cw in range(coarse.size):
        c = coarse[cw]
        while c:
            start = (cw * 32 + _ctz(c)) * group
            c = np.uint32(c & (c - np.uint32(1)))
            if start >= n:
                break
            # slices, not out[k + i]: an index from range() alone needs no negative-index fix-up,
            # so these loops vectorize
            src = g[start:min(start + group, n)]
            dst = out[k:k + group]
            for i in range(src.size):
                dst[i] = _q(np.float64(src[i]), f1, f2)
            dst[src.size:] = 0
            k += group
    return k


@njit("int64(uint32[::1], int64, int32[::1], int32[::1])", cache=True)
def _scatter_groups(coarse, group, values, out):
    """out = the groups' values at the groups set in `coarse`, 0 elsewhere, each element written once;
    `values` holds G values for every set group (the caller checks)."""
    n = out.size
    k = 0
    done = 0  # out[:done] is written
    for cw in range(coarse.size):
        c = coarse[cw]
        while c:
            start = (cw * 32 + _ctz(c)) * group
            c = np.uint32(c & (c - np.uint32(1)))
            if start >= n:
                break
            out[done:start] = 0
            stop = min(start + group, n)
            out[start:stop] = values[k:k + stop - start]  # slices: copied by vectorized loops
            k += group
            done = stop
    out[done:] = 0
    return k


@njit("void(int64[::1], int32[::1], int32[::1])", cache=True)
def _place(positions, values, out):
    for k in range(positions.size):
        out[positions[k]] = values[k]


def factors(shift: int | None) -> tuple[float, float]:
    """(f1, f2) with f1 * f2 == 2**shift, each a finite float64 (1, 1 for int32 input)."""
    if shift is None:
        return 1.0, 1.0
    if -1022 <= shift <= 1000:
        return math.ldexp(1.0, shift), 1.0
    return math.ldexp(1.0, 1000), math.ldexp(1.0, shift - 1000)  # only tiny gradients get here


def quantize_all(grad: np.ndarray, shift: int | None, out: np.ndarray) -> np.ndarray:
    _quantize_all(grad, *factors(shift), out)
    return out


def gather(union: np.ndarray, own: np.ndarray, mine: np.ndarray, out: np.ndarray) -> np.ndarray:
    """This worker's values at the set bits of `union` (`mine`: its quantized non-zeros at `own`'s bits),
    into `out`, which holds one element more than the union."""
    k = _gather(union, own, mine, out)
    if k >= out.size:
        raise ValueError(f"out holds {out.size} elements: the union's {k} and a spare one do not fit")
    return out[:k]


def own_at(own: np.ndarray, mine: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """This worker's values at the sorted `positions` (0 where it has no non-zero)."""
    out = np.empty(positions.size, dtype=np.int32)
    _own_at(own, mine, positions, out)
    return out


def scatter(words: np.ndarray, values: np.ndarray, out: np.ndarray) -> None:
    used = _scatter(words, values, out)
    if used != values.size:
        raise ValueError(f"{values.size} values for a bitmap of {used} positions")


def gather_groups(grad: np.ndarray, coarse: np.ndarray, group: int, shift: int | None, out: np.ndarray) -> np.ndarray:
    k = _gather_groups(grad, coarse, group, *factors(shift), out)
    return out[:k]


def scatter_groups(coarse: np.ndarray, group: int, values: np.ndarray, out: np.ndarray) -> None:
    ngroups = _count(coarse)
    if ngroups * group != values.size:
        raise ValueError(f"{values.size} values for {ngroups} groups of {group}")
    _scatter_groups(coarse, group, values, out)


def place(positions: np.ndarray, values: np.ndarray, out: np.ndarray) -> None:
    _place(positions, values, out)


_claim.finish()  # every kernel above is compiled (or loaded): the stamp, and the lock let go
