"""Synthetic sparse gradients for demos and tests: seeded, reproducible from (seed, rank)."""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path

import numpy as np


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
    """Worker `rank`'s gradient for an experiment: uniform sparse, or a model-shaped workload preset.

    Workloads live in benchmarks/workloads.py of this checkout.
    """
    if workload is None:
        return synthetic_gradient(length, density, seed=seed, rank=rank)
    grad = workload_preset(workload, scale).gradient(seed, rank)
    if grad.size != length:
        raise ValueError(f"workload {workload} at scale {scale} has {grad.size} elements, not {length}")
    return grad


def workload_preset(name: str, scale: float = 1.0):
    """A preset from benchmarks/workloads.py of this checkout (see there)."""
    return _workloads().preset(name, scale)


@functools.lru_cache(maxsize=1)
def _workloads():
    path = Path(__file__).resolve().parent.parent / "benchmarks" / "workloads.py"
    if not path.exists():
        raise RuntimeError(f"model-shaped workloads need {path} (a checkout of hina)")
    spec = importlib.util.spec_from_file_location("hina_workloads", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["hina_workloads"] = module  # dataclasses look their module up while being built
    spec.loader.exec_module(module)
    return module
