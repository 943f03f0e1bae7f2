"""hina's lossless homomorphic codec (DESIGN.md section 1), in numpy.

Four phases, each one aggregation of 32-bit words by a switch:
scale (MAX) -> index (OR) -> sketch (ADD) -> peeling decode + residual (ADD).
`simulate_allreduce` runs them all with numpy as the switch;
`WorkerSession` is one worker's side, driven by the host agents.
"""

from .murmur import murmur3_32
from .ops import Op, combine, reduce_words
from .params import CodecParams
from .scale import EXPONENT_FLOOR, dequantize, exponent, quantize, shift_for
from .session import Phase, WorkerResult, WorkerSession, check_gradient
from .simulate import AllreduceResult, check_gradients, replay, simulate_allreduce

__all__ = [
    "EXPONENT_FLOOR",
    "AllreduceResult",
    "CodecParams",
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
