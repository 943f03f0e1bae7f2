"""The codec's kernels in plain torch ops, for gradients that are torch tensors (CPU or CUDA).

The same rules as the numba kernels, the same words in every round: the
bit layout of `bitmap` (element i is bit i % 32 of word i // 32), the
quantizer of `values` (q = rint(g * f1 * f2) in float64, round half to
even, `values.factors` for the two-factor trick), the sketch layout of
`sketch.layout` (murmur3 rows and signs, computed once on the host and
moved to the device), and `auto`'s cost model, which the session runs on
the few numbers of the scale round.  Only the kernels differ: whole-tensor
ops (comparisons, byte packing, `nonzero`, gathers, `index_add_`,
`bincount`), no per-element Python, nothing that leaves the tensor's
device except the words sent (`to_wire`) and the handful of scalars the
rounds need (counts, the peak, the union checks).

Bitmaps are int32 tensors of 32-bit words (torch has no general uint32):
the same bits as the numba backend's uint32, packed and unpacked through
their little-endian bytes (x86 and CUDA devices are little-endian).

Peeling the sketch is done in parallel rounds: every union element whose
cell holds it alone is peeled at once, its value taken away from its
three cells, until a round peels nothing.  The set peeled is the
complement of the hypergraph's 2-core, which does not depend on the
order, so the sum and the residual are the numba peeler's exactly.

dtypes: float16, float32, float64 and int32, as the codec (`params.DTYPES`);
bfloat16 is refused as numpy's codec refuses it (numpy has no bfloat16);
widen it to float32 first (exact), as the DDP hook does.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from . import bitmap, scale, sketch
from .params import DTYPES, CodecParams
from .values import factors

_DTYPE_NAMES = {torch.float16: "float16", torch.float32: "float32", torch.float64: "float64",
                torch.int32: "int32", torch.bfloat16: "bfloat16"}
_MASK32 = 0xFFFFFFFF


def dtype_name(dtype: torch.dtype) -> str:
    """The codec's name of a torch dtype, or the refusal `params.check_dtype` gives for numpy's."""
    name = _DTYPE_NAMES.get(dtype, str(dtype).replace("torch.", ""))
    if name not in DTYPES:
        raise ValueError(f"unsupported dtype {name}: hina accepts {', '.join(DTYPES)}")
    return name


# Four bools (bytes of 0 or 1, little-endian in an int32) to four bits: times 2^24 + 2^17 + 2^10 + 2^3, byte j's
# bit lands on bit 24 + j, every other product below bit 24 (distinct bits: no carries) or above bit 27, and the
# product stays below 2^50 (no overflow in int64).  Back: a nibble copied into four bytes, byte j keeping bit j.
_GATHER_NIBBLE = 0x01020408
_SPREAD_NIBBLE = 0x01010101
_NIBBLE_BITS = 0x08040201


def words_of(mask: torch.Tensor) -> torch.Tensor:
    """Pack a bool tensor into int32 words: bit i is bit i % 32 of word i // 32."""
    n = mask.numel()
    if n % 32:
        padded = torch.zeros(bitmap.words_for(n) * 32, dtype=torch.bool, device=mask.device)
        padded[:n] = mask
        mask = padded
    fours = mask.contiguous().view(torch.uint8).view(torch.int32).to(torch.int64)
    nibbles = ((fours * _GATHER_NIBBLE) >> 24) & 0xF
    packed = (nibbles[0::2] | (nibbles[1::2] << 4)).to(torch.uint8)  # two nibbles a byte, 0..255: exact
    return packed.view(torch.int32)


def bits_of(words: torch.Tensor, bits: int) -> torch.Tensor:
    """The first `bits` bits of int32 words as a bool tensor (zeros where the words run out)."""
    b = words.contiguous().view(torch.uint8).to(torch.int32)
    low = ((b & 0xF) * _SPREAD_NIBBLE) & _NIBBLE_BITS  # bits 0..3 of the byte, one a byte; at most 0x0F0F0F0F
    high = ((b >> 4) * _SPREAD_NIBBLE) & _NIBBLE_BITS  # bits 4..7
    spread = torch.stack([low, high], dim=1).view(torch.uint8)
    return _fit(spread.view(-1) != 0, bits)


def popcount(words: torch.Tensor) -> torch.Tensor:
    """Set bits of each 32-bit word (int64), SWAR on the unsigned value."""
    x = words.to(torch.int64) & _MASK32
    x = x - ((x >> 1) & 0x55555555)
    x = (x & 0x33333333) + ((x >> 2) & 0x33333333)
    x = (x + (x >> 4)) & 0x0F0F0F0F
    return (x * 0x01010101 & _MASK32) >> 24


