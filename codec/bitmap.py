"""Support bitmaps and their compiled kernels: the index phases' hot loops.

Element i is bit (i % 32) of word i // 32 (uint32 words, little-endian
bits).  A *group bitmap* at group size G (a power of two, 1..1024) has one
bit per G consecutive elements, set when any of them is non-zero; G = 1 is
the element bitmap itself.  The two-level index sends the group bitmap at
G, then the element bits of only the groups in the union's group bitmap,
back to back ("the fine stream"): G bits per group, so groups stay aligned
inside 32-bit words.

Every kernel is compiled once, eagerly, with an explicit signature and
cached on disk (`cache=True`), so no compilation lands inside an
aggregation.  They take contiguous arrays and integers only, never
allocate per element, and trust their caller (the public functions below)
for shapes and dtypes.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.cpython.unsafe.numbers import trailing_zeros
from numba.extending import intrinsic

from hina import kernels

# Its kernels compile as this module is imported: one process on a machine compiles them while any
# other waits, then loads them (hina.kernels); finished at the end of the module.
_claim = kernels.hold("codec-bitmap")

GROUP_SIZES = tuple(1 << k for k in range(11))  # 1, 2, 4, ..., 1024: the index's group sizes


def words_for(bits: int) -> int:
    """uint32 words that hold `bits` bits."""
    return -(-bits // 32)


# -- kernels ------------------------------------------------------------------

@intrinsic
def _popc(typingctx, x):
    """LLVM's ctpop: one popcnt instruction on the host CPU."""
    def codegen(context, builder, signature, args):
        return builder.ctpop(args[0])
    return x(x), codegen


@njit("int64(uint32)", cache=True, inline="always")
def _popcount(w):
    return _popc(w)


@njit("int64(uint32)", cache=True, inline="always")
def _ctz(w):
    """Index of the lowest set bit of a non-zero word."""
    return trailing_zeros(w)


@njit(["int64(float32[::1], uint32[::1], uint32, uint32[::1], float32[::1])",
       "int64(float64[::1], uint64[::1], uint64, uint32[::1], float64[::1])",
       "int64(int32[::1], uint32[::1], uint32, uint32[::1], int32[::1])"], cache=True)
def _scan(g, bits_of, mask, words, compact):
    """Support bitmap of g into `words` and its non-zeros, in position order, into `compact`.

    `bits_of` is g's memory as unsigned integers and `mask` drops the sign
    bit of a float (so -0.0 counts as zero, as g != 0 says) or keeps every
    bit of an int32.  Returns the non-zero count.
    """
    n = g.size
    full = n // 32
    k = 0
    for w in range(full):
        base = w * 32
        bits = np.uint32(0)
        for j in range(32):  # a constant trip count: unrolled, no branches
            bits |= np.uint32((bits_of[base + j] & mask) != 0) << np.uint32(j)
        words[w] = bits
        while bits:
            compact[k] = g[base + _ctz(bits)]
            k += 1
            bits &= bits - np.uint32(1)
    if full * 32 < n:
        base = full * 32
        bits = np.uint32(0)
        for j in range(n - base):
            bits |= np.uint32((bits_of[base + j] & mask) != 0) << np.uint32(j)
        words[full] = bits
        while bits:
            compact[k] = g[base + _ctz(bits)]
            k += 1
            bits &= bits - np.uint32(1)
    return k


@njit(["uint32(uint32[::1], uint32)", "uint64(uint64[::1], uint64)"], cache=True)
def _peak_bits(bits_of, mask):
    """The largest |x| of floats given as their bits (sign masked off: the order of magnitudes).

    A NaN's bits exceed every finite value's and Inf's, so peak >= Inf's bits means non-finite.
    """
    peak = mask ^ mask  # zero of the mask's type (uint64 & int64 would make numba widen to float64)
    for i in range(bits_of.size):
        peak = max(peak, bits_of[i] & mask)
    return peak


@njit("UniTuple(int64, 6)(uint32[::1], uint32[::1])", cache=True)
def _fold_counts(words, nonzero):
    """Counts of non-empty groups of 1, 2, 4, ..., 32 bits of `words`; writes one bit per
    non-zero word into `nonzero` (so the same fold, one level up, counts groups of words)."""
    c0 = c1 = c2 = c3 = c4 = c5 = 0
    nonzero[:] = 0
    for w in range(words.size):
        x = words[w]
        if x == 0:
            continue
        nonzero[w >> 5] |= np.uint32(1) << np.uint32(w & 31)
        c0 += _popcount(x)
        x = (x | (x >> np.uint32(1))) & np.uint32(0x55555555)  # one bit per pair
        c1 += _popcount(x)
        x = (x | (x >> np.uint32(2))) & np.uint32(0x11111111)
        c2 += _popcount(x)
        x = (x | (x >> np.uint32(4))) & np.uint32(0x01010101)
        c3 += _popcount(x)
        x = (x | (x >> np.uint32(8))) & np.uint32(0x00010001)
        c4 += _popcount(x)
        c5 += 1
    return c0, c1, c2, c3, c4, c5


