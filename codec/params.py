"""The parameters every worker of a job must agree on, as one frozen object.

Two workers that disagree on any of these would compute different sketch
layouts and decode garbage, so they travel together, serialize to JSON, and
are compared before the first packet (`check_compatible`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from fractions import Fraction
from typing import Any

import numpy as np

MAX_WORKERS = 32  # worker_id is a bit in a 32-bit arrival bitmap
MODES = ("auto", "dense", "blocks", "aligned", "sketch")
GROUP_CHOICES = (0,) + tuple(1 << k for k in range(11))  # 0: chosen per tensor
DTYPES = ("float16", "float32", "float64", "int32")
DEFAULT_LANES = 1024
DEFAULT_CELLS_PER_ELEMENT = 1.3
DEFAULT_SEEDS = (0, 1, 2)


def check_dtype(dtype: Any) -> str:
    """Return the canonical dtype name, or raise naming the accepted ones."""
    name = np.dtype(dtype).name
    if name not in DTYPES:
        raise ValueError(f"unsupported dtype {name}: hina accepts {', '.join(DTYPES)}")
    return name


@dataclasses.dataclass(frozen=True)
class CodecParams:
    """What a job's workers share.

    length: elements per gradient (d); workers: N (1..32); dtype: the
    gradients' dtype; mode: "auto" (the default: the cheapest of the
    encodings below by the cost model in `codec.auto`, chosen per tensor),
    "dense" (every quantized element: the SwitchML-style baseline),
    "blocks" (non-zero 256-element blocks: an OmniReduce-style baseline),
    "aligned" (index, then the values at the union) or "sketch" (index and
    a count sketch in one round, peeled); group: the index's group size, 1
    for a one-level bitmap, 2..1024 for two levels, 0 (the default) to let
    the cost model choose per tensor; lanes: L, elements per sketch block;
    cells_per_element: c, sketch cells per expected union element, read as
    the decimal it is written as (1.3 means exactly 13/10, so every worker
    rounds the same way); seeds: the murmur3 seeds of the three sub-tables;
    link_gbps and round_us: the cost model's link rate and time per round
    (what auto weighs bytes against rounds with).
    """

    length: int
    workers: int
    dtype: str = "float32"
    mode: str = "auto"
    group: int = 0
    lanes: int = DEFAULT_LANES
    cells_per_element: float = DEFAULT_CELLS_PER_ELEMENT
    seeds: tuple[int, int, int] = DEFAULT_SEEDS
    link_gbps: float = 10.0
    round_us: float = 200.0

    def __post_init__(self) -> None:
        if not isinstance(self.length, (int, np.integer)) or self.length < 1:
            raise ValueError(f"length must be a positive integer, got {self.length!r}")
        if not isinstance(self.workers, (int, np.integer)) or not 1 <= self.workers <= MAX_WORKERS:
            raise ValueError(f"workers must be between 1 and {MAX_WORKERS}, got {self.workers!r}")
        if self.length > 2**32 - 1:
            raise ValueError(f"length {self.length} does not fit the 32-bit offset field")
        object.__setattr__(self, "length", int(self.length))
        object.__setattr__(self, "workers", int(self.workers))
        object.__setattr__(self, "dtype", check_dtype(self.dtype))
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if not isinstance(self.lanes, (int, np.integer)) or self.lanes < 1:
            raise ValueError(f"lanes must be a positive integer, got {self.lanes!r}")
        object.__setattr__(self, "lanes", int(self.lanes))
        c = self.cells_per_element
        if not isinstance(c, (int, float)) or not math.isfinite(c) or c <= 0:
            raise ValueError(f"cells_per_element must be a positive number, got {c!r}")
        object.__setattr__(self, "cells_per_element", float(c))
        seeds = tuple(int(s) for s in self.seeds)
        if len(seeds) != 3 or len(set(seeds)) != 3 or not all(0 <= s <= 0xFFFFFFFF for s in seeds):
            raise ValueError(f"seeds must be three distinct uint32 values, got {self.seeds!r}")
        object.__setattr__(self, "seeds", seeds)
        if self.group not in GROUP_CHOICES:
            raise ValueError(f"group must be 0 (chosen per tensor) or a power of two up to 1024, got {self.group!r}")
        object.__setattr__(self, "group", int(self.group))
        for name in ("link_gbps", "round_us"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise ValueError(f"{name} must be a positive number, got {v!r}")
            object.__setattr__(self, name, float(v))

    # -- derived quantities ------------------------------------------------
    @property
    def is_float(self) -> bool:
        return self.dtype != "int32"

    @property
    def blocks(self) -> int:
        """Number of sketch blocks, ceil(d / L); the last one may be partial."""
        return -(-self.length // self.lanes)

    @property
    def cell_factor(self) -> Fraction:
        """c as an exact fraction, so sketch sizing never depends on float rounding."""
        return Fraction(repr(self.cells_per_element))

    # -- serialization -----------------------------------------------------
    def to_config(self) -> dict[str, Any]:
        cfg = dataclasses.asdict(self)
        cfg["seeds"] = list(self.seeds)
        return cfg

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> CodecParams:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(cfg) - known
        if unknown:
            raise ValueError(f"unknown codec parameters: {', '.join(sorted(unknown))}")
        cfg = dict(cfg)
        if "seeds" in cfg:
            cfg["seeds"] = tuple(cfg["seeds"])
        return cls(**cfg)

    def to_json(self) -> str:
        return json.dumps(self.to_config(), sort_keys=True)

    def fingerprint(self) -> int:
        """A 32-bit digest of the parameters, for a cheap on-the-wire agreement check."""
        digest = hashlib.sha256(self.to_json().encode()).digest()
        return int.from_bytes(digest[:4], "big")

    def check_compatible(self, other: CodecParams) -> None:
        """Raise ValueError naming every parameter on which two workers disagree."""
        diffs = [
            f"{f.name}: {getattr(self, f.name)!r} != {getattr(other, f.name)!r}"
            for f in dataclasses.fields(self)
            if getattr(self, f.name) != getattr(other, f.name)
        ]
        if diffs:
            raise ValueError("mismatched job parameters: " + "; ".join(diffs))
