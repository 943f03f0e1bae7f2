"""Phase 1, scale (MAX), and the fixed-point quantizer.

Each worker sends the binary exponent e_w of its largest magnitude
(max|g_w| < 2**e_w, frexp convention); the switch returns e = max e_w and
every worker quantizes with the same shift s = 30 - e - ceil(log2 N), so
|q_w| <= 2**(30 - ceil(log2 N)) and no sum of N of them reaches 2**31.

int32 input is already fixed point; its scale phase carries each worker's
largest magnitude instead, and a sum that could overflow is refused before
any data is sent (the design lets int32 skip the phase; the overflow check
needs it).
"""

from __future__ import annotations

import numpy as np

from .params import CodecParams, check_dtype

# Below the frexp exponent of the smallest float64 subnormal (-1073), so any
# worker holding one non-zero value wins the MAX against an all-zero worker.
EXPONENT_FLOOR = -1100


def check_finite(grad: np.ndarray, *, who: str = "gradient") -> None:
    """Refuse NaN and Inf, naming the first bad position."""
    if grad.dtype.kind != "f" or grad.size == 0:
        return
    # max/min propagate NaN and expose +-Inf: two cheap passes instead of isfinite's temporary
    if np.isfinite(grad.max()) and np.isfinite(grad.min()):
        return
    flat = grad.reshape(-1)
    bad = int(np.flatnonzero(~np.isfinite(flat))[0])
    raise ValueError(f"{who} holds a non-finite value ({flat[bad]}) at flat index {bad}; hina refuses NaN and Inf")


def exponent(grad: np.ndarray) -> int:
    """e_w: the smallest e with max|g| < 2**e, or EXPONENT_FLOOR for an all-zero gradient."""
    if grad.size == 0:
        return EXPONENT_FLOOR
    peak = max(float(grad.max()), -float(grad.min()))
    if peak == 0.0:
        return EXPONENT_FLOOR
    return int(np.frexp(peak)[1])


def shift_for(max_exponent: int, workers: int) -> int:
    """s = 30 - e - ceil(log2 N): the shift every worker applies after the MAX."""
    if not 1 <= workers:
        raise ValueError(f"workers must be positive, got {workers}")
    return 30 - int(max_exponent) - (workers - 1).bit_length()


INT32_MAX = 2**31 - 1


def int32_peak(grad: np.ndarray) -> int:
    """max|g| of int32 input, capped at 2**31 - 1 so it travels as one int32 word (|-2**31| does not)."""
    if grad.size == 0:
        return 0
    return min(max(int(grad.max()), -int(grad.min())), INT32_MAX)


def check_int32_sum(peak: int, workers: int) -> None:
    """Refuse int32 input whose sum over the workers could leave the int32 range.

    `peak` is the MAX over workers of `int32_peak`: N values of magnitude at
    most `peak` sum to at most N * peak, which must stay within 2**31 - 1.
    One worker's values are their own sum and always fit.
    """
    if workers > 1 and workers * peak > INT32_MAX:
        raise ValueError(
            f"int32 input could overflow: {workers} workers with values up to |{peak}| can sum to "
            f"{workers * peak}, beyond the int32 range; scale the values down to at most "
            f"{INT32_MAX // workers} or send floats"
        )


def quantize(grad: np.ndarray, shift: int | None) -> np.ndarray:
    """q = round(g * 2**shift) as int32 (round half to even), the fixed-point form.

    For int32 input pass shift=None: the values are already fixed point and
    are returned as an int32 copy.  Float input is scaled in float64, where
    multiplying by a power of two is exact, so the only rounding is the one
    to an integer.
    """
    grad = np.asarray(grad)
    name = check_dtype(grad.dtype)
    if name == "int32":
        if shift is not None:
            raise ValueError("int32 input is already fixed point: pass shift=None")
        return grad.astype(np.int32, copy=True)
    if shift is None:
        raise ValueError(f"{name} input needs the shift from the scale phase")
    check_finite(grad)
    return _quantize_checked(grad, shift)


def _quantize_checked(values: np.ndarray, shift: int) -> np.ndarray:
    """The reference quantizer in numpy (the codec's own is `values.quantize_all`, compiled), refusing a
    shift that overflows int32.

    float32 input is scaled in float32: multiplying by 2**shift is exact
    there for every result of magnitude >= 2**-126, and anything smaller
    rounds to 0 either way, so it matches the float64 path bit for bit at
    half the memory traffic.
    """
    if values.dtype != np.float32:
        values = values.astype(np.float64 if values.dtype == np.float64 else np.float32)
    scaled = np.ldexp(values, int(shift))
    np.rint(scaled, out=scaled)
    if scaled.size:
        peak = max(float(scaled.max()), -float(scaled.min()))
        if not peak <= 2**31 - 1:
            raise ValueError(
                f"shift {shift} overflows int32 (|g * 2**shift| reaches {peak:.3g}); "
                "use the shift the scale phase agreed on"
            )
    return scaled.astype(np.int32)


def dequantize(fixed: np.ndarray, shift: int) -> np.ndarray:
    """S / 2**shift as float64 (exact: S has at most 31 significant bits)."""
    return np.ldexp(fixed.astype(np.float64), -int(shift))


def check_gradient(params: CodecParams, grad: np.ndarray, *, who: str = "gradient", finite: bool = True) -> np.ndarray:
    """Refuse a gradient that does not fit the job, before anything is sent; return it flat."""
    grad = np.asarray(grad)
    name = check_dtype(grad.dtype)
    if name != params.dtype:
        raise ValueError(f"{who} is {name} but the job's dtype is {params.dtype}")
    if grad.size != params.length:
        raise ValueError(f"{who} has {grad.size} elements but the job's length is {params.length}")
    if finite:
        check_finite(grad, who=who)
    return grad.reshape(-1)
