"""The seam between the rounds and the arithmetic: one kernel set per array library.

The encodings (`dense`, `blocks`, `aligned`, `sketch`, the `index`) and the
scale round say *what* to compute; a kernel set says *how*, on its own kind
of array.  `NUMBA` runs the compiled kernels of `bitmap`, `values` and
`sketch` on numpy arrays; `codec.torch_kernels.TORCH` does the same with
torch ops on CPU or CUDA tensors.  Both produce the same int32 words in
every round: the rules (bit layout, quantizer, cost model, sketch layout)
live once, in those modules and `auto`, `params`, `scale`.

`kernels_for(grad)` picks by the gradient's type, and never imports torch:
a torch tensor can only exist once torch is loaded.

Bitmaps are backend arrays of 32-bit words (uint32 for numba, int32 for
torch: the same bits); what crosses the network is always a numpy int32
array (`to_wire`, `from_wire`).
"""

from __future__ import annotations

import sys

import numpy as np

from . import bitmap, scale, sketch, values
from .params import CodecParams


class NumbaKernels:
    """The codec's compiled kernels on numpy arrays (the host path)."""

    name = "numba"

    # -- the gradient ----------------------------------------------------------------------------
    @staticmethod
    def check_gradient(params: CodecParams, grad, *, who: str, finite: bool):
        return scale.check_gradient(params, grad, who=who, finite=finite)

    @staticmethod
    def check_finite(grad, *, who: str) -> None:
        scale.check_finite(grad, who=who)

    @staticmethod
    def check_out(params: CodecParams, out, grad):
        if out is None:
            return None
        if not isinstance(out, np.ndarray) or out.dtype != np.int32 or out.size != params.length:
            raise ValueError(f"out must be an int32 array of {params.length} elements, got "
                             f"{getattr(out, 'dtype', type(out).__name__)} of {getattr(out, 'size', '?')}")
        if not out.flags.c_contiguous:
            raise ValueError("out must be C-contiguous")
        return out.reshape(-1)

    @staticmethod
    def prepare(grad: np.ndarray) -> np.ndarray:
        """The flat gradient as the kernels take it: contiguous, native byte order, float16 widened
        (exactly) to float32."""
        grad = np.ascontiguousarray(grad)
        if grad.dtype.kind == "f" and grad.dtype.itemsize == 2:
            return grad.astype(np.float32)
        return grad if grad.dtype.isnative else grad.astype(grad.dtype.newbyteorder("="))

    # -- the scale round -------------------------------------------------------------------------
    @staticmethod
    def scan(grad: np.ndarray, workspace) -> tuple[np.ndarray, np.ndarray]:
        """(support bitmap, the non-zeros in position order)."""
        own = workspace.buffer("own", bitmap.words_for(grad.size), np.uint32)
        compact = workspace.buffer("compact", grad.size, grad.dtype)
        return own, compact[: bitmap.scan(grad, own, compact)]

    float_peak = staticmethod(bitmap.float_peak)
    int32_peak = staticmethod(scale.int32_peak)
    group_counts = staticmethod(bitmap.group_counts)

    @staticmethod
    def size(array) -> int:
        return int(array.size)

    # -- words on and off the wire ---------------------------------------------------------------
    @staticmethod
    def to_wire(words) -> np.ndarray:
        words = np.asarray(words)
        return words.view(np.int32) if words.dtype == np.uint32 else np.ascontiguousarray(words, dtype=np.int32)

    @staticmethod
    def from_wire(words: np.ndarray, like=None) -> np.ndarray:
        """An aggregate's words as a bitmap of this backend."""
        return words.view(np.uint32)

    @staticmethod
    def sync() -> None:
        """Wait for queued work (for honest timings on an asynchronous device); numba is synchronous."""

    # -- bitmaps ---------------------------------------------------------------------------------
    count = staticmethod(bitmap.count)
    covers = staticmethod(bitmap.covers)
    trailing_bits_clear = staticmethod(bitmap.trailing_bits_clear)
    coarse = staticmethod(bitmap.coarse)
    fine = staticmethod(bitmap.fine)
    expand = staticmethod(bitmap.expand)

    @staticmethod
    def empty_bitmap(like: np.ndarray) -> np.ndarray:
        return np.zeros_like(like)

    # -- values ----------------------------------------------------------------------------------
    @staticmethod
    def quantize_compact(step) -> np.ndarray:
        return values.quantize_all(step.compact, step.shift, step.workspace.buffer("mine", step.compact.size, np.int32))

    @staticmethod
    def quantize_dense(step) -> np.ndarray:
        return values.quantize_all(step.grad, step.shift, step.workspace.buffer("dense", step.grad.size, np.int32))

    @staticmethod
    def union_values(step, union: np.ndarray, size: int) -> np.ndarray:
        """This worker's fixed-point values at the set bits of `union`, in position order."""
        return values.gather(union, step.own, step.mine(), step.workspace.buffer("values", size + 1, np.int32))

    @staticmethod
    def group_values(step, union: np.ndarray, group: int, ngroups: int) -> np.ndarray:
        """Every element (in fixed point) of every group of `group` set in `union`, zeros past the end."""
        return values.gather_groups(step.grad, union, group, step.shift,
                                    step.workspace.buffer("values", ngroups * group, np.int32))

    @staticmethod
    def values_at(step, positions: np.ndarray) -> np.ndarray:
        return values.own_at(step.own, step.mine(), positions)

    scatter = staticmethod(values.scatter)
    scatter_groups = staticmethod(values.scatter_groups)
    place = staticmethod(values.place)

    # -- the sketch ------------------------------------------------------------------------------
    @staticmethod
    def sketch_encode(step, rows: int) -> np.ndarray:
        p = step.params
        return sketch.encode(p, rows, step.own, step.mine(),
                             step.workspace.buffer("sketch", sketch.TABLES * rows * p.lanes, np.int32))

    peel = staticmethod(sketch.peel)

    # -- the sum ---------------------------------------------------------------------------------
    @staticmethod
    def output(step) -> np.ndarray:
        if step.out is not None:
            return step.out
        return np.empty(step.grad.size, dtype=np.int32)

    @staticmethod
    def adopt(step, aggregate: np.ndarray) -> np.ndarray:
        if step.out is None:
            return aggregate
        np.copyto(step.out, aggregate)
        return step.out

    dequantize = staticmethod(scale.dequantize)

    @staticmethod
    def as_int64(fixed: np.ndarray) -> np.ndarray:
        return fixed.astype(np.int64)


NUMBA = NumbaKernels()


def is_torch_tensor(array) -> bool:
    """Is `array` a torch tensor?  Asked without importing torch (no tensor exists before it is loaded)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(array, torch.Tensor)


def kernels_for(grad):
    """The kernel set for this gradient: torch's for a torch tensor (CPU or CUDA), numba's otherwise."""
    if is_torch_tensor(grad):
        from .torch_kernels import TORCH

        return TORCH
    return NUMBA
