"""Heterogeneous Mininet runs: per-worker link overrides, stragglers and cross-traffic, parsed from flags.

Workers are named by rank (0..N-1), as `hina worker --rank` names them:
rank r runs on host number r+1 (hw{r+1} in hina's star, bh{r+1} in the
baselines' bridge star).

- per-worker links: `--host-bw 3=50,5=20` (Mbit/s), `--host-delay 3=10` (ms):
  that worker's link, both directions, instead of --bw / --delay;
- stragglers, a start delay per worker and round (the aggregation waits for
  a slow step's compute), drawn from a seeded generator:
    rank3:+50%      rank 3 starts 50% of --compute late (its compute took 1.5x)
    rank3:+200ms    rank 3 starts 200 ms late
    lognormal:0.5   each worker's compute is --compute x exp(N(0, 0.5^2));
                    each starts (its compute - the quickest's) late
    uniform:50%     each starts U(0, 50% of --compute) late
- cross-traffic: `--cross 1>0` an iperf3 TCP flow from rank 1's host to
  rank 0's for the whole run (it shares rank 1's uplink and rank 0's
  downlink with the aggregation), `--cross 1>0@50` capped at 50 Mbit/s.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
import shutil
import subprocess
import time

import numpy as np

IPERF_PORT = 5201


def add_flags(ap, *, where: str = "", bw_flag: str = "--bw", seed_flag: str = "--seed") -> None:
    """The heterogeneity flags, declared once for mininet/run.py and benchmarks/compare.py (`where` starts
    each help text, e.g. "Mininet: ")."""
    ap.add_argument("--host-bw", metavar="R=MBPS,...", help=f"{where}rank R's link at MBPS instead of {bw_flag}")
    ap.add_argument("--host-delay", metavar="R=MS,...", help=f"{where}rank R's link delayed MS (tc netem)")
    ap.add_argument("--straggler", metavar="SPEC",
                    help=f"{where}a start delay per worker and round, the same draws for every system: rankR:+P%% "
                         f"(of --compute), rankR:+Nms, lognormal:SIGMA or uniform:P%% (seeded by {seed_flag})")
    ap.add_argument("--compute", type=float, default=0.0, metavar="MS",
                    help=f"{where}the training step's compute time that --straggler percentages refer to "
                         "(default: 0)")
    ap.add_argument("--cross", action="append", default=[], metavar="SRC>DST[@MBPS]",
                    help=f"{where}an iperf3 TCP flow from rank SRC's host to rank DST's during every run; "
                         "repeatable")


def overrides(text: str | None, what: str) -> dict[int, float]:
    """'3=50,5=20' -> {3: 50.0, 5: 20.0}; ValueError naming the bad part."""
    if not text:
        return {}
    out = {}
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*=\s*([0-9.]+)\s*", part)
        if not m:
            raise ValueError(f"{what} must be RANK=VALUE[,RANK=VALUE...], got {text!r}")
        out[int(m.group(1))] = float(m.group(2))
    return out


def per_rank_links(host_bw: str | None, host_delay: str | None, workers: int) -> dict[int, dict]:
    """Mininet link options of the ranks whose link differs: {rank: {"bw": Mbit/s, "delay": "Nms"}}."""
    out: dict[int, dict] = {}
    for flag, text, key in (("host_bw", host_bw, "bw"), ("host_delay", host_delay, "delay")):
        for rank, value in overrides(text, flag).items():
            if rank >= workers or (key == "bw" and not value > 0):
                raise ValueError(f"{flag} {rank}={value:g}: needs a rank below {workers}"
                                 + (" and a rate > 0" if key == "bw" else ""))
            out.setdefault(rank, {})[key] = value if key == "bw" else f"{value}ms"
    return out


def straggler_delays(text: str | None, workers: int, compute_ms: float, seed: int, rounds: int) -> list[list[float]]:
    """Every round's start delay per rank (seconds), drawn as hina's Mininet runs draw them."""
    if not text:
        return [[0.0] * workers for _ in range(rounds)]
    spec, rng = Straggler.parse(text), np.random.default_rng(seed)
    return [spec.delays(workers, compute_ms, rng).tolist() for _ in range(rounds)]


@dataclasses.dataclass(frozen=True)
class Straggler:
    """One --straggler spec: kind 'rank' (rank, amount), 'lognormal' (sigma) or 'uniform' (amount); amount
    in percent of the compute time or, with ms=True, in milliseconds."""

    text: str
    kind: str
    amount: float
    rank: int | None = None
    ms: bool = False

    @classmethod
    def parse(cls, text: str) -> Straggler:
        forms = "rankR:+P%, rankR:+Nms, lognormal:SIGMA or uniform:P%"
        if m := re.fullmatch(r"rank(\d+):\+([0-9.]+)(%|ms)", text):
            return cls(text, "rank", float(m.group(2)), int(m.group(1)), m.group(3) == "ms")
        if m := re.fullmatch(r"lognormal:([0-9.]+)", text):
            return cls(text, "lognormal", float(m.group(1)))
        if m := re.fullmatch(r"uniform:([0-9.]+)%", text):
            return cls(text, "uniform", float(m.group(1)))
        raise ValueError(f"straggler must be one of {forms}, got {text!r}")

    def check(self, workers: int, compute_ms: float) -> None:
        if self.rank is not None and self.rank >= workers:
            raise ValueError(f"straggler {self.text!r}: rank {self.rank} is not one of the {workers} workers")
        if not self.ms and compute_ms <= 0:
            raise ValueError(f"straggler {self.text!r} is relative to the step's compute: give --compute MS > 0")

    def delays(self, workers: int, compute_ms: float, rng: np.random.Generator) -> np.ndarray:
        """Seconds each worker starts late this round (the earliest at 0)."""
        base = compute_ms / 1000
        if self.kind == "rank":
            out = np.zeros(workers)
            out[self.rank] = self.amount / 1000 if self.ms else base * self.amount / 100
            return out
        if self.kind == "lognormal":
            compute = base * rng.lognormal(0.0, self.amount, workers)
            return compute - compute.min()
        return rng.uniform(0.0, base * self.amount / 100, workers)


def stragglers(text: str | None) -> Straggler | None:
    return Straggler.parse(text) if text else None


@dataclasses.dataclass(frozen=True)
class Flow:
    """One --cross flow: iperf3 TCP from rank src's host to rank dst's, capped at mbps (None: as fast as TCP
    goes)."""

    src: int
    dst: int
    mbps: float | None = None

    @classmethod
    def parse(cls, text: str) -> Flow:
        m = re.fullmatch(r"(\d+)>(\d+)(?:@([0-9.]+))?", text)
        if not m or m.group(1) == m.group(2):
            raise ValueError(f"cross must be SRC>DST[@MBPS] (two different ranks), got {text!r}")
        return cls(int(m.group(1)), int(m.group(2)), float(m.group(3)) if m.group(3) else None)


def flows(texts: list[str] | tuple[str, ...] | None, workers: int) -> tuple[Flow, ...]:
    out = tuple(Flow.parse(t) for t in texts or ())
    for f in out:
        if max(f.src, f.dst) >= workers:
            raise ValueError(f"cross {f.src}>{f.dst}: ranks must be below the {workers} workers")
    if out and shutil.which("iperf3") is None:
        raise ValueError("--cross needs iperf3 (Debian: apt install iperf3)")
    return out


class CrossTraffic:
    """iperf3 servers and clients on Mininet hosts (rank r: hosts[r]) for as long as the context lasts."""

    def __init__(self, hosts, flows: tuple[Flow, ...], ip, warmup: float = 1.0):
        self.hosts, self.flows, self.ip, self.warmup = hosts, flows, ip, warmup
        self.procs: list[tuple[Flow, subprocess.Popen, subprocess.Popen]] = []
        self.report: list[dict] = []

    def __enter__(self) -> CrossTraffic:
        for k, f in enumerate(self.flows):
            port = IPERF_PORT + k
            server = self.hosts[f.dst].popen(["iperf3", "-s", "-1", "-p", str(port)], stdout=subprocess.DEVNULL,
                                             stderr=subprocess.DEVNULL)
            time.sleep(0.2)
            client = self.hosts[f.src].popen(
                ["iperf3", "-c", self.ip(f.dst), "-p", str(port), "-t", "3600", "-J",
                 *(["-b", f"{f.mbps}M"] if f.mbps else [])],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            self.procs.append((f, server, client))
        if self.procs:
            time.sleep(self.warmup)  # TCP past slow start before the aggregation begins
        return self

    def __exit__(self, *exc) -> None:
        if self.procs:
            self.stop()

    def stop(self) -> list[dict]:
        """End every flow (iperf3 prints its JSON report on SIGINT); what each carried."""
        out = []
        for f, server, client in self.procs:
            with contextlib.suppress(ProcessLookupError):
                client.send_signal(2)
            try:
                text, _ = client.communicate(timeout=10)
                end = json.loads(text)["end"]["sum_sent"]
                carried = {"bytes": end["bytes"], "seconds": end["seconds"],
                           "mbps": end["bits_per_second"] / 1e6, "retransmits": end.get("retransmits")}
            except (subprocess.TimeoutExpired, ValueError, KeyError, TypeError):
                client.kill()
                carried = {}
            for p in (server,):
                if p.poll() is None:
                    p.kill()
                p.wait()
            out.append({"src": f.src, "dst": f.dst, "cap_mbps": f.mbps, **carried})
        self.procs = []
        self.report = out
        return out


if __name__ == "__main__":
    import sys

    from hina.cliargs import library_only

    sys.exit(library_only(__doc__, "mininet/run.py"))
