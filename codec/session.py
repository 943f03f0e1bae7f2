"""One worker's side of an aggregation, as a sequence of phases that do no I/O.

A `WorkerSession` hands out one `Phase` at a time (the op and this worker's
int32 words); whoever drives it (numpy in `simulate_allreduce`, the network
in `host/`) aggregates the phase across workers and feeds the aggregate back
with `receive`.  The phase logic reads top to bottom in `_phases`:

    check (OR) -> scale (MAX) -> index (OR) -> sketch (ADD) -> [residual (ADD)]

or, when the union turns out so dense that the sketch would outweigh the
tensor, check -> scale -> index -> dense; in dense mode (the SwitchML-style
baseline) check -> scale -> dense (ADD of every quantized element); in
blocks mode (an OmniReduce-style baseline) check -> scale -> block_index
(OR of the bitmap of non-zero 256-element blocks) -> blocks (ADD of the
union's blocks).
The check phase ORs the parameters' fingerprint so that workers of a
mismatched job all refuse before any gradient data is sent.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Generator, Iterator

import numpy as np

from . import index, peel, scale, sketch
from .ops import Op
from .params import CodecParams, check_dtype

WORD_BYTES = 4
BLOCK_ELEMENTS = 256  # blocks mode: OmniReduce's block size (its artifact's default)


@dataclasses.dataclass(frozen=True, eq=False)
class Phase:
    """One aggregation: every worker sends `words` (int32) combined with `op`."""

    name: str
    op: Op
    words: np.ndarray


@dataclasses.dataclass(frozen=True, eq=False)
class WorkerResult:
    """What a worker holds after the last phase.

    fixed: S, the int32 sum of the workers' quantized gradients (input shape);
    shift: s (None for int32 input); union: |U| (None in dense mode); rows: the sketch's R (0 if
    no sketch was sent); residual: elements the residual phase carried;
    peel_rounds: rounds of the peeling decoder; bytes_sent: payload bytes
    this worker sent per phase (headers excluded); seconds: compute time
    spent producing words ("encode") and decoding, split into the work that
    needs only the union ("decode_union") and the work after the sketch
    arrives ("decode_sketch"); network waits are never counted; fell_back:
    hina mode finished with a dense ADD because the union was too dense for
    the sketch to pay.  In blocks mode `union` counts the elements of the
    union's blocks.
    """

    fixed: np.ndarray
    shift: int | None
    union: int | None
    rows: int
    residual: int
    peel_rounds: int
    bytes_sent: dict[str, int]
    seconds: dict[str, float]
    fell_back: bool = False

    @property
    def sum(self) -> np.ndarray:
        """S / 2**s as float64 for float input; S as int64 for int32 input.

        float64 input within a factor ~2N of the largest float64 can sum past
        float64 itself: those elements come out as +-inf (S stays exact).
        """
        if self.shift is None:
            return self.fixed.astype(np.int64)
        return scale.dequantize(self.fixed, self.shift)


def check_gradient(params: CodecParams, grad: np.ndarray, *, who: str = "gradient") -> np.ndarray:
    """Refuse a gradient that does not fit the job, before anything is sent; return it flat."""
    grad = np.asarray(grad)
    name = check_dtype(grad.dtype)
    if name != params.dtype:
        raise ValueError(f"{who} is {name} but the job's dtype is {params.dtype}")
    if grad.size != params.length:
        raise ValueError(f"{who} has {grad.size} elements but the job's length is {params.length}")
    scale.check_finite(grad, who=who)
    return grad.reshape(-1)


class WorkerSession:
    """Drive one worker through the codec's phases: `next_phase`, then `receive`, until `done`."""

    def __init__(self, params: CodecParams, grad: np.ndarray, *, who: str = "gradient"):
        self.params = params
        self._seconds = {"encode": 0.0, "decode_union": 0.0, "decode_sketch": 0.0}
        self._shape = np.shape(grad)
        with self._timed("encode"):
            self._grad = check_gradient(params, grad, who=who)
        self._bytes: dict[str, int] = {}
        self._result: WorkerResult | None = None
        self._steps = self._phases()
        self._pending: Phase | None = next(self._steps)

    @property
    def done(self) -> bool:
        return self._result is not None

    def next_phase(self) -> Phase | None:
        """The phase waiting for its aggregate, or None once the result is ready."""
        return self._pending

    def receive(self, aggregate: np.ndarray) -> None:
        """Feed the aggregate of the pending phase (int32 words, same length as sent)."""
        phase = self._pending
        if phase is None:
            raise RuntimeError("no phase is pending: the session is done")
        aggregate = np.asarray(aggregate)
        if aggregate.shape != phase.words.shape:
            raise ValueError(
                f"{phase.name} phase: expected {phase.words.shape[0]} aggregated words, got {aggregate.size}"
            )
        try:
            self._pending = self._steps.send(aggregate.astype(np.int32, copy=False))
        except StopIteration:
            self._pending = None

    def result(self) -> WorkerResult:
        if self._result is None:
            raise RuntimeError("the session has phases left; drive it until done")
        return self._result

    # -- the phases --------------------------------------------------------
    def _send(self, name: str, op: Op, words: np.ndarray) -> Phase:
        words = np.ascontiguousarray(words, dtype=np.int32)
        self._bytes[name] = self._bytes.get(name, 0) + WORD_BYTES * words.size
        return Phase(name, op, words)

    @contextlib.contextmanager
    def _timed(self, what: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self._seconds[what] += time.perf_counter() - start

    def _phases(self) -> Generator[Phase, np.ndarray, None]:
        # `encode` times the work that produces this worker's words; decoding is
        # split into what needs only the union (it can overlap the sketch
        # phase) and what needs the aggregated sketch.  No yield sits inside a
        # timed block, so waiting for the network is never counted.
        p, g = self.params, self._grad
        # Agreement: OR of [f, ~f] equals [f, ~f] at every worker iff all
        # fingerprints f are equal, so every worker of a mismatched job refuses
        # before any gradient data is sent.
        fp = np.array([p.fingerprint(), ~p.fingerprint() & 0xFFFFFFFF], dtype=np.uint32).view(np.int32)
        agg = yield self._send("check", Op.OR, fp)
        if not np.array_equal(agg, fp):
            raise ValueError(
                f"mismatched job parameters: this worker's fingerprint is {p.fingerprint():#010x} "
                f"but the workers' OR gives {int(agg.view(np.uint32)[0]):#010x}/{int(agg.view(np.uint32)[1]):#010x}; "
                f"this worker has {p.to_json()}"
            )
        # Scale (MAX): each worker's magnitude word, and its count of non-zeros, whose maximum
        # is a lower bound on the union: if even that makes the sketch outweigh the tensor, every
        # worker knows now and the aggregation goes dense without an index phase.
        shift = None
        with self._timed("encode"):
            own_count = min(int(np.count_nonzero(g)), scale.INT32_MAX)
            own_word = scale.exponent(g) if p.is_float else scale.int32_peak(g)
        agg = yield self._send("scale", Op.MAX, np.array([own_word, own_count]))
        if p.is_float:
            if agg[0] < own_word:
                raise ValueError(f"scale phase: aggregate exponent {agg[0]} is below this worker's own")
            shift = scale.shift_for(int(agg[0]), p.workers)
        else:  # int32 is already fixed point, but N of them can overflow
            scale.check_int32_sum(int(agg[0]), p.workers)

        if p.mode == "dense":
            yield from self._dense(g, shift)
        elif p.mode == "blocks":
            yield from self._blocks(g, shift)
        elif _sketch_cannot_pay(p, int(agg[1])):
            yield from self._dense(g, shift, fell_back=True)
        else:
            yield from self._hina(g, shift, dense_first=8 * own_count > p.length)

    def _dense(self, g: np.ndarray, shift: int | None, *, union: int | None = None, q: np.ndarray | None = None,
               fell_back: bool = False) -> Generator[Phase, np.ndarray, None]:
        """Every quantized element, ADDed: the SwitchML-style baseline, and hina's fall-back."""
        if q is None:
            with self._timed("encode"):
                q = _quantized(g, shift)
        agg = yield self._send("dense", Op.ADD, q)
        self._finish(agg.copy(), shift, union=union, fell_back=fell_back)

    def _hina(self, g: np.ndarray, shift: int | None, *, dense_first: bool) -> Generator[Phase, np.ndarray, None]:
        """dense_first: this worker is dense enough (> 1/8) that whole-array kernels beat index lists."""
        p = self.params
        with self._timed("encode"):
            if dense_first:
                q = _quantized(g, shift)
                own = index.support_words_dense(q != 0)
                idx = vals = None
            else:
                q = None
                idx, vals = _sparse_fixed_point(g, shift)
                own = index.support_words(idx, p.length)
        union_words = yield self._send("index", Op.OR, own)
        with self._timed("decode_union"):
            _check_union(own, union_words, "index phase", "non-zeros")
            union_size = int(np.bitwise_count(union_words.view(np.uint32)).sum())
            if union_size == 0:  # everyone is all-zero: every worker knows, no sketch needed
                self._finish(np.zeros(p.length, dtype=np.int32), shift, union=0)
                return
            layout = None
            if not _sketch_cannot_pay(p, union_size):
                union = index.union_indices(union_words, p.length)
                layout = sketch.SketchLayout.for_union(p, union)
        if layout is None or layout.words >= p.length:
            # The union is so dense that the sketch would be larger than the tensor: every
            # worker sees the same union, so all of them finish with a dense ADD instead.
            if q is None:
                with self._timed("encode"):
                    q = np.zeros(p.length, dtype=np.int32)
                    q[idx] = vals
            yield from self._dense(g, shift, union=union_size, q=q, fell_back=True)
            return
        if idx is None:
            with self._timed("encode"):
                idx = np.flatnonzero(q)
                vals = q[idx]
        with self._timed("encode"):
            own_sketch = sketch.encode(layout, idx, vals)
        with self._timed("decode_union"):
            decoder = peel.Decoder(layout, union)
        agg = yield self._send("sketch", Op.ADD, own_sketch)
        with self._timed("decode_sketch"):
            peeled = decoder.peel(agg)
            fixed = np.zeros(p.length, dtype=np.int32)
            fixed[peeled.indices] = peeled.values
        if peeled.residual.size:
            with self._timed("encode"):
                residual_words = _lookup(idx, vals, peeled.residual)
            fixed[peeled.residual] = yield self._send("residual", Op.ADD, residual_words)
        self._finish(fixed, shift, union=union.size, rows=layout.rows,
                     residual=peeled.residual.size, rounds=peeled.rounds)

    def _blocks(self, g: np.ndarray, shift: int | None) -> Generator[Phase, np.ndarray, None]:
        """OmniReduce-style: OR the bitmap of non-zero 256-element blocks, then ADD the union's blocks."""
        p, size = self.params, BLOCK_ELEMENTS
        nblocks = -(-p.length // size)
        with self._timed("encode"):  # whole-array kernels: block sparsity is about blocks, not elements
            q = np.zeros(nblocks * size, dtype=np.int32)
            q[: p.length] = _quantized(g, shift)
            q_blocks = q.reshape(nblocks, size)
            own = index.support_words_dense(q_blocks.any(axis=1))
        union_words = yield self._send("block_index", Op.OR, own)
        with self._timed("decode_union"):
            _check_union(own, union_words, "block index phase", "blocks")
            blocks = index.union_indices(union_words, nblocks)
        if blocks.size == nblocks:  # every block: no gather, no scatter
            fixed = (yield self._send("blocks", Op.ADD, q)).copy()
        else:
            fixed = np.zeros(nblocks * size, dtype=np.int32)
            if blocks.size:
                with self._timed("encode"):
                    words = q_blocks[blocks].reshape(-1)
                agg = yield self._send("blocks", Op.ADD, words)
                with self._timed("decode_sketch"):
                    fixed.reshape(nblocks, size)[blocks] = agg.reshape(blocks.size, size)
        self._finish(fixed[: p.length], shift, union=int(blocks.size) * size)

    def _finish(self, fixed: np.ndarray, shift: int | None, *, union: int | None,
                rows: int = 0, residual: int = 0, rounds: int = 0, fell_back: bool = False) -> None:
        self._result = WorkerResult(
            fixed=fixed.reshape(self._shape), shift=shift, union=union, rows=rows,
            residual=residual, peel_rounds=rounds, bytes_sent=dict(self._bytes),
            seconds=dict(self._seconds), fell_back=fell_back,
        )


def _quantized(grad: np.ndarray, shift: int | None) -> np.ndarray:
    """The whole tensor in fixed point: int32 as is, floats scaled by the agreed shift."""
    return grad.astype(np.int32) if shift is None else scale.quantize_values(grad, shift, check=False)


def _check_union(own: np.ndarray, union_words: np.ndarray, phase: str, what: str) -> None:
    """An OR of everyone's bitmaps holds every bit of this worker's own; anything else is not our job's."""
    if np.any(own & ~union_words):
        raise ValueError(f"{phase}: the union bitmap lacks some of this worker's {what}")


def _sketch_cannot_pay(params: CodecParams, union_lower_bound: int) -> bool:
    """Would the sketch (at least c cells per union element) be no smaller than the tensor itself,
    or the union larger than the job's max_union allows?"""
    c, m = params.cell_factor, params.union_limit
    return (c.numerator * union_lower_bound >= c.denominator * params.length
            or m.denominator * union_lower_bound > m.numerator * params.length)


def _sparse_fixed_point(grad: np.ndarray, shift: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Positions and int32 values of the non-zeros of q = quantize(grad, shift).

    Only the non-zeros of g are scaled; values that round to zero are dropped,
    so the support is exactly that of q.
    """
    nz = np.flatnonzero(grad != 0)  # much faster than flatnonzero(grad) on floats
    if shift is None:
        return nz, grad[nz].astype(np.int32)
    vals = scale.quantize_values(grad[nz], shift, check=False)
    keep = vals != 0
    if keep.all():
        return nz, vals
    return nz[keep], vals[keep]


def _lookup(indices: np.ndarray, values: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """values at the positions `wanted` (0 where this worker has no non-zero)."""
    out = np.zeros(wanted.size, dtype=np.int32)
    if indices.size:
        pos = np.minimum(np.searchsorted(indices, wanted), indices.size - 1)
        hit = indices[pos] == wanted
        out[hit] = values[pos[hit]]
    return out
