"""Run baselines with N worker processes and summarize them: on loopback here, on Mininet hosts via plain_star.

    from baselines import launch
    runs = launch.run_loopback({"workload": "lstm", "scale": 0.01, "baselines": ["ring", "zen"],
                                "seeds": [0, 1, 2]}, workers=8)

`run_loopback` writes the spec, starts `python -m hina.baselines.worker` once per
rank (gloo over 127.0.0.1), reads every rank's JSON lines and returns one
summary per baseline (`summarize`): the fastest round's seconds (the
slowest rank's, as every rank must finish), every round listed, mean bytes
per worker by kind, whether every rank held the same result, and rank 0's
check against numpy.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence

from . import registry
from .comm import KINDS


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker_command(spec_path: str, rank: int) -> list[str]:
    return [sys.executable, "-m", "hina.baselines.worker", "--spec", spec_path, "--rank", str(rank)]


def validate(spec: dict) -> None:
    known = [b.name for b in registry.BASELINES.values() if b.allreduce is not None]
    unknown = [b for b in spec["baselines"] if b not in known]
    if unknown:
        raise ValueError(f"unknown baselines {unknown}: any of {', '.join(b.name for b in registry.compared())}")
    if spec["world"] < 1:
        raise ValueError(f"workers must be at least 1, got {spec['world']}")


def collect(procs: Sequence[subprocess.Popen], timeout: float) -> list[list[dict]]:
    """Every rank's JSON lines, once all have exited; a rank that failed raises with its stderr's tail."""
    outputs = []
    try:
        for rank, p in enumerate(procs):
            out, err = p.communicate(timeout=timeout)
            lines = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
            if p.returncode != 0 or not lines or not lines[-1].get("done"):
                raise RuntimeError(f"baseline rank {rank} failed (exit {p.returncode}): {err.strip()[-800:]}")
            outputs.append(lines[:-1])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                with contextlib.suppress(Exception):
                    p.communicate(timeout=5)
    return outputs


def summarize(outputs: list[list[dict]], spec: dict) -> list[dict]:
    """One summary per baseline from every rank's lines (see the module docstring)."""
    world = len(outputs)
    runs = []
    for name in spec["baselines"]:
        baseline = registry.get(name)
        rounds = []
        for rnd in range(len(spec["seeds"])):
            lines = [next(x for x in rank_lines if x["baseline"] == name and x["round"] == rnd)
                     for rank_lines in outputs]
            sent = {k: sum(x["sent"][k] for x in lines) / world for k in KINDS}
            tx = [x["tx_bytes"] for x in lines]
            check = lines[0].get("check", {})
            length = lines[0]["length"]
            least = min(x["seconds"] - x.get("delay", 0.0) for x in lines)
            rounds.append({"seed": lines[0]["seed"], "seconds": max(x["seconds"] for x in lines),
                           # from the first rank's start to the last one's end (the fidelity monitor's window),
                           # and each rank's delay, seconds from its own start and time waited for others
                           "window": [min(x["start"] for x in lines), max(x["start"] + x["seconds"] for x in lines)]
                           if all("start" in x for x in lines) else None,
                           "workers": [{"rank": x["rank"], "delay": x.get("delay", 0.0),
                                        "seconds": x["seconds"] - x.get("delay", 0.0),
                                        "waited": x["seconds"] - x.get("delay", 0.0) - least} for x in lines],
                           "payload_by_phase": sent, "payload_bytes_per_worker": sum(sent.values()),
                           "wire_bytes_per_worker": None if None in tx else sum(tx) / world,
                           "identical": len({x["crc"] for x in lines}) == 1, "check": check,
                           "encoding": baseline.describe(lines[0]["notes"], spec, length),
                           "notes": lines[0]["notes"]})
        best = min(rounds, key=lambda r: r["seconds"])
        lossy = baseline.lossy
        exact = not lossy and all(r["identical"] and r["check"].get("within_bound") for r in rounds)
        wire = best["wire_bytes_per_worker"]
        runs.append({"mode": name, "lossy": lossy, "exact": exact, "seconds": best["seconds"],
                     "round_seconds": [r["seconds"] for r in rounds], "rounds": rounds,
                     "bytes_per_worker": wire if wire is not None else best["payload_bytes_per_worker"],
                     "bytes_measured": wire is not None,
                     "payload_bytes_per_worker": best["payload_bytes_per_worker"],
                     "payload_by_phase": best["payload_by_phase"], "encoding": best["encoding"],
                     "max_abs_diff": max(r["check"].get("max_abs_diff", float("nan")) for r in rounds),
                     "max_diff_over_bound": max(r["check"].get("max_diff_over_bound", float("nan")) for r in rounds),
                     "rel_l2_error": max(r["check"].get("rel_l2_error", float("nan")) for r in rounds),
                     "identical": all(r["identical"] for r in rounds), "retransmissions": None})
    return runs


def write_spec(spec: dict) -> str:
    with tempfile.NamedTemporaryFile("w", prefix="hina-baseline-", suffix=".json", delete=False) as f:
        json.dump(spec, f)
    return f.name


def run_loopback(spec: dict, workers: int, timeout: float = 600.0,
                 popen: Callable[..., subprocess.Popen] = subprocess.Popen) -> list[dict]:
    """Start `workers` ranks on 127.0.0.1, run the spec's baselines and rounds, and summarize them."""
    spec = {"topk_density": 0.01, "link_gbps": 10.0, **spec, "world": workers,
            "master": f"127.0.0.1:{free_port()}", "ifname": None}
    validate(spec)
    path = write_spec(spec)
    env = {**os.environ, "GLOO_SOCKET_IFNAME": "lo"}
    try:
        procs = [popen(worker_command(path, r), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       env=env) for r in range(workers)]
        return summarize(collect(procs, timeout), spec)
    finally:
        os.unlink(path)
