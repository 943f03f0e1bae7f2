"""blocks: OR the bitmap of non-zero 256-element blocks, then ADD every element of the union's
blocks (an OmniReduce-style baseline run on the switch: aligned operands, so every worker sends
every union block, zeros included)."""

from __future__ import annotations

import numpy as np

from . import bitmap, values
from .index import _check
from .ops import Op

BLOCK_ELEMENTS = 256  # OmniReduce's block size (its artifact's default)


def run(step):
    p = step.params
    with step.timed("encode"):
        own_blocks = bitmap.coarse(step.own, p.length, BLOCK_ELEMENTS)
    (agg,) = yield step.round(step.segment("block_index", Op.OR, own_blocks))
    union = agg.view(np.uint32)
    with step.timed("decode"):
        _check(own_blocks, union, bitmap.groups(p.length, BLOCK_ELEMENTS), "block index phase", "blocks")
        nblocks = bitmap.count(union)
    step.report["union"] = nblocks * BLOCK_ELEMENTS
    if nblocks == 0:
        return step.zeros()
    with step.timed("encode"):
        words = values.gather_groups(step.grad, union, BLOCK_ELEMENTS, step.shift,
                                     step.workspace.buffer("values", nblocks * BLOCK_ELEMENTS, np.int32))
    (agg,) = yield step.round(step.segment("blocks", Op.ADD, words))
    with step.timed("decode"):
        fixed = step.output()
        values.scatter_groups(union, BLOCK_ELEMENTS, agg, fixed)
    return fixed
