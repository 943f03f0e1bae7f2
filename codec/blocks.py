"""blocks: OR the bitmap of non-zero 256-element blocks, then ADD every element of the union's
blocks (an OmniReduce-style baseline run on the switch: aligned operands, so every worker sends
every union block, zeros included)."""

from __future__ import annotations

from .index import group_union
from .ops import Op

BLOCK_ELEMENTS = 256  # OmniReduce's block size (its artifact's default)


def run(step):
    union, nblocks = yield from group_union(step, BLOCK_ELEMENTS, "block_index", "block index phase", "blocks")
    step.report["union"] = nblocks * BLOCK_ELEMENTS
    if nblocks == 0:
        return step.zeros()
    with step.timed("encode"):
        words = step.kernels.group_values(step, union, BLOCK_ELEMENTS, nblocks)
    (agg,) = yield step.round(step.segment("blocks", Op.ADD, words))
    with step.timed("decode"):
        fixed = step.output()
        step.kernels.scatter_groups(union, BLOCK_ELEMENTS, agg, fixed)
    return fixed