def _fit(mask: torch.Tensor, n: int) -> torch.Tensor:
    """`mask` cut or zero-padded to `n` elements."""
    if mask.numel() >= n:
        return mask[:n]
    out = torch.zeros(n, dtype=mask.dtype, device=mask.device)
    out[: mask.numel()] = mask
    return out


def positions(words: torch.Tensor, bits: int | None = None) -> torch.Tensor:
    """Set-bit positions in ascending order (int64)."""
    return torch.nonzero(bits_of(words, words.numel() * 32 if bits is None else bits)).view(-1)


def take(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """x[index] along the first dimension (index_select: far cheaper than advanced indexing on the CPU)."""
    return torch.index_select(x, 0, index)


def wrap32(x: torch.Tensor) -> torch.Tensor:
    """int64 values modulo 2**32 as int32 (two's complement): the switch's wrapping ADD."""
    low = x & _MASK32
    return torch.where(low >= 2**31, low - 2**32, low).to(torch.int32)


def quantize(x: torch.Tensor, shift: int | None) -> torch.Tensor:
    """q = rint(x * f1 * f2) as int32, in float64 (values.quantize_all's arithmetic); int32 unchanged."""
    if shift is None:
        return x.to(torch.int32)
    f1, f2 = factors(shift)
    wide = x.to(torch.float64, copy=True).mul_(f1)
    if f2 != 1.0:  # only tiny gradients: the second factor of the two-factor trick
        wide.mul_(f2)
    return wide.round_().to(torch.int32)  # torch.round: half to even


def dequantize(fixed: torch.Tensor, shift: int) -> torch.Tensor:
    """S / 2**shift as float64, rounded once as numpy's ldexp rounds it (scale.dequantize)."""
    x = fixed.to(torch.float64)
    if shift <= 1022:  # 2**-shift is a normal float64 (shift >= -999: the exponent is at most 1024)
        return x * 2.0**-shift
    return x * 2.0**-1022 * 2.0 ** -(shift - 1022)  # |S| < 2**31: the first product is exact


def to_float16(x: torch.Tensor) -> torch.Tensor:
    """float64 -> float16 rounded once to nearest even, as numpy casts (torch goes through float32:
    two roundings).  Rounding to float32 *to odd* first keeps the second rounding exact."""
    f = x.to(torch.float32)
    inexact = f.to(torch.float64) != x
    toward_zero = torch.where(f.to(torch.float64).abs() > x.abs(), torch.nextafter(f, torch.zeros_like(f)), f)
    odd = (toward_zero.view(torch.int32) | 1).view(torch.float32)
    return torch.where(inexact & torch.isfinite(f), odd, f).to(torch.float16)


class TorchKernels:
    """The kernel set of `codec.kernels` in torch ops; every tensor stays on the gradient's device."""

    name = "torch"

    # -- the gradient ----------------------------------------------------------------------------
    @staticmethod
    def check_gradient(params: CodecParams, grad: torch.Tensor, *, who: str, finite: bool) -> torch.Tensor:
        name = dtype_name(grad.dtype)
        if name != params.dtype:
            raise ValueError(f"{who} is {name} but the job's dtype is {params.dtype}")
        if grad.numel() != params.length:
            raise ValueError(f"{who} has {grad.numel()} elements but the job's length is {params.length}")
        if finite:
            TorchKernels.check_finite(grad, who=who)
        return grad.reshape(-1)

    @staticmethod
    def check_finite(grad: torch.Tensor, *, who: str) -> None:
        if not grad.is_floating_point() or grad.numel() == 0:
            return
        flat = grad.reshape(-1)
        bad = torch.nonzero(~torch.isfinite(flat))
        if bad.numel():
            i = int(bad[0, 0])
            raise ValueError(f"{who} holds a non-finite value ({float(flat[i])}) at flat index {i}; "
                             "hina refuses NaN and Inf")

    @staticmethod
    def check_out(params: CodecParams, out, grad: torch.Tensor):
        if out is None:
            return None
        if (not isinstance(out, torch.Tensor) or out.dtype != torch.int32 or out.numel() != params.length
                or out.device != grad.device):
            raise ValueError(f"out must be an int32 tensor of {params.length} elements on {grad.device}, got "
                             f"{getattr(out, 'dtype', type(out).__name__)} of {getattr(out, 'size', '?')} "
                             f"on {getattr(out, 'device', 'the host')}")
        if not out.is_contiguous():
            raise ValueError("out must be contiguous")
        return out.view(-1)

    @staticmethod
    def prepare(grad: torch.Tensor) -> torch.Tensor:
        return grad.detach().contiguous().view(-1)

    # -- the scale round -------------------------------------------------------------------------
    @staticmethod
    def scan(grad: torch.Tensor, workspace) -> tuple[torch.Tensor, torch.Tensor]:
        mask = grad != 0  # -0.0 is zero, NaN is not: as the numba scan
        return words_of(mask), grad[mask]

    @staticmethod
    def float_peak(values: torch.Tensor) -> float:
        """max|x|; NaN if any is NaN, Inf if any is infinite (torch's max propagates NaN)."""
        if values.numel() == 0:
            return 0.0
        return float(values.abs().max())

    @staticmethod
    def int32_peak(values: torch.Tensor) -> int:
        if values.numel() == 0:
            return 0
        return min(max(int(values.max()), -int(values.min())), scale.INT32_MAX)

    @staticmethod
    def group_counts(words: torch.Tensor) -> np.ndarray:
        """Non-empty groups at every size in GROUP_SIZES (bitmap.group_counts), one copy to the host.

        Groups of 1..32 elements: the bits of each word folded pairwise (one bit per pair, per four, ...),
        counted; of 64..1024: pairs of non-zero words, then pairs of those, as bools."""
        x = words.to(torch.int64) & _MASK32
        counts = [popcount(x).sum()]
        for shift, keep in ((1, 0x55555555), (2, 0x11111111), (4, 0x01010101), (8, 0x00010001)):
            x = (x | (x >> shift)) & keep
            counts.append(popcount(x).sum())
        level = _fit(words != 0, -(-words.numel() // 32) * 32)
        counts.append(level.sum())
        for _ in bitmap.GROUP_SIZES[6:]:
            level = level.view(-1, 2).any(dim=1)
            counts.append(level.sum())
        return torch.stack(counts).cpu().numpy().astype(np.int64)

    @staticmethod
    def size(array: torch.Tensor) -> int:
        return int(array.numel())

    # -- words on and off the wire ---------------------------------------------------------------
    @staticmethod
    def to_wire(words) -> np.ndarray:
        """The words in host memory as numpy int32 (the only bulk copy off the device)."""
        if isinstance(words, np.ndarray):
            return words.view(np.int32) if words.dtype == np.uint32 else np.ascontiguousarray(words, dtype=np.int32)
        return words.to(torch.int32).cpu().numpy()

    @staticmethod
    def from_wire(words: np.ndarray, like: torch.Tensor) -> torch.Tensor:
        """An aggregate's words on `like`'s device."""
        words = np.ascontiguousarray(words, dtype=np.int32)
        host = torch.from_numpy(words if words.flags.writeable else words.copy())
        return host.to(like.device, non_blocking=False)

    @staticmethod
    def sync() -> None:
        """Wait for this thread's current CUDA stream (not the whole device: backward may be running)."""
        if torch.cuda.is_initialized():
            torch.cuda.current_stream().synchronize()

    # -- bitmaps ---------------------------------------------------------------------------------
    @staticmethod
    def count(words: torch.Tensor) -> int:
        return int(popcount(words).sum())

    @staticmethod
    def covers(union: torch.Tensor, own: torch.Tensor) -> bool:
        return not bool((own & ~union).any())

    @staticmethod
    def trailing_bits_clear(words: torch.Tensor, bits: int) -> bool:
        if bits % 32 == 0 or words.numel() == 0:
            return True
        return (int(words[-1]) & _MASK32) >> (bits % 32) == 0

    @staticmethod
    def coarse(words: torch.Tensor, length: int, group: int) -> torch.Tensor:
        ngroups = bitmap.groups(length, group)
        if group >= 32:  # whole words a group
            span = group // 32
            return words_of(_fit(words, ngroups * span).view(ngroups, span).ne(0).any(dim=1))
        return words_of(bits_of(words, ngroups * group).view(ngroups, group).any(dim=1))

    @staticmethod
    def fine(words: torch.Tensor, union_coarse: torch.Tensor, length: int, group: int,
             union_groups: int) -> torch.Tensor:
        ngroups = bitmap.groups(length, group)
        chosen = bits_of(union_coarse, union_coarse.numel() * 32)
        if chosen[ngroups:].any():
            raise ValueError(f"index phase: the group union has groups beyond length {length}")
        ids = torch.nonzero(chosen[:ngroups]).view(-1)
        stream = take(bits_of(words, ngroups * group).view(ngroups, group), ids).view(-1)
        return words_of(_fit(stream, union_groups * group))

    @staticmethod
    def expand(union_coarse: torch.Tensor, union_fine: torch.Tensor, length: int,
               group: int) -> tuple[torch.Tensor, int]:
        ngroups = bitmap.groups(length, group)
        chosen = bits_of(union_coarse, union_coarse.numel() * 32)
        ids = torch.nonzero(chosen[:ngroups]).view(-1)
        fine = bits_of(union_fine, ids.numel() * group).view(-1, group)
        full = torch.zeros(ngroups, group, dtype=torch.bool, device=union_fine.device)
        full.index_copy_(0, ids, fine)
        full = full.view(-1)
        if chosen[ngroups:].any() or full[length:].any():
            raise ValueError(f"index phase: union bitmap has bits set beyond length {length}")
        return words_of(full[:length]), int(fine.sum())

    @staticmethod
    def empty_bitmap(like: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(like)

    # -- values ----------------------------------------------------------------------------------
    @staticmethod
    def quantize_compact(step) -> torch.Tensor:
        return quantize(step.compact, step.shift)

    @staticmethod
    def quantize_dense(step) -> torch.Tensor:
        return quantize(step.grad, step.shift)

    @staticmethod
    def union_values(step, union: torch.Tensor, size: int) -> torch.Tensor:
        # own lies inside the union and g is 0 (or -0.0) off own: quantizing g at U is the gather
        return quantize(take(step.grad, positions(union, step.grad.numel())), step.shift)

    @staticmethod
    def _group_rows(union: torch.Tensor, group: int, n: int) -> tuple[torch.Tensor, bool]:
        """The set groups that lie wholly inside the tensor (ascending), and whether the last, partial
        group is set too (groups past it are refused by the index checks before this runs)."""
        ids = positions(union)
        whole = n // group
        inside = int(torch.searchsorted(ids, whole))  # ids ascend: the whole groups are a prefix
        return ids[:inside], inside < ids.numel()

    @staticmethod
    def group_values(step, union: torch.Tensor, group: int, ngroups: int) -> torch.Tensor:
        g, n = step.grad, step.grad.numel()
        rows, partial = TorchKernels._group_rows(union, group, n)
        whole = n // group
        values = take(g[: whole * group].view(whole, group), rows).view(-1)
        if partial:  # the last group, zeros past the end
            pad = torch.zeros(group - n % group, dtype=g.dtype, device=g.device)
            values = torch.cat([values, g[whole * group:], pad])
        return quantize(values, step.shift)

    @staticmethod
    def values_at(step, positions: torch.Tensor) -> torch.Tensor:
        return quantize(take(step.grad, positions), step.shift)

    @staticmethod
    def scatter(union: torch.Tensor, values: np.ndarray, out: torch.Tensor) -> None:
        pos = positions(union, out.numel())
        if pos.numel() != values.size:
            raise ValueError(f"{values.size} values for a bitmap of {pos.numel()} positions")
        out.zero_()
        out.index_copy_(0, pos, TorchKernels.from_wire(values, out))

    @staticmethod
    def scatter_groups(union: torch.Tensor, group: int, values: np.ndarray, out: torch.Tensor) -> None:
        n = out.numel()
        rows, partial = TorchKernels._group_rows(union, group, n)
        used = (rows.numel() + partial) * group
        if used != values.size:
            raise ValueError(f"{values.size} values for {used // group} groups of {group}")
        whole = n // group
        vals = TorchKernels.from_wire(values, out)
        out.zero_()
        out[: whole * group].view(whole, group).index_copy_(0, rows, vals[: rows.numel() * group].view(-1, group))
        if partial:
            out[whole * group:] = vals[rows.numel() * group: rows.numel() * group + n - whole * group]

    @staticmethod
    def place(positions: torch.Tensor, values: np.ndarray, out: torch.Tensor) -> None:
        out.index_copy_(0, positions, TorchKernels.from_wire(values, out))

    # -- the sketch ------------------------------------------------------------------------------
    @staticmethod
    def _cells(params: CodecParams, rows: int, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(cell, sign) of each position in each sub-table: two (n, 3) int64 tensors, lane-major cells."""
        row_of, sign_of = _layout(params, rows, pos.device)
        block, lane = pos // params.lanes, pos % params.lanes
        base = lane * (sketch.TABLES * rows)
        cells = torch.stack([base + j * rows + take(row_of[j], block) for j in range(sketch.TABLES)], dim=1)
        signs = torch.stack([take(sign_of[j], block) for j in range(sketch.TABLES)], dim=1)
        return cells, signs

    @staticmethod
    def sketch_encode(step, rows: int) -> torch.Tensor:
        p = step.params
        pos = positions(step.own, p.length)
        cells, signs = TorchKernels._cells(p, rows, pos)
        q = step.mine().to(torch.int64).unsqueeze(1)
        acc = torch.zeros(sketch.TABLES * rows * p.lanes, dtype=torch.int64, device=pos.device)
        acc.index_add_(0, cells.view(-1), (signs * q).view(-1))  # exact in int64, then wrapped as the switch
        return wrap32(acc)

    @staticmethod
    def peel(params: CodecParams, rows: int, union: torch.Tensor, union_size: int, agg: np.ndarray,
             out: torch.Tensor) -> torch.Tensor:
        """sketch.peel in parallel rounds; returns the unpeeled positions (ascending, int64)."""
        cells_total = sketch.TABLES * rows * params.lanes
        if agg.shape != (cells_total,):
            raise ValueError(f"sketch phase: expected {cells_total} words, got {agg.size}")
        pos = positions(union, out.numel())
        cells, signs = TorchKernels._cells(params, rows, pos)
        cell = TorchKernels.from_wire(agg, out).to(torch.int64)
        count = torch.bincount(cells.view(-1), minlength=cells_total)
        value = torch.zeros(pos.numel(), dtype=torch.int64, device=pos.device)
        live = torch.arange(pos.numel(), device=pos.device)  # the elements not yet peeled
        while live.numel():
            mine = take(cells, live)
            pure = take(count, mine.view(-1)).view(-1, sketch.TABLES) == 1  # a cell holding one live element
            found = pure.any(dim=1)
            hit = torch.nonzero(found).view(-1)
            if hit.numel() == 0:
                break
            ready = take(live, hit)
            j = take(pure, hit).to(torch.uint8).argmax(dim=1, keepdim=True)  # the first pure cell of each
            touched = take(mine, hit)
            c = touched.gather(1, j).view(-1)
            sign = take(signs, ready)
            v = wrap32(sign.gather(1, j).view(-1) * wrap32(take(cell, c)).to(torch.int64)).to(torch.int64)
            value.index_copy_(0, ready, v)
            live = take(live, torch.nonzero(~found).view(-1))
            cell.index_add_(0, touched.view(-1), -(sign * v.unsqueeze(1)).view(-1))
            count.index_add_(0, touched.view(-1), torch.full_like(touched.view(-1), -1))
        out.zero_()
        out.index_copy_(0, pos, value.to(torch.int32))  # values are int32 already: no wrap
        out.index_fill_(0, take(pos, live), 0)  # 0 where unpeeled
        return pos[live.sort().values]

    # -- the sum ---------------------------------------------------------------------------------
    @staticmethod
    def output(step) -> torch.Tensor:
        if step.out is not None:
            return step.out
        return torch.empty(step.grad.numel(), dtype=torch.int32, device=step.grad.device)

    @staticmethod
    def adopt(step, aggregate: np.ndarray) -> torch.Tensor:
        fixed = TorchKernels.from_wire(aggregate, step.grad)
        if step.out is None:
            return fixed
        step.out.copy_(fixed)
        return step.out

    dequantize = staticmethod(dequantize)

    @staticmethod
    def as_int64(fixed: torch.Tensor) -> torch.Tensor:
        return fixed.to(torch.int64)


@functools.lru_cache(maxsize=16)
def _layout_cached(params: CodecParams, rows: int, device: torch.device) -> tuple[tuple, tuple]:
    row_of, sign_of = sketch.layout(params, rows)
    to = functools.partial(torch.as_tensor, dtype=torch.int64, device=device)
    return tuple(to(r) for r in row_of), tuple(to(s) for s in sign_of)


def _layout(params: CodecParams, rows: int, device: torch.device):
    """sketch.layout's rows and signs on `device` (hashed once per job, size and device)."""
    return _layout_cached(params, rows, device)


TORCH = TorchKernels()

__all__ = ["TORCH", "TorchKernels", "bits_of", "dequantize", "dtype_name", "positions", "quantize", "to_float16",
           "words_of", "wrap32"]
