"""The index: every worker ends with the union support U exactly, in one or two rounds of OR.

One level (G = 1): the element bitmap, d/32 words.  Two levels (G = 2..1024):
the group bitmap at G (ceil(d/G)/32 words), then the element bits of only
the groups in the group union, G bits a group.  G is chosen per tensor from
the scale round's union estimate (`auto.index_group`), so the bits approach
log2 C(d, |U|) where the union is clustered or sparse.  An encoding may
send other segments in the last round (`ride`: the one-round sketch).
"""

from __future__ import annotations

from collections.abc import Callable

from . import bitmap
from .ops import Op
from .rounds import RESTART_HINT


def _check(kernels, own, union, bits: int, phase: str, what: str) -> None:
    if not kernels.trailing_bits_clear(union, bits):
        raise ValueError(f"{phase}: union bitmap has bits set beyond length {bits}")
    if not kernels.covers(union, own):
        raise ValueError(f"{phase}: the union bitmap lacks some of this worker's {what}{RESTART_HINT}")


def group_union(step, group: int, name: str, phase: str, what: str):
    """One OR round of the bitmap of non-empty `group`-element groups; return (union bitmap, its groups)."""
    p, k = step.params, step.kernels
    with step.timed("encode"):
        own_groups = k.coarse(step.own, p.length, group)
    (agg,) = yield step.round(step.segment(name, Op.OR, own_groups))
    with step.timed("decode"):
        union = k.from_wire(agg, step.own)
        _check(k, own_groups, union, bitmap.groups(p.length, group), phase, what)
        count = k.count(union)
    return union, count


def exchange(step, ride: Callable[[float], list] | None = None):
    """Run the index rounds; return (union bitmap, |U|, aggregates of the riders or None).

    `ride(bound)` gives the segments to send with the last level, where
    `bound` is an upper bound on |U| known by then.  If the union is empty
    every worker knows it from the first level, and no further round is sent.
    """
    p, group, k = step.params, step.group, step.kernels
    if group == 1:
        riders = ride(float(p.length)) if ride else []
        parts = yield step.round(step.segment("index", Op.OR, step.own), *riders)
        with step.timed("decode"):
            union = k.from_wire(parts[0], step.own)
            _check(k, step.own, union, p.length, "index phase", "non-zeros")
            size = k.count(union)
        return union, size, parts[1:]

    union_groups, ngroups = yield from group_union(step, group, "index_coarse", "index phase (groups)", "groups")
    if ngroups == 0:
        return k.empty_bitmap(step.own), 0, None
    with step.timed("encode"):
        own_fine = k.fine(step.own, union_groups, p.length, group, ngroups)
    riders = ride(float(min(p.length, ngroups * group))) if ride else []
    parts = yield step.round(step.segment("index_fine", Op.OR, own_fine), *riders)
    with step.timed("decode"):
        union, size = k.expand(union_groups, k.from_wire(parts[0], step.own), p.length, group)
        _check(k, step.own, union, p.length, "index phase", "non-zeros")
    return union, size, parts[1:]
