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

from .bitmap import _ctz, _popcount

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
    bit (its quantized non-zeros, in order, are `mine`), else 0.  `own` must lie inside `union`."""
    k = 0
    j = 0
    last = mine.size - 1
    for w in range(union.size):
        u = union[w]
        o = own[w]
        if o == 0:
            for _ in range(_popcount(u)):
                out[k] = 0
                k += 1
            continue
        while u:  # branch-free: read the next own value either way, keep it where own has the bit
            hit = (o >> np.uint32(_ctz(u))) & np.uint32(1)
            out[k] = mine[min(j, last)] * np.int32(hit)
            j += hit
            k += 1
            u &= u - np.uint32(1)
    return k


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


@njit("int64(uint32[::1], int32[::1], int32[::1])", cache=True)
def _scatter(words, values, out):
    """out = values at the set bits of `words` (in order), 0 elsewhere; returns values used."""
    out[:] = 0  # a memset, then one store per set bit: cheaper than a branch per element
    k = 0
    for w in range(words.size):
        x = words[w]
        base = w * 32
        while x:
            out[base + _ctz(x)] = values[k]
            x &= x - np.uint32(1)
            k += 1
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
            c &= c - np.uint32(1)
            if start >= n:
                break
            for i in range(start, start + group):
                out[k] = _q(np.float64(g[i]), f1, f2) if i < n else 0
                k += 1
    return k


@njit("int64(uint32[::1], int64, int32[::1], int32[::1])", cache=True)
def _scatter_groups(coarse, group, values, out):
    n = out.size
    for i in range(n):
        out[i] = 0
    k = 0
    for cw in range(coarse.size):
        c = coarse[cw]
        while c:
            start = (cw * 32 + _ctz(c)) * group
            c &= c - np.uint32(1)
            if start >= n:
                break
            for i in range(start, start + group):
                if i < n:
                    out[i] = values[k]
                k += 1
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
    """This worker's values at the set bits of `union` (`mine`: its quantized non-zeros at `own`'s bits)."""
    k = _gather(union, own, mine, out)
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
    used = _scatter_groups(coarse, group, values, out)
    if used != values.size:
        raise ValueError(f"{values.size} values for {used // group} groups of {group}")


def place(positions: np.ndarray, values: np.ndarray, out: np.ndarray) -> None:
    _place(positions, values, out)


_claim.finish()  # every kernel above is compiled (or loaded): the stamp, and the lock let go
