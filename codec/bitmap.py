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

They run at memory speed by staying branch-light: a per-word bit pattern
is built by a loop LLVM vectorizes (its trip count is not a constant, so
it is not unrolled into scalar code first), the common case of a loop over
set bits runs unconditionally (a stray store lands where a later one
overwrites it), and counts are sums over every word, not a branch per
word.  Where the CPU has fast BMI2 bit extract and deposit (`pext`,
`pdep`: x86 since Haswell, AMD since Zen 3; `FAST_BIT_EXTRACT`), the
group bitmaps and the fine stream move 64 elements per step; elsewhere,
and for unions sparser than one group per 64 elements, the kernels walk
the union's groups one by one.  Both give the same bits.
"""

from __future__ import annotations

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import codegen, config
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


@intrinsic
def _opaque(typingctx, x):
    """x, unchanged, but hidden from the optimizer (an empty inline asm): arithmetic on a 0/1 value
    stays arithmetic instead of becoming a select that the x86 backend turns into a mispredicted branch."""
    def codegen(context, builder, signature, args):
        return builder.asm(ir.FunctionType(args[0].type, [args[0].type]), "", "=r,0", args, side_effect=False)
    return x(x), codegen


def _bmi2(name: str):
    """LLVM's x86 intrinsic `name` (pext or pdep on 64 bits) as a numba intrinsic."""
    @intrinsic
    def bits(typingctx, x, mask):
        def codegen(context, builder, signature, args):
            i64 = ir.IntType(64)
            return builder.call(builder.module.declare_intrinsic(name, fnty=ir.FunctionType(i64, [i64, i64])), args)
        return types.uint64(types.uint64, types.uint64), codegen
    return bits


_pext = _bmi2("llvm.x86.bmi.pext.64")  # the bits of x under mask, packed low
_pdep = _bmi2("llvm.x86.bmi.pdep.64")  # the low bits of x, spread to mask's set bits


def _fast_bit_extract() -> bool:
    """Does the CPU numba compiles for run pext and pdep in hardware at full speed?

    x86 with BMI2 (numba's own view of the target: NUMBA_CPU_NAME and NUMBA_CPU_FEATURES when set),
    except AMD's before Zen 3, which microcode them at tens to hundreds of cycles each.
    """
    features = config.CPU_FEATURES if config.CPU_FEATURES is not None else codegen.get_host_cpu_features()
    name = config.CPU_NAME or llvm.get_host_cpu_name()
    return "+bmi2" in features.split(",") and name not in ("bdver4", "znver1", "znver2")


FAST_BIT_EXTRACT = _fast_bit_extract()


def _where_fast(signature: str) -> list[str]:
    """A pext/pdep kernel's signature where the CPU has them (compiled eagerly), else none (never compiled)."""
    return [signature] if FAST_BIT_EXTRACT else []


@njit("int64(uint32)", cache=True, inline="always")
def _popcount(w):
    return _popc(w)


@njit("int64(uint64)", cache=True, inline="always")
def _popcount64(w):
    return _popc(w)


@njit("int64(uint32)", cache=True, inline="always")
def _ctz(w):
    """Index of the lowest set bit of a word; 32 for 0."""
    return trailing_zeros(w)


@njit("uint64(uint32[::1], int64)", cache=True, inline="always")
def _chunk(words, c):
    """Elements 64c .. 64c + 63 of a bitmap as one uint64 (zeros past its end)."""
    lo = np.uint64(words[2 * c])
    if 2 * c + 1 < words.size:
        return lo | (np.uint64(words[2 * c + 1]) << np.uint64(32))
    return lo


@njit(["int64(float32[::1], uint32[::1], uint32, uint32[::1], float32[::1])",
       "int64(float64[::1], uint64[::1], uint64, uint32[::1], float64[::1])",
       "int64(int32[::1], uint32[::1], uint32, uint32[::1], int32[::1])"], cache=True)
def _scan(g, bits_of, mask, words, compact):
    """Support bitmap of g into `words` and its non-zeros, in position order, into `compact`.

    `bits_of` is g's memory as unsigned integers and `mask` drops the sign
    bit of a float (so -0.0 counts as zero, as g != 0 says) or keeps every
    bit of an int32.  Returns the non-zero count.  One pass over g: the
    word's bits from a vectorized loop, then its first non-zero stored
    whether or not there is one (k moves only if there is), the rest by a
    loop that sparse gradients rarely enter.
    """
    n = g.size
    k = 0
    for w in range(words.size):
        base = w * 32
        width = min(32, n - base)  # not a constant: LLVM vectorizes the loop instead of unrolling it
        bits = np.uint32(0)
        for j in range(width):
            bits |= np.uint32((bits_of[base + j] & mask) != 0) << np.uint32(j)
        words[w] = bits
        ones = _popcount(bits)
        # k <= base here, so the slot exists even for a word with no non-zero
        compact[k] = g[base + min(_ctz(np.uint32(bits | np.uint32(0x80000000))), width - 1)]
        if ones > 1:
            more = k + 1
            bits = np.uint32(bits & (bits - np.uint32(1)))
            while bits:
                compact[more] = g[base + _ctz(bits)]
                more += 1
                bits = np.uint32(bits & (bits - np.uint32(1)))
        k += ones
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


