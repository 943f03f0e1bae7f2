"""The one-round count sketch (docs/design.md, "The encodings"): sent with the index, peeled lane by lane.

Elements are laid out as blocks of L lanes (element i is block i // L, lane
i % L).  The sketch has three sub-tables of R rows per lane; block b picks
row murmur3(b, seed_j) mod R in sub-table j with sign -1 if the hash's top
bit is set, and element i adds sign_j * q[i] to cell (lane, j, row_j(b)).
On the wire the sketch is lane-major: lane t owns words [3Rt, 3R(t+1)), so
each lane is an independent small sketch that the decoder peels inside the
cache (the switch only ADDs words, so the layout is the codec's choice).

R is sized before the union is known, from the union estimate of the scale
phase (and, with a two-level index, the exact count of union groups), so
the sketch travels in the same round as the (last level of the) index.  A
sketch that turns out too small leaves an unpeeled core; every worker
derives the same core from the union and the aggregated sketch, and the
residual phase ADDs those elements densely.  The result is exact either way.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from hina import kernels

from .bitmap import _ctz
from .murmur import block_hashes
from .ops import Op
from .params import CodecParams

# Its kernels compile as this module is imported: one process on a machine compiles them while any
# other waits, then loads them (hina.kernels); finished at the end of the module.
_claim = kernels.hold("codec-sketch")

TABLES = 3
_SIGN_BIT = np.uint32(0x80000000)


def rows_for(params: CodecParams, union_estimate: float) -> int:
    """R: c cells per element for the fullest lane expected, 3R cells per lane.

    The fullest of L lanes holding Poisson(n) elements each holds about
    n + 3 sqrt(n); every worker computes this from the same numbers with
    IEEE arithmetic, so all agree on R.
    """
    n = union_estimate / params.lanes
    fullest = n + 3.0 * math.sqrt(n) + 1.0
    c = params.cell_factor
    return max(1, math.ceil(fullest * c.numerator / (3 * c.denominator)))


def layout(params: CodecParams, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """(row, sign) of every block in each sub-table: two (3, blocks) int32 arrays."""
    hashes = block_hashes(params.blocks, params.seeds)
    row_of = (hashes % np.uint32(rows)).astype(np.int32)
    sign_of = np.where(hashes & _SIGN_BIT, np.int32(-1), np.int32(1))
    return row_of, sign_of


@njit("UniTuple(int64, 2)(int64, int64, int64)", cache=True, inline="always")
def _split(pos, lanes, lane_bits):
    """(block, lane) of a position: shifts when L is a power of two (lane_bits >= 0), else a division."""
    if lane_bits >= 0:
        return pos >> lane_bits, pos & (lanes - 1)
    block = pos // lanes
    return block, pos - block * lanes


@njit("void(uint32[::1], int32[::1], int64, int64, int64, int32[:, ::1], int32[:, ::1], int32[::1])", cache=True)
def _encode(own, mine, lanes, lane_bits, rows, row_of, sign_of, out):
    """Add sign * q of every own non-zero into its three cells (int32 wrap-around, as the switch)."""
    out[:] = 0
    cells = 3 * rows
    k = 0
    for w in range(own.size):
        x = own[w]
        while x:
            pos = w * 32 + _ctz(x)
            x &= x - np.uint32(1)
            q = np.int64(mine[k])
            k += 1
            block, lane = _split(pos, lanes, lane_bits)
            base = lane * cells
            for j in range(TABLES):
                c = base + j * rows + row_of[j, block]
                out[c] = np.int32(np.int64(out[c]) + sign_of[j, block] * q)


@njit("int64(uint32[::1], int64, int64, int64, int32[:, ::1], int32[:, ::1], int32[::1], int32[::1], int64[::1])",
      cache=True)
def _peel(union, lanes, lane_bits, rows, row_of, sign_of, sketch, out, residual):
    """Peel every lane; write the sums at peeled union positions and 0 elsewhere into `out`,
    the unpeeled positions (ascending) into `residual`; return how many are unpeeled.

    The union's elements are numbered lane by lane; walking the union in
    position order (where a block's hashes are read once for its L lanes)
    records each element's three cells and signs at its lane-order slot, so
    peeling a lane touches only that lane's cells and elements.
    """
    cells = 3 * rows
    per_lane = np.zeros(lanes + 1, dtype=np.int64)
    for w in range(union.size):
        x = union[w]
        while x:
            per_lane[_split(w * 32 + _ctz(x), lanes, lane_bits)[1] + 1] += 1
            x &= x - np.uint32(1)
    for t in range(lanes):
        per_lane[t + 1] += per_lane[t]
    total = per_lane[lanes]
    cell_of = np.empty((total, TABLES), dtype=np.int32)  # lane-local cell of each element per sub-table
    negative = np.empty(total, dtype=np.uint8)  # bit j: the sign in sub-table j is -1
    value_of = np.empty(total, dtype=np.int32)
    peeled = np.zeros(total, dtype=np.uint8)
    fill = per_lane[:lanes].copy()
    for w in range(union.size):
        x = union[w]
        while x:
            block, t = _split(w * 32 + _ctz(x), lanes, lane_bits)
            x &= x - np.uint32(1)
            e = fill[t]
            fill[t] += 1
            bits = 0
            for j in range(TABLES):
                cell_of[e, j] = j * rows + row_of[j, block]
                if sign_of[j, block] < 0:
                    bits |= 1 << j
            negative[e] = bits

    count = np.empty(cells, dtype=np.int32)
    ident = np.empty(cells, dtype=np.int32)  # XOR of the lane-local numbers of the cell's elements
    cell = np.empty(cells, dtype=np.int64)
    stack = np.empty(cells + 1, dtype=np.int32)  # a push writes one slot past the top before counting it
    for t in range(lanes):
        first, n = per_lane[t], per_lane[t + 1] - per_lane[t]
        if n == 0:
            continue
        count[:] = 0
        ident[:] = 0
        cell[:] = sketch[t * cells:(t + 1) * cells]
        for e in range(n):
            for j in range(TABLES):
                c = cell_of[first + e, j]
                count[c] += 1
                ident[c] ^= e
        top = 0
        for c in range(cells):
            if count[c] == 1:
                stack[top] = c
                top += 1
        while top:
            top -= 1
            c = stack[top]
            if count[c] != 1:
                continue
            e = ident[c]
            j = 0 if c < rows else (1 if c < 2 * rows else 2)  # its sub-table, without a division
            signs = np.int64(negative[first + e])
            v = np.int32((1 - 2 * ((signs >> j) & 1)) * np.int64(np.int32(cell[c])))  # sign * cell mod 2**32
            value_of[first + e] = v
            peeled[first + e] = 1
            for k in range(TABLES):  # branch-free: sign by arithmetic, push unconditionally
                d = cell_of[first + e, k]
                count[d] -= 1
                ident[d] ^= e
                cell[d] -= (1 - 2 * ((signs >> k) & 1)) * np.int64(v)
                stack[top] = d
                top += count[d] == 1

    out[:] = 0
    nres = 0
    fill[:] = per_lane[:lanes]
    for w in range(union.size):  # position order: lane t's next element is at fill[t]
        x = union[w]
        while x:
            pos = w * 32 + _ctz(x)
            x &= x - np.uint32(1)
            t = _split(pos, lanes, lane_bits)[1]
            e = fill[t]
            fill[t] += 1
            if peeled[e]:
                out[pos] = value_of[e]
            else:
                residual[nres] = pos
                nres += 1
    return nres


def _lane_bits(lanes: int) -> int:
    """log2 L for a power of two, else -1 (the kernels then divide)."""
    return lanes.bit_length() - 1 if lanes & (lanes - 1) == 0 else -1


def encode(params: CodecParams, rows: int, own: np.ndarray, mine: np.ndarray, out: np.ndarray) -> np.ndarray:
    """This worker's lane-major sketch (3 R L int32 words) into `out` (`mine`: its quantized non-zeros)."""
    row_of, sign_of = layout(params, rows)
    _encode(own, mine, params.lanes, _lane_bits(params.lanes), rows, row_of, sign_of, out)
    return out


def peel(params: CodecParams, rows: int, union: np.ndarray, union_size: int, sketch: np.ndarray,
         out: np.ndarray) -> np.ndarray:
    """Decode the aggregated sketch into `out` (0 off the union); return the unpeeled positions."""
    if sketch.shape != (TABLES * rows * params.lanes,):
        raise ValueError(f"sketch phase: expected {TABLES * rows * params.lanes} words, got {sketch.size}")
    row_of, sign_of = layout(params, rows)
    residual = np.empty(union_size, dtype=np.int64)
    n = _peel(union, params.lanes, _lane_bits(params.lanes), rows, row_of, sign_of,
              np.ascontiguousarray(sketch, dtype=np.int32), out, residual)
    return residual[:n]


def run(step):
    """Index (one or two levels) with the sketch riding on its last round, then the residual if any."""
    from hina.codec import index

    p = step.params
    sized = {}

    def ride(union_bound: float):
        rows = rows_for(p, min(step.estimate.union, union_bound))
        sized["rows"] = rows
        with step.timed("encode"):
            words = step.kernels.sketch_encode(step, rows)
        return [step.segment("sketch", Op.ADD, words)]

    union, union_size, riders = yield from index.exchange(step, ride=ride)
    rows = sized.get("rows", 0)
    step.report.update(union=union_size, rows=rows, residual=0)
    if union_size == 0:
        return step.zeros()
    (agg,) = riders
    with step.timed("decode"):
        fixed = step.output()
        residual = step.kernels.peel(p, rows, union, union_size, agg, fixed)
    if len(residual):
        with step.timed("encode"):
            mine = step.kernels.values_at(step, residual)
        (agg,) = yield step.round(step.segment("residual", Op.ADD, mine))
        with step.timed("decode"):
            step.kernels.place(residual, agg, fixed)
    step.report["residual"] = len(residual)
    return fixed


_claim.finish()  # every kernel above is compiled (or loaded): the stamp, and the lock let go
