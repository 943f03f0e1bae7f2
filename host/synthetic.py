"""Synthetic sparse gradients for demos and tests: seeded, reproducible from (seed, rank)."""

from __future__ import annotations

import numpy as np

from . import workloads

PRESET_NAMES = tuple(workloads.PRESETS)


def synthetic_gradient(length: int, density: float, *, seed: int = 0, rank: int = 0,
                       dtype=np.float32) -> np.ndarray:
    """A gradient with round(density * length) non-zeros at uniform random positions.

    Values are standard normal (float) or uniform in +-2**20 (int32).  The same
    (seed, rank) always gives the same array, so an orchestrator can rebuild
    every worker's input to check the sum.
    """
    if not 0.0 <= density <= 1.0:
        raise ValueError(f"density must be within [0, 1], got {density}")
    if length < 1:
        raise ValueError(f"length must be positive, got {length}")
    rng = np.random.default_rng([seed, rank])
    k = int(round(density * length))
    grad = np.zeros(length, dtype=dtype)
    idx = rng.choice(length, size=k, replace=False) if k < length else np.arange(length)
    if np.dtype(dtype).kind == "f":
        grad[idx] = rng.standard_normal(k).astype(dtype)
    else:
        grad[idx] = rng.integers(-(2**20), 2**20, size=k)
    return grad


def gradient_for(length: int, density: float, *, seed: int, rank: int, workload: str | None = None,
                 scale: float = 1.0) -> np.ndarray:
    """Worker `rank`'s gradient for an experiment: uniform sparse, or a model-shaped workload preset."""
    if workload is None:
        return synthetic_gradient(length, density, seed=seed, rank=rank)
    grad = workload_preset(workload, scale).gradient(seed, rank)
    if grad.size != length:
        raise ValueError(f"workload {workload} at scale {scale} has {grad.size} elements, not {length}")
    return grad


def workload_preset(name: str, scale: float = 1.0):
    """A model-shaped preset of `host.workloads`."""
    return workloads.preset(name, scale)
