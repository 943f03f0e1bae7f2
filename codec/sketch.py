"""Phase 3, sketch (ADD): the count sketch's layout and the encoder.

Elements are laid out as blocks of L lanes (element i is block i // L, lane
i % L).  The sketch has three sub-tables of R rows x L lanes; block b
picks row murmur3(b, seed_j) mod R in sub-table j with sign -1 if the hash's
top bit is set, and element i adds sign_j * q[i] to cell (j, row_j(b), i % L).
Every worker derives R from the union support alone, so all of them build
the same layout without exchanging anything else.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .murmur import block_hashes
from .params import CodecParams

TABLES = 3
_SIGN_BIT = np.uint32(0x80000000)


def split_index(indices: np.ndarray, lanes: int) -> tuple[np.ndarray, np.ndarray]:
    """(block, lane) of each element index; shifts when L is a power of two."""
    if lanes & (lanes - 1) == 0:
        bits = lanes.bit_length() - 1
        return indices >> bits, indices & (lanes - 1)
    return np.divmod(indices, lanes)


@dataclasses.dataclass(frozen=True, eq=False)
class SketchLayout:
    """Where each block lands in each sub-table, for one step's union support.

    max_lane_count: n_max, the most union elements in any one lane;
    rows: R; row_of / sign_of: (3, blocks) row and sign of every block.
    """

    lanes: int
    blocks: int
    max_lane_count: int
    rows: int
    row_of: np.ndarray
    sign_of: np.ndarray

    @classmethod
    def for_union(cls, params: CodecParams, union: np.ndarray) -> "SketchLayout":
        _, lane = split_index(union, params.lanes)
        n_max = int(np.bincount(lane, minlength=params.lanes).max()) if union.size else 0
        rows = params.sketch_rows(n_max)
        hashes = block_hashes(params.blocks, params.seeds)
        row_of = (hashes % np.uint32(rows)).astype(np.int64)
        sign_of = np.where(hashes & _SIGN_BIT, np.int32(-1), np.int32(1))
        return cls(params.lanes, params.blocks, n_max, rows, row_of, sign_of)

    @property
    def table_cells(self) -> int:
        """R * L cells per sub-table."""
        return self.rows * self.lanes

    @property
    def words(self) -> int:
        """3 * R * L int32 words on the wire."""
        return TABLES * self.table_cells

    def cells(self, table: int, block: np.ndarray, lane: np.ndarray) -> np.ndarray:
        """Flat cell index (into the 3*R*L words) of each element in one sub-table."""
        return table * self.table_cells + self.row_of[table][block] * self.lanes + lane


def encode(layout: SketchLayout, indices: np.ndarray, values: np.ndarray) -> np.ndarray:
    """This worker's sketch: int32 words, sub-table major, then row, then lane.

    `indices` are the worker's non-zero positions (all inside the union the
    layout was built from) and `values` their int32 fixed-point values.  The
    int32 adds wrap modulo 2**32 exactly as the switch's adder does.
    """
    block, lane = split_index(indices, layout.lanes)
    out = np.zeros(layout.words, dtype=np.int32)
    for j in range(TABLES):
        np.add.at(out, layout.cells(j, block, lane), layout.sign_of[j][block] * values)
    return out
