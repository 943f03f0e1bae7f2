"""The three aggregation operators a switch applies to 32-bit words.

The switch never knows about compression: each phase of the codec is one
aggregation of int32 words with one of these operators.  The numeric values
are the `op` field of the hina header (docs/design.md, "The wire format"), so this enum is
shared by the codec, the host agents and the switch emulator.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

import numpy as np


class Op(enum.IntEnum):
    """What the switch does to a word of a slot: ADD (int32, wrapping modulo 2**32), OR (bitwise) or MAX
    (signed int32).  The wire's op field carries it; every round of the codec names one per segment."""

    ADD = 0  # int32, wraps modulo 2**32
    OR = 1  # bitwise
    MAX = 2  # signed int32


# ADD wraps modulo 2**32 (numpy int32 arrays wrap silently), MAX compares signed
UFUNCS = {Op.ADD: np.add, Op.OR: np.bitwise_or, Op.MAX: np.maximum}


def combine(op: Op, acc: np.ndarray, words: np.ndarray) -> None:
    """Fold `words` into `acc` (int32) in place, as the switch does for one packet."""
    UFUNCS[op](acc, words, out=acc, casting="unsafe")


def reduce_words(op: Op, contributions: Sequence[np.ndarray]) -> np.ndarray:
    """Aggregate every worker's words for one phase, standing in for the switch."""
    if not contributions:
        raise ValueError("reduce_words needs at least one contribution")
    acc = np.array(contributions[0], dtype=np.int32, copy=True)
    for words in contributions[1:]:
        if words.shape != acc.shape:
            raise ValueError(
                f"phase contributions differ in length: {words.shape[0]} words vs {acc.shape[0]}"
            )
        combine(op, acc, words)
    return acc
