"""All phases of one aggregation with numpy standing in for the switch.

This is the reference the tests and benchmarks use: it runs the very
`WorkerSession` phases the host agents run, and aggregates each phase with
the switch's operators (`ops.reduce_words`: MAX, OR, wrapping ADD).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from hina.cliargs import plural

from .ops import reduce_words
from .params import MAX_WORKERS, CodecParams, check_dtype
from .rounds import Phase, Workspace
from .session import WorkerResult, WorkerSession


@dataclasses.dataclass(frozen=True, eq=False)
class AllreduceResult:
    """The aggregate every worker decoded (they agree bit for bit; see `workers`).

    fixed: S (int32); shift: s (None for int32 input); sum: S / 2**s (float64)
    or S (int64); encoding: the one that ran; residual: elements carried by
    the residual round; bytes_per_worker: payload bytes one worker sent,
    per segment and "total"; union: |U|; rows: the sketch's R; params: the
    job; aggregates: what the switch returned for each round, in order
    (feed them to `replay` to re-run one worker alone).
    """

    params: CodecParams
    workers: tuple[WorkerResult, ...]
    aggregates: tuple[np.ndarray, ...]

    @property
    def _first(self) -> WorkerResult:
        return self.workers[0]

    @property
    def fixed(self) -> np.ndarray:
        return self._first.fixed

    @property
    def shift(self) -> int | None:
        return self._first.shift

    @property
    def sum(self) -> np.ndarray:
        return self._first.sum

    @property
    def residual(self) -> int:
        return self._first.residual

    @property
    def union(self) -> int | None:
        return self._first.union

    @property
    def rows(self) -> int:
        return self._first.rows

    @property
    def encoding(self) -> str:
        return self._first.encoding

    @property
    def group(self) -> int:
        return self._first.group

    @property
    def bytes_per_worker(self) -> dict[str, int]:
        sent = dict(self._first.bytes_sent)
        sent["total"] = sum(sent.values())
        return sent

    @property
    def dense_bytes_per_worker(self) -> int:
        """What the SwitchML-style dense aggregation sends: 4 bytes per element."""
        return 4 * self.params.length


def check_gradients(grads: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The refusals that need the whole list: empty, too many, mixed dtypes or lengths."""
    if isinstance(grads, np.ndarray):
        raise ValueError("pass a list with one gradient per worker, not a single array")
    grads = [np.asarray(g) for g in grads]
    if not grads:
        raise ValueError("no gradients: pass one array per worker")
    if len(grads) > MAX_WORKERS:
        raise ValueError(f"{len(grads)} workers: hina supports at most {MAX_WORKERS}")
    for w, g in enumerate(grads):
        check_dtype(g.dtype)
        if g.size == 0:
            raise ValueError(f"worker {w}'s gradient is empty")
    dtypes = {g.dtype.name for g in grads}
    if len(dtypes) > 1:
        raise ValueError(f"workers' gradients have different dtypes: {sorted(dtypes)}")
    if len({g.shape for g in grads}) > 1:  # each worker's shape and size, in worker order
        listing = ", ".join(f"worker {w} {g.shape} ({plural(g.size, 'element')})" for w, g in enumerate(grads))
        raise ValueError(f"workers' gradients have different shapes: {listing}")
    return grads


def simulate_allreduce(grads: Sequence[np.ndarray], *, mode: str = "auto", **params) -> AllreduceResult:
    """Aggregate one gradient per worker through every round; return what they decode.

    `params` are further `CodecParams` fields (group, lanes, cells_per_element, seeds, ...).
    """
    grads = check_gradients(grads)
    params = CodecParams(length=grads[0].size, workers=len(grads), dtype=grads[0].dtype.name, mode=mode, **params)
    sessions = [WorkerSession(params, g, who=f"worker {w}'s gradient") for w, g in enumerate(grads)]
    aggregates = []
    while not sessions[0].done:
        phases = [s.next_phase() for s in sessions]
        names = {ph.name for ph in phases}
        if len(names) != 1:  # cannot happen with one params object; would be a codec bug
            raise RuntimeError(f"workers disagree on the next phase: {sorted(names)}")
        aggregate = aggregate_round(phases)
        aggregates.append(aggregate)
        for s in sessions:  # each its own copy, as over a network: a result may keep the array it was fed
            s.receive(aggregate.copy())
    return AllreduceResult(params, tuple(s.result() for s in sessions), tuple(aggregates))


def aggregate_round(phases: Sequence[Phase]) -> np.ndarray:
    """What the switch returns for one round: each segment combined with its own op."""
    first = phases[0]
    if len(first.segments) == 1:
        return reduce_words(first.op, [ph.words for ph in phases])
    return np.concatenate([reduce_words(op, [ph.words[start:stop] for ph in phases])
                           for op, start, stop in first.ops])


def replay(params: CodecParams, grad: np.ndarray, aggregates: Sequence[np.ndarray], *,
           out: np.ndarray | None = None, workspace: Workspace | None = None) -> WorkerResult:
    """Run one worker alone against recorded round aggregates (e.g. to time it)."""
    session = WorkerSession(params, grad, out=out, workspace=workspace)
    for aggregate in aggregates:
        session.receive(aggregate)
    return session.result()
