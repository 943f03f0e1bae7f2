"""State as records: how the sender's Python objects keep what its compiled rules read and write.

Each object (`RttEstimator`, `CongestionWindow`, `PhaseTransfer`) owns numpy structured arrays of the
compiled modules' dtypes (`sendplane.RTT`, `congestion_rules.WINDOW`, ...) and hands them to the rules as
their bytes; Python reads and writes the same memory by field name.  Shared by the loss-recovery room
(`window.py`) and the congestion room (`congestion.py`), which import nothing from each other's Python.
"""

from __future__ import annotations

import numpy as np


def field(name: str, doc: str | None = None, kind: type = float) -> property:
    """An attribute kept in field `name` of the object's record (`state`), read as `kind`."""
    def get(self):
        return kind(self.state[name][0])

    def set(self, value: float) -> None:
        self.state[name] = value

    return property(get, set, doc=doc)


def records(dtype: np.dtype, n: int = 1, **fields: float) -> tuple[np.ndarray, np.ndarray]:
    """n records of `dtype`, zero but for `fields`, and their bytes, which the compiled sender takes (a
    structured array costs numba 0.1 us a call to type: sendplane's `*_bytes` functions).  Python reads a
    field as `records[name][0]` (a field of a record, `records[0][name]`, takes 0.7 us)."""
    out = np.zeros(n, dtype)
    for name, value in fields.items():
        out[name] = value
    return out, out.view(np.uint8)
