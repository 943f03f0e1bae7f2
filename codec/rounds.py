"""What an encoding works with: rounds of segments, the worker's step state, reusable buffers.

A *round* (`Phase`) is one trip through the switch: one or more segments
sent together, each aggregated with its own operator (the switch applies
the op of each packet, and a packet never straddles two segments), and
answered by the concatenated aggregates.  Sending the index (OR) and the
sketch (ADD), or the parameter check (OR), the scale (MAX) and the union
statistics (ADD), in one round saves a round trip each.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import time
from collections.abc import Iterator

import numpy as np

from .ops import Op

WORD_BYTES = 4
# An aggregate that contradicts this worker's own words can also be a switch that still holds an earlier
# run's results for the same slots (a job restarted without a reset): say so next to the error.
RESTART_HINT = ("; if this job was restarted against a running switch, the switch may still hold the earlier "
                "run's slots: reset the job there and run again")


@dataclasses.dataclass(frozen=True, eq=False)
class Segment:
    """Words (int32) that the switch combines with `op`."""

    name: str
    op: Op
    words: np.ndarray


@dataclasses.dataclass(frozen=True, eq=False)
class Phase:
    """One round: the segments every worker sends together, in this order."""

    segments: tuple[Segment, ...]

    @property
    def name(self) -> str:
        return "+".join(s.name for s in self.segments)

    @functools.cached_property
    def words(self) -> np.ndarray:
        """All segments' words back to back: what goes through the switch."""
        if len(self.segments) == 1:
            return self.segments[0].words
        return np.concatenate([s.words for s in self.segments])

    @functools.cached_property
    def ops(self) -> tuple[tuple[Op, int, int], ...]:
        """(op, start, stop) of each segment within `words`."""
        out, start = [], 0
        for s in self.segments:
            out.append((s.op, start, start + s.words.size))
            start += s.words.size
        return tuple(out)

    @property
    def op(self) -> Op:
        """The operator of a one-segment round."""
        if len(self.segments) != 1:
            raise AttributeError(f"round {self.name!r} has {len(self.segments)} segments: use `ops`")
        return self.segments[0].op

    def split(self, aggregate: np.ndarray) -> tuple[np.ndarray, ...]:
        """The aggregate of each segment, from the round's concatenated aggregate."""
        return tuple(aggregate[start:stop] for _, start, stop in self.ops)


class Workspace:
    """Buffers reused across aggregations, so a steady-state step does not page-fault fresh memory.

    One per worker (they are not shared between concurrent sessions).
    """

    def __init__(self) -> None:
        self._buffers: dict[str, np.ndarray] = {}

    def buffer(self, name: str, size: int, dtype) -> np.ndarray:
        """An uninitialized array of `size` elements; the same memory next time when it fits."""
        dtype = np.dtype(dtype)
        held = self._buffers.get(name)
        if held is None or held.dtype != dtype or held.size < size:
            held = self._buffers[name] = np.empty(max(size, 1), dtype=dtype)
        return held[:size]


@dataclasses.dataclass(eq=False)
class Step:
    """One worker's state after the scale round: what every encoding starts from.

    grad: the flat gradient (float32/float64/int32); shift: s (None for
    int32); own: this worker's support bitmap (uint32 words, bit i = g[i] !=
    0); compact: its non-zeros in position order (`mine()`: the same in
    fixed point); estimate: the union
    estimate all workers share; group: the index's group size (1: one level).
    Encodings record what they report (union, rows, residual) in `report`.
    """

    params: object
    grad: np.ndarray
    shift: int | None
    own: np.ndarray
    compact: np.ndarray
    estimate: object
    group: int
    workspace: Workspace
    out: np.ndarray | None
    seconds: dict[str, float]
    sent: dict[str, int]
    kernels: object = None
    report: dict = dataclasses.field(default_factory=dict)
    _mine: np.ndarray | None = None

    def mine(self) -> np.ndarray:
        """This worker's non-zeros in fixed point (int32, position order), quantized once on first use:
        aligned and the sketch need them, dense and blocks read the whole tensor instead.  Callers
        time it as part of their encode."""
        if self._mine is None:
            self._mine = self.kernels.quantize_compact(self)
        return self._mine

    def segment(self, name: str, op: Op, words) -> Segment:
        """Words for the wire: a numpy int32 array in host memory, whatever the backend computed them on."""
        words = self.kernels.to_wire(words)
        self.sent[name] = self.sent.get(name, 0) + WORD_BYTES * words.size
        return Segment(name, op, words)

    @staticmethod
    def round(*segments: Segment) -> Phase:
        return Phase(tuple(segments))

    @contextlib.contextmanager
    def timed(self, what: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.kernels.sync()  # an asynchronous device's work counts where it was queued
            self.seconds[what] += time.perf_counter() - start

    def output(self):
        """Where the sum goes: the caller's `out` buffer, or a fresh int32 array of the backend."""
        return self.kernels.output(self)

    def adopt(self, aggregate: np.ndarray):
        """A whole-tensor aggregate as the sum (copied only into a caller's buffer, or to the device)."""
        return self.kernels.adopt(self, aggregate)

    def zeros(self) -> np.ndarray:
        fixed = self.output()
        fixed[:] = 0
        return fixed
