"""dense: every quantized element in one ADD (the SwitchML-style baseline, and auto's choice
for unions too full for an index to pay)."""

from __future__ import annotations

import numpy as np

from . import values
from .ops import Op


def run(step):
    with step.timed("encode"):
        q = values.quantize_all(step.grad, step.shift, step.workspace.buffer("dense", step.grad.size, np.int32))
    (agg,) = yield step.round(step.segment("dense", Op.ADD, q))
    with step.timed("decode"):
        return step.adopt(agg)