@njit("UniTuple(int64, 6)(uint32[::1])", cache=True)
def _fold_counts(words):
    """Counts of non-empty groups of 1, 2, 4, ..., 32 bits of `words` (sums over every word: vectorized)."""
    c0 = c1 = c2 = c3 = c4 = c5 = 0
    for w in range(words.size):
        x = words[w]
        c0 += _popcount(x)
        x = (x | (x >> np.uint32(1))) & np.uint32(0x55555555)  # one bit per pair
        c1 += _popcount(x)
        x = (x | (x >> np.uint32(2))) & np.uint32(0x11111111)
        c2 += _popcount(x)
        x = (x | (x >> np.uint32(4))) & np.uint32(0x01010101)
        c3 += _popcount(x)
        x = (x | (x >> np.uint32(8))) & np.uint32(0x00010001)
        c4 += _popcount(x)
        c5 += np.int64(x != 0)
    return c0, c1, c2, c3, c4, c5


@njit("void(uint32[::1], uint32[::1])", cache=True)
def _any_words(words, out):
    """One bit per word of `words`, set when the word is non-zero: the group bitmap at G = 32."""
    n = words.size
    for o in range(out.size):
        base = o * 32
        bits = np.uint32(0)
        for j in range(min(32, n - base)):  # vectorized, as in _scan
            bits |= np.uint32(words[base + j] != 0) << np.uint32(j)
        out[o] = bits


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


SMALL_GROUPS = GROUP_SIZES[1:5]  # 2..16: groups smaller than a word, the ones the chunk kernels handle
COMPRESS = {g: _compress_masks(g) for g in SMALL_GROUPS}


def _chunk_constants(group: int) -> tuple[int, np.uint64, np.uint64]:
    """(groups per 64-element chunk, the lowest bit of each group, all bits but the highest of each)."""
    per = 64 // group
    first = sum(1 << (j * group) for j in range(per))
    return per, np.uint64(first), np.uint64((first << (group - 1)) - first)


CHUNK = {g: _chunk_constants(g) for g in SMALL_GROUPS}


@njit("void(uint32[::1], int64, uint32[::1], uint32[::1])", cache=True)
def _coarse_masks(words, group, masks, out):
    """Group bitmap at `group` (2..16) of an element bitmap, one word at a time (no pext)."""
    out[:] = 0
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