def _compress_masks(group: int) -> np.ndarray:
    """Masks that gather one bit every `group` bits of a word into the word's low 32/group bits.

    Step s (1, 2, 4, ...) shifts by s * (group - 1) and keeps chunks of 2s
    bits every 2s * group bits; the first entry keeps one bit per group.
    """
    per_word = 32 // group
    masks = [sum(1 << (j * group) for j in range(per_word))]
    s = 1
    while s < per_word:
        masks.append(sum(((1 << (2 * s)) - 1) << (j * 2 * s * group) for j in range(per_word // (2 * s))))
        s *= 2
    return np.array(masks, dtype=np.uint32)


COMPRESS = {g: _compress_masks(g) for g in GROUP_SIZES[1:6]}  # groups smaller than a word


@njit("void(uint32[::1], int64, uint32[::1], uint32[::1])", cache=True)
def _coarse(words, group, masks, out):
    """Group bitmap at `group` (2..1024) of an element bitmap."""
    out[:] = 0
    if group < 32:
        per_word = 32 // group
        for w in range(words.size):
            x = words[w]
            if x == 0:
                continue
            shift = 1
            while shift < group:  # OR every group's bits into its lowest bit
                x |= x >> np.uint32(shift)
                shift *= 2
            x &= masks[0]
            s = 1
            for m in range(1, masks.size):  # then pack those bits together
                x = (x | (x >> np.uint32(s * (group - 1)))) & masks[m]
                s *= 2
            bit = w * per_word
            out[bit >> 5] |= x << np.uint32(bit & 31)
    else:
        span = group // 32
        for gidx in range((words.size + span - 1) // span):
            for w in range(gidx * span, min((gidx + 1) * span, words.size)):
                if words[w] != 0:
                    out[gidx >> 5] |= np.uint32(1) << np.uint32(gidx & 31)
                    break


@njit("int64(uint32[::1], uint32[::1], int64, int64, uint32[::1])", cache=True)
def _fine(words, coarse, group, ngroups, out):
    """Append the element bits of every group set in `coarse`, G bits each; returns bits written."""
    out[:] = 0
    pos = 0
    span = group // 32
    low = np.uint64((1 << group) - 1) if group < 32 else np.uint64(0)
    for cw in range(coarse.size):
        c = coarse[cw]
        while c:
            gidx = cw * 32 + _ctz(c)
            c &= c - np.uint32(1)
            if gidx >= ngroups:
                return -1  # a group past the end: not a bitmap of this job
            if group >= 32:
                for w in range(gidx * span, gidx * span + span):
                    if w < words.size:
                        out[pos >> 5] = words[w]
                    pos += 32
            else:
                start = gidx * group
                piece = (np.uint64(words[start >> 5]) >> np.uint64(start & 31)) & low
                out[pos >> 5] |= np.uint32(piece << np.uint64(pos & 31))
                pos += group
    return pos


@njit("int64(uint32[::1], uint32[::1], int64, int64, uint32[::1])", cache=True)
def _expand(coarse, fine, group, ngroups, out):
    """Element union bitmap from the group union and the OR'd fine stream; returns its element count."""
    out[:] = 0
    pos = 0
    total = 0
    span = group // 32
    low = np.uint64((1 << group) - 1) if group < 32 else np.uint64(0)
    for cw in range(coarse.size):
        c = coarse[cw]
        while c:
            gidx = cw * 32 + _ctz(c)
            c &= c - np.uint32(1)
            if gidx >= ngroups:
                return -1
            if group >= 32:
                for w in range(gidx * span, gidx * span + span):
                    x = fine[pos >> 5]
                    if w < out.size:
                        out[w] = x
                        total += _popcount(x)
                    elif x:
                        return -1  # bits past the end of the tensor
                    pos += 32
            else:
                piece = np.uint32((np.uint64(fine[pos >> 5]) >> np.uint64(pos & 31)) & low)
                start = gidx * group
                out[start >> 5] |= np.uint32(np.uint64(piece) << np.uint64(start & 31))
                total += _popcount(piece)
                pos += group
    return total


@njit("int64(uint32[::1], int64[::1])", cache=True)
def _positions(words, out):
    """Set-bit positions in ascending order into `out`; returns how many."""
    k = 0
    for w in range(words.size):
        x = words[w]
        while x:
            out[k] = w * 32 + _ctz(x)
            x &= x - np.uint32(1)
            k += 1
    return k


@njit("int64(uint32[::1])", cache=True)
def _count(words):
    total = 0
    for w in range(words.size):
        total += _popcount(words[w])
    return total


@njit("boolean(uint32[::1], uint32[::1])", cache=True)
def _covers(union, own):
    for w in range(own.size):
        if own[w] & ~union[w]:
            return False
    return True


# -- checked wrappers ------------------------------------------------------------

_UNSIGNED = {np.dtype(np.float32): (np.uint32, np.uint32(0x7FFFFFFF)),
             np.dtype(np.float64): (np.uint64, np.uint64(0x7FFFFFFFFFFFFFFF)),
             np.dtype(np.int32): (np.uint32, np.uint32(0xFFFFFFFF))}


def scan(grad: np.ndarray, words: np.ndarray, compact: np.ndarray) -> int:
    """Support bitmap of the flat, contiguous `grad` (float32/64 or int32) into `words`
    (uint32, words_for(d)) and its non-zeros into `compact` (same dtype, >= nnz); returns nnz."""
    unsigned, mask = _UNSIGNED[grad.dtype]
    return int(_scan(grad, grad.view(unsigned), mask, words, compact))


def float_peak(values: np.ndarray) -> float:
    """max|x| of float32/float64 values; NaN if any is NaN, Inf if any is infinite."""
    if values.size == 0:
        return 0.0
    unsigned, mask = _UNSIGNED[values.dtype]
    peak = _peak_bits(values.view(unsigned), mask)
    return float(np.array([peak], dtype=unsigned).view(values.dtype)[0])


def group_counts(words: np.ndarray) -> np.ndarray:
    """Non-empty groups at every size in GROUP_SIZES (int64, 11 entries)."""
    nonzero = np.empty(words_for(words.size), dtype=np.uint32)
    small = _fold_counts(words, nonzero)  # groups of 1..32 elements
    large = _fold_counts(nonzero, np.empty(words_for(nonzero.size), dtype=np.uint32))  # of 32..1024
    return np.array(small + large[1:], dtype=np.int64)


def groups(length: int, group: int) -> int:
    """Groups of `group` elements that cover `length`."""
    return -(-length // group)


def coarse(words: np.ndarray, length: int, group: int) -> np.ndarray:
    """The group bitmap at `group` of an element bitmap."""
    out = np.empty(words_for(groups(length, group)), dtype=np.uint32)
    _coarse(words, group, COMPRESS.get(group, COMPRESS[2]), out)
    return out


def fine(words: np.ndarray, union_coarse: np.ndarray, length: int, group: int, union_groups: int) -> np.ndarray:
    """This worker's element bits for every group in the group union, G bits a group."""
    out = np.empty(words_for(union_groups * group), dtype=np.uint32)
    if _fine(words, union_coarse, group, groups(length, group), out) < 0:
        raise ValueError(f"index phase: the group union has groups beyond length {length}")
    return out


def expand(union_coarse: np.ndarray, union_fine: np.ndarray, length: int, group: int) -> tuple[np.ndarray, int]:
    """The element union bitmap from both levels, and its element count."""
    out = np.empty(words_for(length), dtype=np.uint32)
    total = _expand(union_coarse, union_fine, group, groups(length, group), out)
    if total < 0 or not trailing_bits_clear(out, length):
        raise ValueError(f"index phase: union bitmap has bits set beyond length {length}")
    return out, int(total)


def positions(words: np.ndarray, count: int | None = None) -> np.ndarray:
    """Sorted positions of the set bits (int64)."""
    out = np.empty(_count(words) if count is None else count, dtype=np.int64)
    _positions(words, out)
    return out


def count(words: np.ndarray) -> int:
    """Set bits in a bitmap."""
    return int(_count(words))


def covers(union: np.ndarray, own: np.ndarray) -> bool:
    """Does `union` hold every bit of `own`?"""
    return bool(_covers(union, own))


def trailing_bits_clear(words: np.ndarray, bits: int) -> bool:
    """No bit at or past position `bits` is set (what a bitmap of `bits` elements must satisfy)."""
    if bits % 32 == 0 or words.size == 0:
        return True
    return int(words[-1]) >> (bits % 32) == 0


def from_positions(indices: np.ndarray, length: int) -> np.ndarray:
    """The element bitmap (uint32) of the given positions (numpy; tests and small helpers)."""
    bits = np.zeros(words_for(length) * 32, dtype=np.bool_)
    bits[indices] = True
    return np.packbits(bits, bitorder="little").view("<u4").copy()


_claim.finish()  # every kernel above is compiled (or loaded): the stamp, and the lock let go
