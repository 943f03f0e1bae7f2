"""hina's lossless homomorphic codec (docs/design.md, "The codec"), with compiled kernels.

Every aggregation is rounds of 32-bit words that a switch ADDs, ORs or
MAXes: a scale round (parameter check, exponent, union statistics), then
the encoding every worker picks alike (`auto`): dense, blocks, aligned
(index, then the values at the union) or the one-round sketch.
`simulate_allreduce` runs them with numpy as the switch; `WorkerSession`
is one worker's side, driven by the host agents.  A session's gradient may
be a numpy array (the numba kernels) or a torch tensor on the CPU or a GPU
(`codec.torch_kernels`): the words of every round are the same bits.
"""

import importlib

# Where each public name lives.  Submodules load on first use (PEP 562), so that the switch, which
# needs only the operators (`codec.ops`), does not load the compiled kernels and numba with them.
_EXPORTS = {
    "murmur": ("murmur3_32",),
    "ops": ("Op", "combine", "reduce_words"),
    "auto": ("Estimate", "Plan"),
    "params": ("MODES", "CodecParams"),
    "rounds": ("Segment", "Workspace"),
    "scale": ("EXPONENT_FLOOR", "check_gradient", "dequantize", "exponent", "quantize", "shift_for"),
    "session": ("Phase", "WorkerResult", "WorkerSession"),
    "simulate": ("AllreduceResult", "aggregate_round", "check_gradients", "replay", "simulate_allreduce"),
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}


def __getattr__(name: str):
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'codec' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))


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