@njit(_where_fast("void(uint32[::1], int64, uint64, uint64, uint64[::1])"), cache=True)
def _coarse_chunks(words, per, first, low, out):
    """Group bitmap at G = 64 / per (2..16) of an element bitmap, into 64-bit words, 64 elements per pext.

    A group's highest bit ends up set when any of its bits is: its other
    bits plus all ones there carry into it, or it was set already.
    Positions are unsigned, as in _fine_chunks.
    """
    high = first << np.uint64(64 // per - 1)
    n = np.uint64(words.size)
    chunks = (words.size + 1) // 2
    per_out = 64 // per  # chunks per output word
    for o in range(out.size):
        bits = np.uint64(0)
        start = o * per_out
        for q in range(min(per_out, chunks - start)):
            at = np.uint64(2 * (start + q))
            x = np.uint64(words[at])
            if at + np.uint64(1) < n:
                x |= np.uint64(words[at + np.uint64(1)]) << np.uint64(32)
            marks = (((x & low) + low) | x) & high
            bits |= _pext(marks, high) << (np.uint64(q) * np.uint64(per))
        out[o] = bits


@njit("int64(uint32[::1], uint32[::1], int64, int64, uint32[::1])", cache=True)
def _fine_groups(words, coarse, group, ngroups, out):
    """Append the element bits of every group (2..16 elements) set in `coarse`, G bits each, one group
    at a time (no pext); returns bits written."""
    out[:] = 0
    pos = 0
    low = np.uint64((1 << group) - 1)
    for cw in range(coarse.size):
        c = coarse[cw]
        while c:
            gidx = cw * 32 + _ctz(c)
            c &= c - np.uint32(1)
            if gidx >= ngroups:
                return -1  # a group past the end: not a bitmap of this job
            start = gidx * group
            piece = (np.uint64(words[start >> 5]) >> np.uint64(start & 31)) & low
            out[pos >> 5] |= np.uint32(piece << np.uint64(pos & 31))
            pos += group
    return pos


@njit(_where_fast("int64(uint32[::1], uint32[::1], int64, uint64, uint64[::1])"), cache=True)
def _fine_chunks(words, coarse, group, first, out):
    """The fine stream (G = 2..16) 64 elements at a time: pext keeps the chunk's union groups, and a
    64-bit accumulator appends them to `out` (64-bit words, one past the stream).  Returns bits written.

    Positions are unsigned throughout: numba then adds no negative-index fix-up to each access.
    """
    per = np.uint64(64 // group)
    select = np.uint64((1 << (64 // group)) - 1)
    ones = np.uint64((1 << group) - 1)
    acc = np.uint64(0)
    fill = np.uint64(0)  # bits waiting in acc, < 64
    o = np.uint64(0)  # 64-bit words written
    for c in range((words.size + 1) // 2):
        bit = np.uint64(c) * per
        chosen = (np.uint64(coarse[bit >> np.uint64(5)]) >> (bit & np.uint64(31))) & select
        piece = _pext(_chunk(words, c), _pdep(chosen, first) * ones)
        acc |= piece << fill
        out[o] = acc  # every step: a full word is kept, not undone
        total = fill + np.uint64(_popcount(np.uint32(chosen)) * group)
        full = total >= np.uint64(64)
        o += np.uint64(full)
        # the piece's bits that did not fit ((piece >> 1) >> 63 is 0, where piece >> 64 would be undefined)
        acc = ((piece >> np.uint64(1)) >> (np.uint64(63) - fill)) if full else acc
        fill = total - np.uint64(64) if full else total
    out[o] = acc
    return np.int64(o * np.uint64(64) + fill)


@njit("int64(uint32[::1], uint32[::1], int64, uint32[::1])", cache=True)
def _fine_words(words, coarse, word_shift, out):
    """The fine stream for G >= 32 (2**word_shift words a group): every word of a union group, in
    order, stored unconditionally and kept by advancing; zeros for a last group past the tensor.
    `out` holds one word past the stream.  Returns words written."""
    o = 0
    for w in range(words.size):
        gw = w >> word_shift
        out[o] = words[w]
        o += np.int64(_opaque((coarse[gw >> 5] >> np.uint32(gw & 31)) & np.uint32(1)))
    for w in range(o, out.size):
        out[w] = 0
    return o


@njit("int64(uint32[::1], uint32[::1], int64, int64, uint32[::1])", cache=True)
def _expand_groups(coarse, fine, group, ngroups, out):
    """Element union bitmap from the group union and the OR'd fine stream, one group at a time;
    returns its element count."""
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


@njit(_where_fast("int64(uint32[::1], uint32[::1], int64, uint64, uint64[::1])"), cache=True)
def _expand_chunks(coarse, fine, group, first, out):
    """Element union bitmap (G = 2..16, into 64-bit words) 64 elements at a time: the stream's next
    bits, read at a running bit position, deposited by pdep on the chunk's union groups.  Returns its
    element count.  Positions are unsigned, as in _fine_chunks."""
    per = np.uint64(64 // group)
    select = np.uint64((1 << (64 // group)) - 1)
    ones = np.uint64((1 << group) - 1)
    last = np.uint64(fine.size - 1)
    pos = np.uint64(0)
    total = 0
    for c in range(out.size):
        bit = np.uint64(c) * per
        chosen = (np.uint64(coarse[bit >> np.uint64(5)]) >> (bit & np.uint64(31))) & select
        i, off = pos >> np.uint64(5), pos & np.uint64(31)
        # 64 stream bits from pos (words past the stream only feed bits that pdep drops)
        lo = np.uint64(fine[min(i, last)]) | (np.uint64(fine[min(i + np.uint64(1), last)]) << np.uint64(32))
        stream = (lo >> off) | ((np.uint64(fine[min(i + np.uint64(2), last)]) << np.uint64(1)) << (np.uint64(63) - off))
        x = _pdep(stream, _pdep(chosen, first) * ones)
        out[c] = x
        total += _popcount64(x)
        pos += np.uint64(_popcount(np.uint32(chosen)) * group)
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
    missing = np.uint32(0)
    for w in range(own.size):  # no early exit: a vectorized OR over every word
        missing |= own[w] & ~union[w]
    return missing == 0


# -- checked wrappers ------------------------------------------------------------

_UNSIGNED = {np.dtype(np.float32): (np.uint32, np.uint32(0x7FFFFFFF)),
             np.dtype(np.float64): (np.uint64, np.uint64(0x7FFFFFFFFFFFFFFF)),
             np.dtype(np.int32): (np.uint32, np.uint32(0xFFFFFFFF))}


def scan(grad: np.ndarray, words: np.ndarray, compact: np.ndarray) -> int:
    """Support bitmap of the flat, contiguous `grad` (float32/64 or int32) into `words`
    (uint32, words_for(d)) and its non-zeros into `compact` (same dtype, d elements: the kernel may
    store one past the non-zeros); returns nnz."""
    if compact.size < grad.size:
        raise ValueError(f"compact holds {compact.size} elements, fewer than the gradient's {grad.size}")
    unsigned, mask = _UNSIGNED[grad.dtype]
    return int(_scan(grad, grad.view(unsigned), mask, words, compact))


def float_peak(values: np.ndarray) -> float:
    """max|x| of float32/float64 values; NaN if any is NaN, Inf if any is infinite."""
    if values.size == 0:
        return 0.0
    unsigned, mask = _UNSIGNED[values.dtype]
    peak = _peak_bits(values.view(unsigned), mask)
    return float(np.array([peak], dtype=unsigned).view(values.dtype)[0])


def any_words(words: np.ndarray) -> np.ndarray:
    """The bitmap of non-zero words (the group bitmap at G = 32)."""
    out = np.empty(words_for(words.size), dtype=np.uint32)
    _any_words(words, out)
    return out


def group_counts(words: np.ndarray) -> np.ndarray:
    """Non-empty groups at every size in GROUP_SIZES (int64, 11 entries)."""
    small = _fold_counts(words)  # groups of 1..32 elements
    large = _fold_counts(any_words(words))  # of 32..1024
    return np.array(small + large[1:], dtype=np.int64)


def groups(length: int, group: int) -> int:
    """Groups of `group` elements that cover `length`."""
    return -(-length // group)


def coarse(words: np.ndarray, length: int, group: int) -> np.ndarray:
    """The group bitmap at `group` of an element bitmap."""
    if group >= 32:  # non-empty words, then groups of those
        level = any_words(words)
        return level if group == 32 else coarse(level, groups(length, 32), group // 32)
    size = words_for(groups(length, group))
    if FAST_BIT_EXTRACT:
        per, first, low = CHUNK[group]
        out = _wide(size)
        _coarse_chunks(words, per, first, low, out.view(np.uint64))
        return out[:size]
    out = np.empty(size, dtype=np.uint32)
    _coarse_masks(words, group, COMPRESS[group], out)
    return out


def _check_groups(union_coarse: np.ndarray, length: int, group: int, message: str) -> None:
    ngroups = groups(length, group)
    if union_coarse.size != words_for(ngroups) or not trailing_bits_clear(union_coarse, ngroups):
        raise ValueError(f"{message} {length}")


def _wide(words: int) -> np.ndarray:
    """An uninitialized uint32 array of at least `words` words that is also whole 64-bit words."""
    return np.empty(-(-words // 2), dtype=np.uint64).view(np.uint32)


def _by_chunks(union_groups: int, length: int) -> bool:
    """Run the pext kernels (a step per 64 elements) rather than the group kernels (a step per union
    group)?  Where the CPU has them and the union has at least one group per 64 elements."""
    return FAST_BIT_EXTRACT and union_groups * 64 >= length > 0 and union_groups > 0


def fine(words: np.ndarray, union_coarse: np.ndarray, length: int, group: int, union_groups: int) -> np.ndarray:
    """This worker's element bits for every group in the group union, G bits a group."""
    _check_groups(union_coarse, length, group, "index phase: the group union has groups beyond length")
    if count(union_coarse) != union_groups:
        raise ValueError(f"index phase: the group union holds {count(union_coarse)} groups, not {union_groups}")
    size = words_for(union_groups * group)
    if group >= 32:
        out = np.empty(size + 1, dtype=np.uint32)
        _fine_words(words, union_coarse, group.bit_length() - 6, out)
    elif _by_chunks(union_groups, length):
        out = _wide(size + 2)
        _fine_chunks(words, union_coarse, group, CHUNK[group][1], out.view(np.uint64))
    else:
        out = np.empty(size, dtype=np.uint32)
        _fine_groups(words, union_coarse, group, groups(length, group), out)
    return out[:size]


def expand(union_coarse: np.ndarray, union_fine: np.ndarray, length: int, group: int) -> tuple[np.ndarray, int]:
    """The element union bitmap from both levels, and its element count."""
    _check_groups(union_coarse, length, group, "index phase: union bitmap has bits set beyond length")
    size = words_for(length)
    if group < 32 and _by_chunks(union_fine.size * 32 // group, length):
        out = _wide(size)
        total = _expand_chunks(union_coarse, union_fine, group, CHUNK[group][1], out.view(np.uint64))
        out = out[:size]
    else:
        out = np.empty(size, dtype=np.uint32)
        total = _expand_groups(union_coarse, union_fine, group, groups(length, group), out)
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
