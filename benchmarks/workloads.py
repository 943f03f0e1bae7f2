"""The model-shaped workload presets (they live in `host.workloads`, part of the installed product).

Re-exported here for the benchmarks and for `from benchmarks import workloads`;
run as a script it prints each preset's shape and measured densities:
`python benchmarks/workloads.py [--scale F] [--workers N] [PRESET ...]`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # runnable as a script from a checkout

from host.workloads import *  # noqa: E402,F401,F403
from host.workloads import PRESETS, densities, preset  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="print each preset's shape and measured densities",
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--scale", type=float, default=0.02, help="shrink every preset by this factor")
    ap.add_argument("--workers", type=int, default=8, help="workers whose union is measured")
    ap.add_argument("presets", nargs="*", default=list(PRESETS), help=f"among {', '.join(PRESETS)}")
    args = ap.parse_args(argv)
    for name in args.presets:
        w = preset(name, args.scale)
        d = densities(w.gradients(args.workers))
        print(f"{w.describe()}\n  per-worker density {d['per_worker']:.3%}, union of {args.workers} {d['union']:.3%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
