"""`python -m switch_emulator`: run the hina switch emulator as a UDP server on loopback.

Jobs come from a JSON config file ({"jobs": [...], "impair": {...}}, see
`config.JobConfig.to_config`), from --job/--member flags, or later through
the control port.  With --raw PORT=IFNAME (repeated) it runs on raw
Ethernet interfaces instead (Mininet), configured from a --topology file
(see `topology.Topology`) or the control port's `configure`.  On start it
prints one JSON line with its bound addresses; with --stats it prints the
counters every few seconds.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import signal
import sys
from pathlib import Path

from .config import JobConfig, Member
from .impair import ImpairmentConfig
from .pipeline import Pipeline
from .raw import RawSwitch
from .topology import Topology
from .udp import UdpSwitch, announce


def address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


def job_flag(text: str) -> JobConfig:
    try:
        job_id, workers, words, base, slots = (int(x) for x in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--job wants JOB_ID:WORKERS:WORDS:SLOT_BASE:SLOTS, got {text!r}") from None
    return JobConfig(job_id, workers, words, base, slots)


def member_flag(text: str) -> tuple[int, Member]:
    parts = text.split(":")
    if len(parts) != 4 or not (parts[0].isdigit() and parts[1].isdigit() and parts[3].isdigit()):
        raise argparse.ArgumentTypeError(f"--member wants JOB_ID:WORKER_ID:HOST:PORT, got {text!r}")
    return int(parts[0]), Member(int(parts[1]), (parts[2], int(parts[3])))


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m switch_emulator", description=__doc__.split("\n\n")[0])
    ap.add_argument("--listen", type=address, default=("127.0.0.1", 0), help="data plane HOST:PORT (default: a free port)")
    ap.add_argument("--control", type=address, default=("127.0.0.1", 0), help="control HOST:PORT")
    ap.add_argument("--config", type=Path, help="JSON file with 'jobs' and optionally 'impair'")
    ap.add_argument("--job", type=job_flag, action="append", default=[], metavar="ID:N:K:BASE:SLOTS")
    ap.add_argument("--member", type=member_flag, action="append", default=[], metavar="ID:WORKER:HOST:PORT")
    ap.add_argument("--drop", type=float, default=0.0, help="drop probability, each direction")
    ap.add_argument("--dup", type=float, default=0.0, help="duplication probability, each direction")
    ap.add_argument("--reorder", type=float, default=0.0, help="reordering probability, each direction")
    ap.add_argument("--delay", type=float, default=0.0, metavar="MS",
                    help="delay every packet this many milliseconds, each direction")
    ap.add_argument("--seed", type=int, default=0, help="seed of the impairments")
    ap.add_argument("--stats", type=float, default=0.0, metavar="SECONDS", help="print counters this often")
    ap.add_argument("--raw", type=raw_flag, action="append", default=[], metavar="PORT=IFNAME",
                    help="serve raw frames on this interface as this port (repeat per port)")
    ap.add_argument("--topology", type=Path, help="raw mode: JSON topology (hosts, jobs) to start with")
    return ap


def raw_flag(text: str) -> tuple[int, str]:
    port, _, ifname = text.partition("=")
    if not port.isdigit() or not ifname:
        raise argparse.ArgumentTypeError(f"--raw wants PORT=IFNAME, got {text!r}")
    return int(port), ifname


def load(args: argparse.Namespace) -> tuple[list[JobConfig], ImpairmentConfig]:
    jobs = {j.job_id: j for j in args.job}
    impair = {"drop": args.drop, "dup": args.dup, "reorder": args.reorder, "seed": args.seed,
              "delay": args.delay / 1000.0}
    if args.config:
        cfg = json.loads(args.config.read_text())
        for j in cfg.get("jobs", []):
            job = JobConfig.from_config(j)
            jobs[job.job_id] = job
        impair.update(cfg.get("impair", {}))
    for job_id, member in args.member:
        if job_id not in jobs:
            raise ValueError(f"--member names job {job_id}, which no --job or config defines")
        jobs[job_id] = dataclasses.replace(jobs[job_id], members=jobs[job_id].members + (member,))
    return list(jobs.values()), ImpairmentConfig(**impair)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        jobs, impair = load(args)
        if args.raw:
            if jobs:
                raise ValueError("raw mode takes its jobs from --topology (ports, not addresses), not --job")
            topology = Topology.from_config(json.loads(args.topology.read_text())) if args.topology else None
            switch = RawSwitch(dict(args.raw), topology, control=args.control, impair=impair,
                               stats_every=args.stats)
        else:
            pipeline = Pipeline()
            for job in jobs:
                pipeline.add_job(job)
            switch = UdpSwitch(pipeline, data=args.listen, control=args.control, impair=impair,
                               stats_every=args.stats)
    except (ValueError, OSError, KeyError, TypeError) as exc:
        print(f"switch_emulator: {exc}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: switch.stop())
    announce(switch)
    try:
        switch.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        switch.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
