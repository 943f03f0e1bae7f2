"""dense: every quantized element in one ADD (the SwitchML-style baseline, and auto's choice
for unions too full for an index to pay)."""

from __future__ import annotations

from .ops import Op


def run(step):
    with step.timed("encode"):
        q = step.kernels.quantize_dense(step)
    (agg,) = yield step.round(step.segment("dense", Op.ADD, q))
    with step.timed("decode"):
        return step.adopt(agg)
