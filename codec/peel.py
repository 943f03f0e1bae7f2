"""Phase 4, the peeling decoder (local); what it cannot peel goes to the residual phase.

From the union U alone every worker knows, per sketch cell, how many union
elements hash there and which blocks they are.  A cell holding exactly one
element is pure: its value is sign * cell.  Peeling it subtracts the element
from its other two cells, which may make them pure, and so on.  A round
peels every pure cell of sub-table 0, then of 1, then of 2 (so an element
pure in two sub-tables is peeled once), vectorized across all lanes, until a
round finds nothing.  Every worker runs the same deterministic rounds, so
every worker derives the same unpeeled set: the residual.

Bookkeeping per cell is one word, the *key*: the element count in the low S
bits and, above it, the sum of the elements' *ranks*.  A block's rank in
sub-table j is its position among the union's blocks that hash to the same
row of j, so ranks stay small; a pure cell's key is 1 + (rank << S), which
names its one block exactly (DESIGN.md uses the XOR of block numbers for the
same purpose; a sum of ranks needs one scatter for count and identity
together and fewer bits).  S is the bit length of the largest possible cell
count, so a count never borrows from the ranks.

When the key fits in 32 bits (always, short of pathological hash luck) the
key and the cell's int32 value share one uint64: value << 32 plus key.  The
arithmetic is modulo 2**64 and every term added is later subtracted, so
whenever a cell is pure its low word is exactly 1 + (rank << S) and its high
word exactly the cell's value modulo 2**32, whatever carries happened in
between.  One scatter then updates both, which matters because peeling is
bound by random memory accesses.  Otherwise key (uint64) and value (int32)
live in two arrays.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .sketch import TABLES, SketchLayout, split_index

_LOW = np.uint64(0xFFFFFFFF)
_HIGH = np.uint64(32)


@dataclasses.dataclass(frozen=True, eq=False)
class Peeled:
    """Elements recovered by peeling, with their int32 sums, and the residual set."""

    indices: np.ndarray
    values: np.ndarray
    residual: np.ndarray
    rounds: int


class Decoder:
    """Everything peeling needs that depends on the union alone.

    Built as soon as the index phase ends, so this work overlaps the sketch
    phase's network time; `peel` then needs only the aggregated sketch.
    """

    def __init__(self, layout: SketchLayout, union: np.ndarray, *, packed: bool | None = None):
        self.layout = layout
        self.union = union
        lanes = layout.lanes
        block, lane = split_index(union, lanes)
        # blocks of the union, and per sub-table their rank within their row
        first = np.flatnonzero(np.diff(block, prepend=-1))
        ublocks = block[first]
        self._rank = np.empty((TABLES, layout.blocks), dtype=np.uint32)
        self._by_row: list[np.ndarray] = []  # sub-table j: union blocks sorted by row
        self._row_start: list[np.ndarray] = []
        largest_group = 1
        for j in range(TABLES):
            rows = layout.row_of[j][ublocks]
            order = np.argsort(rows, kind="stable")
            start = np.searchsorted(rows[order], np.arange(layout.rows + 1))
            ranks = np.arange(ublocks.size) - start[rows[order]]
            self._rank[j][ublocks[order]] = ranks
            self._by_row.append(ublocks[order])
            self._row_start.append(start[:-1])
            largest_group = max(largest_group, int(np.diff(start).max(initial=1)))
        # a cell holds at most one element per union block of its row, and at most n_max
        self.count_bits = max(1, min(layout.max_lane_count, largest_group).bit_length())
        key_bits = self.count_bits + (largest_group - 1).bit_length()
        self.packed = key_bits <= 32 if packed is None else packed
        if self.packed and key_bits > 32:
            raise ValueError(f"keys need {key_bits} bits; they cannot share a word with the value")

        shift = np.uint64(self.count_bits)
        # per block and sub-table: where its row starts, and what it adds to a key
        self._base = [j * layout.table_cells + layout.row_of[j] * lanes for j in range(TABLES)]
        self._entry = [(self._rank[j].astype(np.uint64) << shift) + np.uint64(1) for j in range(TABLES)]
        key = np.zeros(layout.words, dtype=np.uint64)
        for j in range(TABLES):
            np.add.at(key, self._base[j][block] + lane, self._entry[j][block])
        self._key = key

    def peel(self, sketch: np.ndarray) -> Peeled:
        """Recover every element that peeling reaches from the aggregated sketch words."""
        layout = self.layout
        sketch = np.asarray(sketch)
        if sketch.shape != (layout.words,):
            raise ValueError(f"sketch phase: expected {layout.words} words, got {sketch.shape[0]}")
        if self.union.size == 0:
            empty = np.empty(0, dtype=np.int64)
            return Peeled(empty, np.empty(0, dtype=np.int32), empty, 0)

        lanes, size = layout.lanes, layout.table_cells
        shift = np.uint64(self.count_bits)
        mask, one = np.uint64((1 << self.count_bits) - 1), np.uint64(1)
        if self.packed:
            key = (np.ascontiguousarray(sketch, dtype=np.int32).view(np.uint32).astype(np.uint64) << _HIGH)
            key += self._key
            cells = None
        else:
            key = self._key.copy()
            cells = sketch.astype(np.int32, copy=True)

        found_idx: list[np.ndarray] = []
        found_val: list[np.ndarray] = []
        # cells of each sub-table changed since that sub-table was last searched
        touched: list[list[np.ndarray]] = [[] for _ in range(TABLES)]
        rounds = 0  # rounds that peeled something
        while True:
            progress = False
            for j in range(TABLES):
                table = key[j * size : (j + 1) * size]
                changed, touched[j] = touched[j], []
                if rounds == 0 or sum(c.size for c in changed) > size // 16:
                    pure = np.flatnonzero((table & mask) == one)  # many candidates: scan
                else:
                    cand = np.concatenate(changed) - j * size if changed else np.empty(0, dtype=np.int64)
                    pure = np.unique(cand[(table[cand] & mask) == one])
                if pure.size == 0:
                    continue
                progress = True
                k = table[pure]
                table[pure] = 0  # the element was the cell's only one
                if cells is None:
                    cell_value = (k >> _HIGH).astype(np.uint32).view(np.int32)
                    k &= _LOW
                else:
                    cell_value = cells[j * size + pure]
                row, ln = np.divmod(pure, lanes)
                blk = self._by_row[j][self._row_start[j][row] + (k >> shift).astype(np.int64)]
                value = layout.sign_of[j][blk] * cell_value
                found_idx.append(blk * lanes + ln)
                found_val.append(value)
                for other in range(TABLES):
                    if other == j:
                        continue
                    c = self._base[other][blk] + ln
                    signed = layout.sign_of[other][blk] * value
                    if cells is None:
                        update = signed.view(np.uint32).astype(np.uint64) << _HIGH
                        update += self._entry[other][blk]
                        np.subtract.at(key, c, update)
                    else:
                        np.subtract.at(key, c, self._entry[other][blk])
                        np.subtract.at(cells, c, signed)
                    touched[other].append(c)
            if not progress:
                break
            rounds += 1

        indices = np.concatenate(found_idx) if found_idx else np.empty(0, dtype=np.int64)
        values = np.concatenate(found_val) if found_val else np.empty(0, dtype=np.int32)
        if indices.size == self.union.size:
            residual = np.empty(0, dtype=np.int64)
        else:  # the 2-core: union elements no round reached (a mask beats a sort-based set difference)
            alive = np.zeros(int(self.union[-1]) + 1, dtype=np.bool_)
            alive[self.union] = True
            alive[indices] = False
            residual = np.flatnonzero(alive)
        return Peeled(indices, values, residual, rounds)


def peel(layout: SketchLayout, union: np.ndarray, sketch: np.ndarray) -> Peeled:
    """Peel the aggregated sketch of the union elements `union` (sorted positions)."""
    return Decoder(layout, union).peel(sketch)
