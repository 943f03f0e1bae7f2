"""A baseline's result against numpy's float64-accumulated sum, with the float32 rounding bound it must meet.

Any float32 summation of N terms, in any order or tree, is within
gamma_(N-1) x sum_r |g_r[i]| of the exact sum at every element i, where
gamma_m = m u / (1 - m u) and u = 2^-24 (Higham, "Accuracy and Stability of
Numerical Algorithms", section 4.2).  A lossless baseline passes when every
element is within that bound of the float64 sum (whose own error, about
N x 2^-53 relative, is negligible); a lossy one is reported with its error.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

U32 = 2.0**-24


def rounding_bound(abs_sum: np.ndarray, workers: int) -> np.ndarray:
    m = max(workers - 1, 0)
    return (m * U32 / (1 - m * U32)) * abs_sum


def compare(result: np.ndarray, exact: np.ndarray, abs_sum: np.ndarray, workers: int, lossy: bool) -> dict:
    """max |result - exact|, its ratio to the bound, and the relative L2 error."""
    diff = np.abs(result.astype(np.float64) - exact)
    bound = rounding_bound(abs_sum, workers)
    over = diff > bound
    norm = float(np.linalg.norm(exact)) or 1.0
    ratio = float(np.max(np.where(bound > 0, diff / np.where(bound > 0, bound, 1.0), np.where(diff > 0, np.inf, 0))))
    return {"lossy": lossy, "within_bound": not bool(over.any()), "elements_over_bound": int(over.sum()),
            "max_abs_diff": float(diff.max(initial=0.0)), "max_diff_over_bound": ratio,
            "rel_l2_error": float(np.linalg.norm(result.astype(np.float64) - exact)) / norm}


class Reference:
    """Exact sums of every rank's gradient for a seed (numpy, float64), computed once per seed."""

    def __init__(self, workers: int, gradient: Callable[[int, int], np.ndarray]):
        self.workers, self.gradient = workers, gradient
        self._cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def sums(self, seed: int) -> tuple[np.ndarray, np.ndarray]:
        if seed not in self._cache:
            exact = abs_sum = None
            for r in range(self.workers):
                g = self.gradient(seed, r).astype(np.float64)
                exact = g.copy() if exact is None else exact + g
                abs_sum = np.abs(g) if abs_sum is None else abs_sum + np.abs(g)
            self._cache = {seed: (exact, abs_sum)}  # one seed at a time: rounds run seed by seed
        return self._cache[seed]

    def check(self, result: np.ndarray, seed: int, lossy: bool = False) -> dict:
        exact, abs_sum = self.sums(seed)
        return compare(result, exact, abs_sum, self.workers, lossy)
