"""`python -m hina.emulator`: run the hina switch emulator as a UDP server on loopback.

Jobs come from a JSON config file ({"jobs": [...], "impair": {...}}, see
`config.JobConfig.to_config`), from --job/--member flags, or later through
the control port.  With --raw PORT=IFNAME (repeated) it runs on raw
Ethernet interfaces instead (Mininet), configured from a --topology file
(see `topology.Topology`) or the control port's `configure`.  With
--pipes P the data plane runs as P processes, pipe i serving the slots s
with s mod P == i (the kernel steers each packet by its slot).  On start it
prints one JSON line with its bound addresses; with --stats it prints the
counters every few seconds.  A job none of whose members was heard for
--lease seconds is removed (jobs given here are pinned); with a token
(--token-file, or $HINA_TOKEN) only requests signed with it may change jobs,
and with --tenants each owner's token changes only that owner's jobs.  A job
that joins without a slot range is given one from the --slot-space slots,
capped by --slot-policy (`hina.control.ledger`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import signal
import socket
import sys
from pathlib import Path

from hina.cliargs import PIPE_QUEUE, OneLineParser, between, non_negative, pipe_queue_flag, pipes_flag, probability
from hina.control.auth import ENV, read_tenants, read_token
from hina.control.config import JobConfig, Member
from hina.control.ledger import DEFAULT_POLICY, DEFAULT_SPACE, POLICIES
from hina.control.topology import Topology
from hina.emulator.control_port import handle
from hina.emulator.impair import ImpairmentConfig
from hina.emulator.pipeline import Pipeline
from hina.emulator.raw import RawSwitch
from hina.emulator.udp import UdpSwitch, announce
from hina.wire.headers import MAX_SLOTS


def _port(text: str, what: str) -> int:
    if not text.isdigit() or not 0 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{what}: port must be 0..65535, got {text!r}")
    return int(text)


def _host(host: str, what: str) -> str:
    """The host as an IPv4 address; refuses a name that does not resolve."""
    try:
        return socket.gethostbyname(host)
    except OSError:
        raise argparse.ArgumentTypeError(f"{what}: cannot resolve host {host!r}") from None


def address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return _host(host, text), _port(port, text)


JOB_FIELDS = ("JOB_ID", "WORKERS", "WORDS", "SLOT_BASE", "SLOTS")
# Ten minutes: far longer than any pause inside a training run (a checkpoint, an evaluation pass, a
# worker's restart), far shorter than the weeks a switch runs, so the slots of a job whose workers
# crashed come back the same hour.  A job given on the command line is pinned (nothing could re-install it).
DEFAULT_LEASE = 600.0


def job_flag(text: str) -> JobConfig:
    parts = text.split(":")
    if len(parts) != len(JOB_FIELDS):
        raise argparse.ArgumentTypeError(f"--job wants {':'.join(JOB_FIELDS)}, got {text!r}")
    for name, part in zip(JOB_FIELDS, parts):
        if not part.isdigit():
            raise argparse.ArgumentTypeError(f"--job {text}: {name} must be a non-negative integer, got {part!r}")
    try:
        return JobConfig(*(int(x) for x in parts))
    except ValueError as exc:  # the field and its allowed range, from JobConfig
        raise argparse.ArgumentTypeError(f"--job {text}: {exc}") from None


def member_flag(text: str) -> tuple[int, Member]:
    parts = text.split(":")
    if len(parts) != 4 or not (parts[0].isdigit() and parts[1].isdigit()):
        raise argparse.ArgumentTypeError(f"--member wants JOB_ID:WORKER_ID:HOST:PORT, got {text!r}")
    where = f"--member {text}"
    return int(parts[0]), Member(int(parts[1]), (_host(parts[2], where), _port(parts[3], where)))


def build_parser() -> argparse.ArgumentParser:
    ap = OneLineParser(prog="python -m hina.emulator", description=__doc__.split("\n\n")[0],
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--listen", type=address, default=("127.0.0.1", 0),
                    help="data plane HOST:PORT (default 127.0.0.1 and a free port)")
    ap.add_argument("--control", type=address, default=("127.0.0.1", 0),
                    help="control HOST:PORT (default 127.0.0.1 and a free port)")
    ap.add_argument("--config", type=Path,
                    help='JSON file: {"jobs": [{"job_id": 1, "workers": 4, "words": 2239, "slot_base": 0, '
                         '"slots": 64, "members": [{"worker_id": 0, "address": ["127.0.0.1", 7000]}, ...]}], '
                         '"impair": {"drop": 0.01, "dup": 0, "reorder": 0, "delay": 0 (seconds), "seed": 0, '
                         '"pipe_rate": 0, "pipe_queue": 1024}} (default: none)')
    ap.add_argument("--job", type=job_flag, action="append", default=[], metavar="ID:N:K:BASE:SLOTS",
                    help="a job: id, workers, words per packet, first slot, slots (repeatable; default none)")
    ap.add_argument("--member", type=member_flag, action="append", default=[], metavar="ID:WORKER:HOST:PORT",
                    help="worker WORKER of job ID sends from HOST:PORT (repeatable; default none)")
    ap.add_argument("--drop", type=probability, default=0.0, help="drop probability, each direction (default 0)")
    ap.add_argument("--dup", type=probability, default=0.0,
                    help="duplication probability, each direction (default 0)")
    ap.add_argument("--reorder", type=probability, default=0.0,
                    help="reordering probability, each direction (default 0)")
    ap.add_argument("--delay", type=non_negative, default=0.0, metavar="MS",
                    help="delay every packet this many milliseconds, each direction (default 0)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the impairments (default 0)")
    ap.add_argument("--pipe-rate", type=non_negative, default=0.0, metavar="PPS",
                    help="a slow pipe, as BMv2's one ingress thread: each pipe's rules take at most this many "
                         "packets a second, the rest wait in its queue (default 0: as fast as the host goes)")
    ap.add_argument("--pipe-queue", type=pipe_queue_flag, default=PIPE_QUEUE, metavar="N",
                    help="with --pipe-rate: packets waiting for a pipe at most; one that finds N waiting is dropped "
                         f"and counted (slow_pipe.dropped) (default {PIPE_QUEUE}, BMv2's input buffer)")
    ap.add_argument("--stats", type=non_negative, default=0.0, metavar="SECONDS",
                    help="print counters this often (default 0: never)")
    ap.add_argument("--raw", type=raw_flag, action="append", default=[], metavar="PORT=IFNAME",
                    help="serve raw frames on this interface as this port (repeat per port; default: UDP)")
    ap.add_argument("--pipes", type=pipes_flag, default=1, metavar="P",
                    help="run the data plane as P processes, each owning the slots s with s mod P == its "
                         "index (default 1)")
    ap.add_argument("--no-batch", dest="batch", action="store_false",
                    help="one system call per packet instead of recvmmsg/sendmmsg batches run through the "
                         "compiled rules, for comparison (default: batches, where Linux's libc has them)")
    ap.add_argument("--no-offload", dest="offload", action="store_false",
                    help="raw mode: read and send every frame as the wire carries it, for comparison (default: "
                         "virtio_net_hdrs: a host's segmentation-offload super-frames are cut here, and each "
                         "member's RESULTs go out gathered into super-frames the kernel cuts)")
    ap.add_argument("--xdp", action="store_true",
                    help="raw mode: run the rules as an XDP program in the kernel, on the --raw interfaces; this "
                         "process serves the control port only (hina.emulator.xdp; needs clang, libbpf and root; "
                         "default: the rules in this process)")
    ap.add_argument("--topology", type=Path,
                    help="raw mode: JSON topology (hosts, jobs) to start with (default: none)")
    ap.add_argument("--lease", type=non_negative, default=DEFAULT_LEASE, metavar="SECONDS",
                    help="remove a job none of whose members was heard for this long, freeing its slots; jobs "
                         "from --job, --config or --topology are pinned; 0: never (default: "
                         f"{DEFAULT_LEASE:g})")
    ap.add_argument("--token-file", type=Path, metavar="PATH",
                    help="a shared secret (first line): requests that change jobs must be signed with it; reads "
                         f"stay open (default: ${ENV}, else no token: every request is taken)")
    ap.add_argument("--tenants", type=Path, metavar="PATH",
                    help="the job owners' secrets, a line OWNER SECRET each: an owner's token changes only the "
                         "jobs it installed; --token-file's (the operator's) changes every job (default: none)")
    ap.add_argument("--slot-space", type=between(1, MAX_SLOTS), default=DEFAULT_SPACE, metavar="SLOTS",
                    help="the slots this switch hands out to jobs that join without a slot range of their own "
                         f"(default: {DEFAULT_SPACE}, as the P4 program's registers)")
    ap.add_argument("--slot-policy", choices=POLICIES, default=DEFAULT_POLICY,
                    help="the most a new job is given: equal (space / (jobs + 1)), workers (in proportion to its "
                         f"workers), request (what it asks for) (default: {DEFAULT_POLICY})")
    return ap


def raw_flag(text: str) -> tuple[int, str]:
    port, _, ifname = text.partition("=")
    if not port.isdigit() or not ifname:
        raise argparse.ArgumentTypeError(f"--raw wants PORT=IFNAME, got {text!r}")
    return int(port), ifname


CONFIG_KEYS = ("jobs", "impair")
IMPAIR_KEYS = ("drop", "dup", "reorder", "delay", "seed", "pipe_rate", "pipe_queue")


def read_config(path: Path) -> dict:
    """The --config file, checked: an object with 'jobs' (a list) and 'impair' (an object) only."""
    try:
        cfg = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"--config {path}: not JSON ({exc})") from None
    if not isinstance(cfg, dict):
        raise ValueError(f"--config {path}: expected a JSON object {{\"jobs\": [...], \"impair\": {{...}}}}, "
                         f"got a {type(cfg).__name__}")
    unknown = sorted(set(cfg) - set(CONFIG_KEYS))
    if unknown:
        raise ValueError(f"--config {path}: unknown key(s) {', '.join(map(repr, unknown))}; "
                         f"the keys are {', '.join(map(repr, CONFIG_KEYS))}")
    if not isinstance(cfg.get("jobs", []), list):
        raise ValueError(f"--config {path}: 'jobs' must be a list of job objects")
    impair = cfg.get("impair", {})
    if not isinstance(impair, dict) or set(impair) - set(IMPAIR_KEYS):
        raise ValueError(f"--config {path}: 'impair' must be an object with keys among {', '.join(IMPAIR_KEYS)}")
    return cfg


def load(args: argparse.Namespace) -> tuple[list[JobConfig], ImpairmentConfig]:
    jobs: dict[int, JobConfig] = {}
    for job in args.job:
        if job.job_id in jobs:
            raise ValueError(f"--job {job.job_id} is given twice")
        jobs[job.job_id] = job
    impair = {"drop": args.drop, "dup": args.dup, "reorder": args.reorder, "seed": args.seed,
              "delay": args.delay / 1000.0, "pipe_rate": args.pipe_rate, "pipe_queue": args.pipe_queue}
    if args.config:
        cfg = read_config(args.config)
        for j in cfg.get("jobs", []):
            try:
                job = JobConfig.from_config(j)
            except ValueError as exc:
                raise ValueError(f"--config {args.config}: {exc}") from None
            if job.job_id in jobs:
                raise ValueError(f"--config {args.config}: job {job.job_id} is defined twice")
            jobs[job.job_id] = job
        impair.update(cfg.get("impair", {}))
    for job_id, member in args.member:
        if job_id not in jobs:
            raise ValueError(f"--member names job {job_id}, which no --job or config defines")
        jobs[job_id] = dataclasses.replace(jobs[job_id], members=jobs[job_id].members + (member,))
    try:
        config = ImpairmentConfig(**impair)
    except ValueError as exc:  # the flags' values were checked as they were read: a bad one is the file's
        raise ValueError(f"--config {args.config}: {exc}" if args.config else str(exc)) from None
    return list(jobs.values()), config


def xdp_switch(args: argparse.Namespace, impair: ImpairmentConfig):
    """The XDP switch on the --raw interfaces (`hina.emulator.xdp`), or a ValueError saying why not."""
    if args.pipes != 1 or impair.active or impair.pipe_rate:
        raise ValueError("--xdp runs in the kernel on every CPU a frame arrives on: no --pipes, no slow pipe and no "
                         "impairments in the switch (use the links': tc netem)")
    from hina.emulator.xdp.build import cannot_load
    from hina.emulator.xdp.switch import XdpSwitch

    why = cannot_load()
    if why is not None:
        raise ValueError(f"--xdp: {why}")
    return XdpSwitch(dict(args.raw), control=args.control, stats_every=args.stats, slots=args.slot_space)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        jobs, impair = load(args)
        if args.raw:
            if jobs:
                raise ValueError("raw mode takes its jobs from --topology (ports, not addresses), not --job")
            topology = Topology.from_config(json.loads(args.topology.read_text())) if args.topology else None
            token = read_token(args.token_file)
            if args.xdp:
                switch = xdp_switch(args, impair)
            else:
                switch = RawSwitch(dict(args.raw), None, control=args.control, impair=impair,
                                   stats_every=args.stats, pipes=args.pipes, batch=args.batch, offload=args.offload)
            if topology is not None:  # as a controller's configure (every pipe's, pinned there), before any request
                reply, _ = handle(switch.pipeline, json.dumps({"op": "configure", "topology": topology.to_config()}),
                                  configure=switch._configure())
                if not reply["ok"]:
                    switch.close()
                    raise ValueError(f"--topology {args.topology}: {reply['error']}")
        else:
            if args.xdp:
                raise ValueError("--xdp runs on raw interfaces: give them with --raw PORT=IFNAME")
            token = read_token(args.token_file)
            pipeline = Pipeline()
            for job in jobs:
                pipeline.add_job(job, origin="command line")
            switch = UdpSwitch(pipeline, data=args.listen, control=args.control, impair=impair,
                               stats_every=args.stats, pipes=args.pipes, batch=args.batch)
        switch.set_lease(args.lease)
        switch.set_token(token, read_tenants(args.tenants) if args.tenants else None)
        switch.set_slots(args.slot_space, args.slot_policy)
    except (ValueError, OSError, KeyError, TypeError) as exc:  # TokenError is a ValueError
        print(f"hina.emulator: {exc}", file=sys.stderr)
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
