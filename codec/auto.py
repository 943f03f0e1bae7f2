"""auto: every worker picks the same encoding from numbers all of them hold after the scale round.

The scale round carries, besides the exponent (MAX) and the largest
non-zero count (MAX), one ADD word per group size G = 1, 2, ..., 1024:
round(-log2(1 - n_G / m_G) * 2**16), where this worker has n_G non-empty
groups out of m_G.  Their sum is -log2 of the probability that a group
is empty in every worker if supports were independent, so

    v_G = 1 - 2 ** -(sum / 2**16)        (the union's fraction of non-empty groups)

and |U| ~ max(v_1 d, max nnz).  Correlated supports (popular embedding rows)
make the true union smaller: the estimate errs towards the denser encoding,
never towards a wrong sum.

The cost model, in seconds, for words sent per worker and rounds after the
scale round (the same for all encodings, so left out):

    seconds = 4 * words / link_rate + rounds * round_time + peeled elements * PEEL_SECONDS

| encoding | words per worker | rounds |
|---|---|---|
| dense | d | 1 |
| blocks | ceil(d/256)/32 + 256 v_256 d/256 | 2 |
| aligned | index(G) + |U| | index rounds + 1 |
| sketch | index(G) + 3 R L | index rounds (the sketch rides on the last) + the residual's chance |

index(1) = d/32 in one round; index(G) = ceil(d/G)/32 + v_G d/32 in two.
The sketch's residual round is charged as the probability that one is
needed (`residual_chance`): with L lanes of n elements and R rows, pairs
of elements that share all three cells are expected L n^2 / (2 R^3) times.
G is the cheapest by the same formula; link_rate and round_time are the
job's `link_gbps` and `round_us` (CodecParams), so every worker computes
the same costs with the same IEEE arithmetic, and ties go to the earlier
row.  All of it is integer sums and +, -, *, /, sqrt, which IEEE 754 rounds
identically everywhere (exp2 is a fixed polynomial, not the C library's).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from . import bitmap, sketch
from .blocks import BLOCK_ELEMENTS
from .params import CodecParams

TERM_UNIT = 1 << 16  # fixed point of the -log2 terms
TERM_CAP = 32 * TERM_UNIT  # a worker whose groups are all non-empty; 32 workers sum to < 2**26
PEEL_SECONDS = 50e-9  # per union element: the lane peeler at d = 2^25, 1%, N = 8 (codec_bench: sketch decode)
ENCODINGS = ("dense", "blocks", "aligned", "sketch")


def union_terms(counts: np.ndarray, length: int) -> np.ndarray:
    """This worker's ADD words: -log2(1 - n_G/m_G) in 1/2**16 units for each group size."""
    terms = np.empty(len(bitmap.GROUP_SIZES), dtype=np.int32)
    for k, group in enumerate(bitmap.GROUP_SIZES):
        n, m = int(counts[k]), bitmap.groups(length, group)
        terms[k] = TERM_CAP if n >= m else min(TERM_CAP, round(-math.log2(1 - n / m) * TERM_UNIT))
    return terms


def _exp2_neg(units: int) -> float:
    """2 ** -(units / 2**16), from an integer, identically on every machine."""
    whole, frac = divmod(int(units), TERM_UNIT)
    t = -(frac / TERM_UNIT) * 0.6931471805599453  # in (-ln 2, 0]: the series converges fast
    term, total = 1.0, 1.0
    for k in range(1, 18):
        term = term * t / k
        total += term
    return math.ldexp(total, -whole)


@dataclasses.dataclass(frozen=True)
class Estimate:
    """What every worker knows about the union after the scale round.

    occupied[k]: the estimated fraction of groups of GROUP_SIZES[k] elements
    that hold a union element; union: the estimated |U|; max_nnz: the
    largest worker's non-zero count.
    """

    length: int
    max_nnz: int
    occupied: tuple[float, ...]

    @classmethod
    def from_aggregates(cls, length: int, max_nnz: int, terms: np.ndarray) -> Estimate:
        return cls(length, int(max_nnz), tuple(1.0 - _exp2_neg(int(t)) for t in terms))

    @property
    def union(self) -> float:
        return max(self.occupied[0] * self.length, float(self.max_nnz))

    def groups(self, group: int) -> float:
        """Estimated union groups of `group` elements."""
        k = bitmap.GROUP_SIZES.index(group)
        return max(self.occupied[k] * bitmap.groups(self.length, group), self.union / group)


@dataclasses.dataclass(frozen=True)
class Plan:
    """The encoding every worker runs, the index's group size, and the cost of each candidate."""

    encoding: str
    group: int
    seconds: dict[str, float]


def _seconds(p: CodecParams, words: float, rounds: int, peeled: float = 0.0) -> float:
    return 4 * words * 8 / (p.link_gbps * 1e9) + rounds * p.round_us * 1e-6 + peeled * PEEL_SECONDS


def _index(p: CodecParams, est: Estimate, group: int) -> tuple[float, int]:
    """(words, rounds) of the index with group size G."""
    if group == 1:
        return float(bitmap.words_for(p.length)), 1
    return bitmap.words_for(bitmap.groups(p.length, group)) + est.groups(group) * group / 32, 2


def _costs(p: CodecParams, est: Estimate, encoding: str, group: int) -> float:
    d, union = p.length, est.union
    if encoding == "dense":
        return _seconds(p, d, 1)
    if encoding == "blocks":
        nblocks = bitmap.groups(d, BLOCK_ELEMENTS)
        return _seconds(p, bitmap.words_for(nblocks) + est.groups(BLOCK_ELEMENTS) * BLOCK_ELEMENTS, 2)
    words, rounds = _index(p, est, group)
    if encoding == "aligned":
        return _seconds(p, words + union, rounds + 1)
    rows = sketch.rows_for(p, union)
    return _seconds(p, words + sketch.TABLES * rows * p.lanes, rounds + residual_chance(p, union, rows),
                    peeled=union)


def residual_chance(p: CodecParams, union: float, rows: int) -> float:
    """The chance that the sketch leaves a residual round, charged as that fraction of a round.

    Two elements of one lane whose blocks hash to the same row in all three
    sub-tables can never be peeled (probability 1/R**3 per pair), and a lane
    of Poisson(n) elements holds n**2/2 pairs: L n**2 / (2 R**3) such pairs
    are expected, which dominates the residual at the sketch's sizes.
    """
    n = union / p.lanes
    pairs = min(64.0, p.lanes * n * n / (2.0 * rows * rows * rows))
    return 1.0 - _exp2_neg(int(pairs / 0.6931471805599453 * TERM_UNIT))


def choose(p: CodecParams, est: Estimate) -> Plan:
    """The cheapest encoding the job's mode allows, with its cheapest index group size."""
    allowed = ENCODINGS if p.mode == "auto" else (p.mode,)
    groups = bitmap.GROUP_SIZES if p.group == 0 else (p.group,)
    seconds: dict[str, float] = {}
    best: tuple[float, str, int] | None = None
    for encoding in allowed:
        for group in (groups if encoding in ("aligned", "sketch") else (1,)):
            cost = _costs(p, est, encoding, group)
            if encoding not in seconds or cost < seconds[encoding]:
                seconds[encoding] = cost
            if best is None or cost < best[0]:
                best = (cost, encoding, group)
    return Plan(best[1], best[2], seconds)
