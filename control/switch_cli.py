"""`hina switch`: look at a running switch's jobs, remove or reset one, see how the switch is.

    hina switch jobs   --control HOST:PORT [--json] [--watch S]  every job: members, slots, state, counters, last
                                                          heard, owner (again every S seconds)
    hina switch remove JOB_ID --control HOST:PORT         remove a job, freeing its slots
    hina switch reset  JOB_ID --control HOST:PORT         empty a job's slot copies (it stays installed)
    hina switch status --control HOST:PORT [--json]       pipes, uptime, lease, token, each job's lease

`--control` names an emulator's control port; `--bmv2 GRPC_ADDR` a BMv2
switch instead (its P4Runtime server: the `jobs`, `workers`,
`worker_addresses` and `parents` tables, read and deleted over P4Runtime
with the P4Info the switch runs; slots emptied through simple_switch_CLI
on `--thrift-port`).  Requests that change a switch
guarded by a token are signed with it: `--token-file PATH`, else
$HINA_TOKEN (`hina.control.auth`); a tenant's token (`OWNER SECRET`)
removes and resets only that owner's jobs.  Output is a plain table; `--json`
prints one JSON object for scripts.  A refusal or an unreachable switch is
one line on stderr and exit status 1; bad flags, status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from hina.cliargs import between, plural, positive

from .client import ControlClient, ControlError


def address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


def add_parser(sub) -> argparse.ArgumentParser:
    """Register `switch` and its commands on a subparsers object (`hina`'s)."""
    s = sub.add_parser("switch", help="list, remove or reset the jobs of a running switch; its status",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog="every command takes --control HOST:PORT or --bmv2 GRPC_ADDR, and --device-id, "
                              "--thrift-port, --token-file, --timeout, --json (`hina switch jobs --help`)")
    commands = s.add_subparsers(dest="switch_command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        where = p.add_mutually_exclusive_group(required=True)
        where.add_argument("--control", type=address, metavar="HOST:PORT", help="the emulator's control port")
        where.add_argument("--bmv2", metavar="GRPC_ADDR", help="a BMv2 switch's P4Runtime address, e.g. "
                                                              "127.0.0.1:9559")
        p.add_argument("--device-id", type=between(0), default=0, help="BMv2: the P4Runtime device id (default 0)")
        p.add_argument("--thrift-port", type=between(1, 65535), default=9090,
                       help="BMv2: simple_switch_CLI's thrift port, to empty slots (default 9090)")
        p.add_argument("--token-file", type=Path, metavar="PATH",
                       help="the switch's shared secret, to sign requests that change it (default: $HINA_TOKEN)")
        p.add_argument("--timeout", type=positive, default=2.0,
                       help="seconds to wait for each reply (default 2)")
        p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")

    j = commands.add_parser("jobs", help="every job: members, slots, state, counters, last heard, lease, owner")
    common(j)
    j.add_argument("--watch", type=positive, metavar="SECONDS",
                   help="list again every SECONDS until interrupted (with --json: one JSON line each, with its "
                        "time \"t\"; the slots held over time)")
    r = commands.add_parser("remove", help="remove a job: its slots are free for another")
    r.add_argument("job_id", type=between(0, (1 << 16) - 1), metavar="JOB_ID", help="the job's id")
    common(r)
    z = commands.add_parser("reset", help="empty a job's slot copies (after a crash); the job stays")
    z.add_argument("job_id", type=between(0, (1 << 16) - 1), metavar="JOB_ID", help="the job's id")
    common(z)
    t = commands.add_parser("status", help="pipes, uptime, lease, token, each job's lease")
    common(t)
    s.set_defaults(func=run)
    return s


# -- talking to the switch ----------------------------------------------------------------------------
class _Emulator:
    def __init__(self, args: argparse.Namespace):
        self.where = f"{args.control[0]}:{args.control[1]}"
        self.client = ControlClient(args.control, timeout=args.timeout, token_file=args.token_file)

    def jobs(self) -> list[dict]:
        return self.client.jobs()

    def status(self) -> dict:
        return self.client.status()

    def remove(self, job_id: int) -> None:
        self.client.remove_job(job_id)

    def reset(self, job_id: int) -> None:
        self.client.reset_job(job_id)

    def close(self) -> None:
        self.client.close()


class _Bmv2:
    def __init__(self, args: argparse.Namespace):
        from .controller import Bmv2Target  # gRPC only when asked for

        self.where = args.bmv2
        self.target = Bmv2Target(args.bmv2, device_id=args.device_id, thrift_port=args.thrift_port,
                                 p4info=None, push_pipeline=False, timeout=max(args.timeout, 1.0))  # what it runs

    def jobs(self) -> list[dict]:
        return self.target.jobs()

    def status(self) -> dict:
        jobs = self.target.jobs()
        return {"target": "bmv2", "jobs": len(jobs), "leases": {j["job_id"]: None for j in jobs},
                "lease_s": 0, "token": False, **self.target.counters()}

    def remove(self, job_id: int) -> None:
        self.target.remove_job(job_id)

    def reset(self, job_id: int) -> None:
        self.target.reset_job(job_id)

    def close(self) -> None:
        self.target.close()


def run(args: argparse.Namespace, out=None, err=None) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    try:
        switch = _Bmv2(args) if args.bmv2 else _Emulator(args)
    except (ControlError, ValueError, OSError) as exc:  # auth.TokenError is a ValueError
        print(f"hina switch: {exc}", file=err)
        return 2 if isinstance(exc, ValueError) else 1
    try:
        command = args.switch_command
        if command == "jobs":
            while True:
                try:
                    jobs = switch.jobs()
                except ControlError as exc:
                    if not getattr(args, "watch", None):
                        raise
                    # a busy switch's reply lost: a watch goes on (the next listing says where the slots are)
                    print(f"hina switch: {exc}; asking again in {args.watch:g} s", file=err, flush=True)
                else:
                    print(json.dumps({"switch": switch.where, "t": round(time.time(), 3), "jobs": jobs})
                          if args.json else format_jobs(jobs, switch.where), file=out, flush=True)
                if not getattr(args, "watch", None):
                    break
                time.sleep(args.watch)
        elif command == "status":
            status = switch.status()
            print(json.dumps({"switch": switch.where, "status": status}) if args.json
                  else format_status(status, switch.where), file=out)
        elif command == "remove":
            switch.remove(args.job_id)
            print(json.dumps({"switch": switch.where, "removed": args.job_id}) if args.json
                  else f"removed job {args.job_id} from {switch.where}: its slots are free", file=out)
        else:
            switch.reset(args.job_id)
            print(json.dumps({"switch": switch.where, "reset": args.job_id}) if args.json
                  else f"emptied job {args.job_id}'s slots on {switch.where}", file=out)
    except ControlError as exc:
        print(f"hina switch: {exc}", file=err)
        return 1
    except KeyboardInterrupt:  # the end of a --watch
        pass
    finally:
        switch.close()
    return 0


# -- formatting ---------------------------------------------------------------------------------------
def seconds(value: float | None) -> str:
    """A duration for people: 0.4 s, 42 s, 7 min, 3 h 5 min, 2 d 4 h."""
    if value is None:
        return "-"
    if value < 10:
        return f"{value:.1f} s"
    if value < 120:
        return f"{value:.0f} s"
    if value < 3600 * 2:
        return f"{value / 60:.0f} min"
    if value < 86400 * 2:
        return f"{int(value // 3600)} h {int(value % 3600 // 60)} min"
    return f"{int(value // 86400)} d {int(value % 86400 // 3600)} h"


def member_text(m: dict[str, Any]) -> str:
    if "address" in m:
        where = "{}:{}".format(*m["address"])
    else:
        where = f"port {m.get('port')}"
        if "ip" in m:  # a worker at its own address behind the port
            where += f" {m['ip']}:{m.get('udp_port')}"
        extra = [str(v) for k, v in m.items() if k not in ("worker_id", "port", "ip", "udp_port")]
        if extra:
            where += " " + " ".join(extra)
    return f"{m.get('worker_id')}={where}"


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


def format_jobs(jobs: list[dict], where: str) -> str:
    """The jobs as a plain table, then each job's members."""
    if not jobs:
        return f"no jobs on {where}"
    rows = [["JOB", "STATE", "MEMBERS", "SLOTS", "UPDATES", "RESULTS", "RESENDS", "DROPS", "LAST FRAME", "LEASE",
             "ORIGIN", "OWNER"]]
    for j in jobs:
        c = j.get("counters", {})
        drops = sum(c.get("drops", {}).values()) if isinstance(c.get("drops"), dict) else None
        lease = "pinned" if j.get("pinned") else "none" if j.get("lease_left_s") is None \
            else f"{seconds(j['lease_left_s'])} left"
        heard = "-" if j.get("state") == "unknown" else "never" if j.get("frame_s") is None \
            else f"{seconds(j['frame_s'])} ago"
        rows.append([str(j["job_id"]), j.get("state", "-"), f"{len(j.get('members', []))} of {j['workers']}",
                     f"{j['slot_base']}+{j['slots']}",
                     *(f"{c[k]:,}" if k in c else "-" for k in ("updates", "results", "resends")),
                     "-" if drops is None else f"{drops:,}", heard, lease, j.get("origin", "-"),
                     j.get("owner") or "-"])
    lines = [_table(rows), ""]
    for j in jobs:
        members = ", ".join(member_text(m) for m in j.get("members", [])) or "none yet"
        lines.append(f"job {j['job_id']} members: {members}")
        drops = j.get("counters", {}).get("drops") or {}
        if drops:
            lines.append(f"job {j['job_id']} drops: " + ", ".join(f"{k} {v:,}" for k, v in sorted(drops.items())))
    return "\n".join(lines)


def format_status(status: dict, where: str) -> str:
    leases = status.get("leases", {})
    if status.get("target") == "bmv2":
        head = f"BMv2 at {where}: {plural(status.get('jobs', 0), 'job')}"
        drops = status.get("drops", {})
        return head + ("\ndrops: " + ", ".join(f"{k} {v:,}" for k, v in sorted(drops.items())) if drops else "")
    pipes, alive = status.get("pipes", 1), status.get("alive", 1)
    lease = status.get("lease_s", 0)
    lines = [f"switch at {where}: up {seconds(status.get('uptime_s'))}, {plural(pipes, 'pipe')} "
             f"({alive} alive), lease {seconds(lease) if lease else 'none'}, "
             f"token {'required' if status.get('token') else 'not required'}"]
    if status.get("tenants"):
        lines.append(f"tenants: {', '.join(status['tenants'])}")
    if "slot_space" in status:
        waiting = status.get("waiting") or []
        lines.append(f"slots: {status['slot_space']:,} handed out, policy {status.get('slot_policy')}"
                     + (f"; waiting: job{'s' * (len(waiting) != 1)} {', '.join(map(str, waiting))}" if waiting else ""))
    lines += [f"  {line}" for line in status.get("down", [])]
    if leases:
        lines.append(f"{plural(len(leases), 'job')}: " + ", ".join(
            f"{k} ({'no lease' if not lease else 'pinned' if v is None else seconds(v) + ' left'})"
            for k, v in sorted(leases.items())))
    else:
        lines.append("no jobs")
    return "\n".join(lines)


__all__ = ["add_parser", "format_jobs", "format_status", "run"]
