"""One rank of a baseline run: join the gloo group, run each baseline for every round, report JSON lines.

    python -m hina.baselines.worker --spec SPEC.json --rank R

The spec (written by `launch`, or by mininet/plain_star.py for a host) names
the group (`world`, `master` host:port), the gradients (a `workload` preset
at `scale`, or uniform `length` x `density`) and their per-round `seeds`,
the `baselines` to run, and the parameters (`topk_density`, `link_gbps`).
Each rank prints one line per (baseline, round): its own seconds (from a
barrier to its result), the payload bytes it sent by kind, its interface's
transmitted bytes when `ifname` names one (from /proc/net/dev: headers
included), what the baseline decided, and a CRC of its result; rank 0 also
checks the result against numpy (`check`).  A last line says "done".
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
import zlib
from pathlib import Path

import numpy as np

from hina.host.synthetic import gradient_for, workload_preset

from . import registry
from .check import Reference
from .comm import Comm, require_torch


def spec_length(spec: dict) -> int:
    return workload_preset(spec["workload"], spec["scale"]).size if spec.get("workload") else spec["length"]


def gradient(spec: dict, seed: int, rank: int) -> np.ndarray:
    return gradient_for(spec_length(spec), spec.get("density", 0.0), seed=seed, rank=rank,
                        workload=spec.get("workload"), scale=spec.get("scale", 1.0))


def run_one(name: str, comm: Comm, grad: np.ndarray, spec: dict) -> np.ndarray:
    baseline = registry.get(name)
    if baseline.allreduce is None:
        raise ValueError(f"baseline {name!r} is a DDP hook, not an allreduce a worker runs")
    return baseline.allreduce(comm, grad, spec)


def tx_bytes(ifname: str | None) -> int | None:
    """Bytes this network namespace sent on `ifname` (/proc/net/dev is per namespace; sysfs is not)."""
    if not ifname:
        return None
    for line in Path("/proc/net/dev").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name.strip() == ifname:
            return int(rest.split()[8])
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spec", type=Path, required=True)
    ap.add_argument("--rank", type=int, required=True)
    args = ap.parse_args(argv)
    spec = json.loads(args.spec.read_text())
    rank, world = args.rank, spec["world"]
    torch, dist = require_torch()
    torch.set_num_threads(1)  # N ranks share the machine's cores
    dist.init_process_group("gloo", init_method=f"tcp://{spec['master']}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=spec.get("deadline", 120)))
    comm = Comm(rank, world)
    length = spec_length(spec)
    for baseline in map(registry.get, spec["baselines"]):  # set-up before the first round (Zen's hash tables)
        if baseline.prepare is not None:
            baseline.prepare(length, world)
    reference = Reference(world, lambda seed, r: gradient(spec, seed, r)) if rank == 0 else None
    try:
        for rnd, seed in enumerate(spec["seeds"]):  # rounds outer: the baselines interleave, one seed at a time
            grad = gradient(spec, seed, rank)
            for name in spec["baselines"]:
                comm.reset()
                comm.barrier()
                tx0 = tx_bytes(spec.get("ifname"))
                t0 = time.perf_counter()
                delay = spec.get("delays", {}).get(name, [[0.0] * world] * (rnd + 1))[rnd][rank]
                if delay:  # a straggler: this rank's step computed longer, the others wait in the op
                    time.sleep(delay)
                out = run_one(name, comm, grad, spec)
                seconds = time.perf_counter() - t0
                # this rank's last bytes may still sit in its socket or qdisc when the op returns:
                # once every rank is past the op they have all been received, so they have left
                comm.barrier()
                tx1 = tx_bytes(spec.get("ifname"))
                # start: CLOCK_MONOTONIC, the same clock in every network namespace (the fidelity monitor's)
                line = {"baseline": name, "round": rnd, "seed": seed, "rank": rank, "seconds": seconds,
                        "start": t0, "delay": delay,
                        "sent": comm.sent, "tx_bytes": None if tx0 is None or tx1 is None else tx1 - tx0,
                        "notes": comm.notes, "crc": zlib.crc32(out.tobytes()), "length": length}
                if reference is not None:
                    line["check"] = reference.check(out, seed, lossy=registry.lossy(name))
                print(json.dumps(line), flush=True)
        print(json.dumps({"done": True, "rank": rank}), flush=True)
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
