"""hina's lossless homomorphic codec (DESIGN.md sections 1 and 1b), with compiled kernels.

Every aggregation is rounds of 32-bit words that a switch ADDs, ORs or
MAXes: a scale round (parameter check, exponent, union statistics), then
the encoding every worker picks alike (`auto`): dense, blocks, aligned
(index, then the values at the union) or the one-round sketch.
`simulate_allreduce` runs them with numpy as the switch; `WorkerSession`
is one worker's side, driven by the host agents.
"""

from .murmur import murmur3_32
from .ops import Op, combine, reduce_words
from .auto import Estimate, Plan
from .params import MODES, CodecParams
from .rounds import Segment, Workspace
from .scale import EXPONENT_FLOOR, dequantize, exponent, quantize, shift_for
from .session import Phase, WorkerResult, WorkerSession, check_gradient
from .simulate import AllreduceResult, aggregate_round, check_gradients, replay, simulate_allreduce

__all__ = [
    "EXPONENT_FLOOR",
    "MODES",
    "AllreduceResult",
    "CodecParams",
    "Estimate",
    "Plan",
    "Segment",
    "Workspace",
    "aggregate_round",
    "Op",
    "Phase",
    "WorkerResult",
    "WorkerSession",
    "check_gradient",
    "check_gradients",
    "combine",
    "dequantize",
    "exponent",
    "murmur3_32",
    "quantize",
    "reduce_words",
    "replay",
    "shift_for",
    "simulate_allreduce",
]
