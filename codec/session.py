"""One worker's side of an aggregation, as a sequence of rounds that do no I/O.

A `WorkerSession` hands out one `Phase` (a round of segments, each with its
operator and this worker's int32 words) at a time; whoever drives it (numpy
in `simulate_allreduce`, the network in `host/`) aggregates every segment
across workers and feeds the round's aggregate back with `receive`.

Every aggregation starts with the same round, whatever the mode:

    check (OR of the parameters' fingerprint and its complement: a worker of a
           mismatched job refuses before any gradient data is sent)
    scale (MAX of the exponent, or int32 peak, and of the non-zero count)
    stats (ADD of the union statistics the cost model reads, `codec.auto`)

then every worker picks the same encoding (`auto.choose`) and runs it:
`dense`, `blocks`, `aligned` or `sketch`, one module each.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Generator

import numpy as np

from . import aligned, auto, blocks, dense, scale, sketch
from .kernels import kernels_for
from .ops import Op
from .params import CodecParams
from .rounds import RESTART_HINT, Phase, Segment, Step, Workspace

ENCODINGS = {"dense": dense.run, "blocks": blocks.run, "aligned": aligned.run, "sketch": sketch.run}


@dataclasses.dataclass(frozen=True, eq=False)
class WorkerResult:
    """What a worker holds after the last round.

    fixed: S, the int32 sum of the workers' quantized gradients (input
    shape; the caller's `out` buffer when one was given); shift: s (None for
    int32 input); encoding: which one ran ("dense", "blocks", "aligned",
    "sketch"); group: the index's group size (1: one level; 0: no index);
    union: |U| (blocks: the elements of the union's blocks; None for
    dense); rows: the sketch's R (0 without a sketch); residual: elements
    the residual round carried; rounds: trips through the switch;
    bytes_sent: payload bytes this worker sent per segment (headers
    excluded); seconds: compute time producing words ("encode") and
    decoding ("decode"), network waits never counted; estimate: the union
    estimate the choice was made from.
    """

    fixed: np.ndarray
    shift: int | None
    encoding: str
    group: int
    union: int | None
    rows: int
    residual: int
    rounds: int
    bytes_sent: dict[str, int]
    seconds: dict[str, float]
    estimate: auto.Estimate | None = None

    @property
    def sum(self) -> np.ndarray:
        """S / 2**s as float64 for float input; S as int64 for int32 input.

        float64 input within a factor ~2N of the largest float64 can sum past
        float64 itself: those elements come out as +-inf (S stays exact).
        """
        kernels = kernels_for(self.fixed)  # a torch tensor's sum stays a tensor, on its device
        if self.shift is None:
            return kernels.as_int64(self.fixed)
        return kernels.dequantize(self.fixed, self.shift)


class WorkerSession:
    """Drive one worker through the rounds: `next_phase`, then `receive`, until `done`.

    grad: a numpy array (the compiled numba kernels) or a torch tensor on
    any device (torch ops, `codec.torch_kernels`: the words of every round
    are the same bits; only they cross to host memory); out: an int32 array
    of d elements to receive the sum, of the gradient's kind and device (a
    reused buffer spares the page faults of fresh memory); workspace:
    buffers to reuse across aggregations (one per worker).
    """

    def __init__(self, params: CodecParams, grad: np.ndarray, *, who: str = "gradient",
                 out: np.ndarray | None = None, workspace: Workspace | None = None):
        self.params = params
        self._who = who
        self._seconds = {"encode": 0.0, "decode": 0.0}
        self._kernels = kernels_for(grad)
        self._shape = tuple(grad.shape) if hasattr(grad, "shape") else np.shape(grad)
        self._workspace = workspace or Workspace()
        start = time.perf_counter()
        # the scan finds NaN and Inf
        self._grad = self._kernels.check_gradient(params, grad, who=who, finite=False)
        self._out = self._kernels.check_out(params, out, self._grad)
        self._seconds["encode"] += time.perf_counter() - start
        self._sent: dict[str, int] = {}
        self._rounds = 0
        self._result: WorkerResult | None = None
        self._steps = self._run()
        self._pending: Phase | None = next(self._steps)

    @property
    def done(self) -> bool:
        return self._result is not None

    def next_phase(self) -> Phase | None:
        """The round waiting for its aggregate, or None once the result is ready."""
        return self._pending

    def receive(self, aggregate: np.ndarray) -> None:
        """Feed the aggregate of the pending round (int32 words, as many as were sent)."""
        phase = self._pending
        if phase is None:
            raise RuntimeError("no phase is pending: the session is done")
        aggregate = np.asarray(aggregate)
        if aggregate.shape != phase.words.shape:
            raise ValueError(f"{phase.name} phase: expected {phase.words.shape[0]} aggregated words, "
                             f"got {aggregate.size}")
        self._rounds += 1
        try:
            self._pending = self._steps.send(phase.split(aggregate.astype(np.int32, copy=False)))
        except StopIteration:
            self._pending = None

    def result(self) -> WorkerResult:
        if self._result is None:
            raise RuntimeError("the session has phases left; drive it until done")
        return self._result

    # -- the rounds ---------------------------------------------------------
    def _run(self) -> Generator[Phase, tuple[np.ndarray, ...], None]:
        p, k = self.params, self._kernels
        step = Step(p, k.prepare(self._grad), None, None, None, None, 1, self._workspace, self._out,
                    self._seconds, self._sent, kernels=k)
        with step.timed("encode"):
            own, compact = k.scan(step.grad, self._workspace)
            if p.is_float:
                peak = k.float_peak(compact)
                if not np.isfinite(peak):
                    k.check_finite(self._grad, who=self._who)  # raises, naming the first bad position
                word = scale.EXPONENT_FLOOR if peak == 0.0 else int(np.frexp(peak)[1])
            else:
                word = k.int32_peak(compact)
            nnz = min(k.size(compact), scale.INT32_MAX)
            terms = auto.union_terms(k.group_counts(own), p.length)
        fp = np.array([p.fingerprint(), ~p.fingerprint() & 0xFFFFFFFF], dtype=np.uint32).view(np.int32)
        check, scaled, stats = yield step.round(step.segment("check", Op.OR, fp),
                                                step.segment("scale", Op.MAX, np.array([word, nnz])),
                                                step.segment("stats", Op.ADD, terms))
        # OR of [f, ~f] equals [f, ~f] at every worker iff all fingerprints are equal
        if not np.array_equal(check, fp):
            raise ValueError(
                f"mismatched job parameters: this worker's fingerprint is {p.fingerprint():#010x} "
                f"but the workers' OR gives {int(check.view(np.uint32)[0]):#010x}/"
                f"{int(check.view(np.uint32)[1]):#010x}; this worker has {p.to_json()}")
        if p.is_float:
            if scaled[0] < word:
                raise ValueError(f"scale phase: aggregate exponent {scaled[0]} is below this worker's own "
                                 f"({word}){RESTART_HINT}")
            step.shift = scale.shift_for(int(scaled[0]), p.workers)
        else:  # int32 is already fixed point, but N of them can overflow
            scale.check_int32_sum(int(scaled[0]), p.workers)
        step.own, step.compact = own, compact
        step.estimate = auto.Estimate.from_aggregates(p.length, int(scaled[1]), stats)
        plan = auto.choose(p, step.estimate)
        step.group = plan.group
        fixed = yield from ENCODINGS[plan.encoding](step)
        r = step.report
        self._result = WorkerResult(
            fixed=fixed.reshape(self._shape), shift=step.shift, encoding=plan.encoding,
            group=plan.group if plan.encoding in ("aligned", "sketch") else 0,
            union=r.get("union"), rows=r.get("rows", 0), residual=r.get("residual", 0),
            rounds=self._rounds, bytes_sent=dict(self._sent), seconds=dict(self._seconds),
            estimate=step.estimate)


__all__ = ["Phase", "Segment", "WorkerResult", "WorkerSession"]
