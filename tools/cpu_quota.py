"""Run a command under a CPU quota: the machine as one with fewer cores, or slower ones, would run it.

    sudo .venv/bin/python tools/cpu_quota.py 100% -- .venv/bin/python tools/reproduce.py tree-leaves
    sudo make reproduce CLAIM=tree-leaves QUOTA=100%     # the same through make

The quota is systemd's CPUQuota: 100% is one core's worth of CPU time per second, shared by the command and
every process it starts (Mininet's hosts and switches included), on however many cores.  On a 2-core machine,
100% halves the CPU time per second of wall time, as a machine half as fast per byte would.  Where systemd
runs the machine (/run/systemd/system), the command runs in a transient scope (`systemd-run --scope -p
CPUQuota=...`); elsewhere in a cgroup of its own made here, in the hierarchy that holds the cpu controller
(cgroup v2's cpu.max, or v1's cpu.cfs_quota_us where cpu is bound to v1), removed when the command ends.  The
kernel's own work for the links (softirqs) is not always charged to the cgroup, so a quota slows the processes
more than the kernel.  Either way needs root.

Exit status: the command's, or 2 on a bad quota or where no quota can be set here (one line saying why).
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from hina.cliargs import OneLineParser
from hina.provenance import CpuCgroups, cpu_cgroups

PERIOD_US = 100_000  # the scheduler's period the quota is a share of (systemd's and the kernel's default)
SYSTEMD = Path("/run/systemd/system")  # present where systemd is the init system (sd_booted(3))


def parse_quota(text: str) -> float:
    """A quota as systemd writes it, "100%" (one core's worth), as a percentage; ValueError (one line) else."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)%", text.strip())
    cores = os.cpu_count() or 1
    if not m or not 0 < float(m.group(1)) <= 100 * cores:
        raise ValueError(f"a CPU quota is a percentage of one core's time above 0% and at most {100 * cores}% "
                         f"({cores} CPUs here), as systemd's CPUQuota, such as 100%, got {text!r}")
    return float(m.group(1))


@dataclasses.dataclass(frozen=True)
class Plan:
    """How a command runs under a quota: the command line and, for a cgroup made here, the cgroup (made before
    the command starts, removed after it ends)."""

    argv: list[str]
    folder: Path | None = None
    limit: dict[str, str] = dataclasses.field(default_factory=dict)  # file in `folder` -> what is written


def systemd_command(percent: float, argv: list[str]) -> list[str]:
    """`argv` in a transient systemd scope limited to `percent` of one core."""
    return ["systemd-run", "--scope", "--quiet", "-p", f"CPUQuota={percent:g}%", "--", *argv]


def cgroup_command(procs: Path, argv: list[str]) -> list[str]:
    """`argv` started by a shell that first puts itself into the cgroup whose cgroup.procs is `procs` (so every
    process the command starts is in it too), then becomes the command."""
    return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', str(procs), *argv]


def cgroup_plan(percent: float, argv: list[str], where: CpuCgroups, name: str) -> Plan:
    """A cgroup `name` at the top of the hierarchy `where`, limited to `percent` of one core, and the command
    line that runs `argv` in it."""
    folder = where.mount / name
    quota = round(percent / 100 * PERIOD_US)
    limit = ({"cpu.max": f"{quota} {PERIOD_US}"} if where.version == 2 else
             {"cpu.cfs_period_us": str(PERIOD_US), "cpu.cfs_quota_us": str(quota)})
    return Plan(cgroup_command(folder / "cgroup.procs", argv), folder, limit)


def systemd_here() -> bool:
    """Whether systemd runs this machine and systemd-run is at hand."""
    return SYSTEMD.is_dir() and shutil.which("systemd-run") is not None


def plan(percent: float, argv: list[str], systemd: bool, where: CpuCgroups | None) -> Plan:
    """How to run `argv` under `percent`: systemd's scope where systemd runs the machine, else a cgroup in the
    hierarchy `where` (`cpu_cgroups`); ValueError (one line) where neither can be."""
    if systemd:
        return Plan(systemd_command(percent, argv))
    if where is None:
        raise ValueError("no cgroup hierarchy here holds the cpu controller (/proc/self/mountinfo), and systemd "
                         "does not run this machine: no CPU quota can be set")
    return cgroup_plan(percent, argv, where, f"hina-quota-{os.getpid()}")


def make_cgroup(p: Plan, version: int) -> None:
    """Create the plan's cgroup and write its limit (for v2, the cpu controller enabled for the top's
    children first); OSError where this process may not."""
    if version == 2:
        control = p.folder.parent / "cgroup.subtree_control"
        if "cpu" not in control.read_text().split():
            control.write_text("+cpu")
    p.folder.mkdir()
    for name, value in p.limit.items():
        (p.folder / name).write_text(value)


def remove_cgroup(folder: Path, tries: int = 50) -> str | None:
    """Remove a cgroup once the processes in it have ended (a few seconds at most); why not, or None."""
    for _ in range(tries):
        try:
            folder.rmdir()
            return None
        except FileNotFoundError:
            return None
        except OSError as exc:
            error = exc
            time.sleep(0.1)
    return f"{folder} not removed ({error.strerror}): processes of the command still run in it"


def run(percent: float, argv: list[str], env: dict[str, str] | None = None) -> int:
    """Run `argv` under `percent` of one core; its exit status.  ValueError (one line) where no quota can be set."""
    systemd = systemd_here()
    where = None if systemd else cpu_cgroups()
    p = plan(percent, argv, systemd, where)
    if p.folder is not None:
        try:
            make_cgroup(p, where.version)
        except OSError as exc:
            raise ValueError(f"cannot make the cgroup {p.folder} for a CPU quota ({exc.strerror}; root needed)") \
                from None
    try:
        child = subprocess.Popen(p.argv, env=env)
        while True:
            try:
                return child.wait()
            except KeyboardInterrupt:  # the command has it too (the terminal's process group): wait for it to end
                continue
    finally:
        if p.folder is not None:
            why = remove_cgroup(p.folder)
            if why:
                print(f"cpu_quota.py: {why}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="cpu_quota.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("quota", help="the share of one core's time, as systemd's CPUQuota: 100%% is one core")
    ap.add_argument("command", nargs="+", help="the command and its arguments (after --)")
    args = ap.parse_args(argv)
    try:
        return run(parse_quota(args.quota), args.command)
    except (ValueError, OSError) as exc:
        print(f"cpu_quota.py: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
