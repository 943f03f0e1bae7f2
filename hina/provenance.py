"""Where a result came from: the command, machine, date and commit that every result file records.

Every benchmark writes its JSON through `write_result`, which puts one `meta` object first:

    {"meta": {"command": "python benchmarks/soak.py --seconds 60", "date": "2026-11-24T21:03:11+00:00",
              "machine": "Linux-6.18...-x86_64", "cpu": "AMD EPYC ...", "cpus": 2, "python": "3.11.7",
              "numpy": "2.4.6", "commit": "6c2ba29c1f0e", "dirty": false, ...}, ...the result...}

`tools/tables.py` prints that line under every table it generates, so a figure in README or
docs/ always names its run.  Where a result goes when its script is not told (--out) is decided here
too, once for every script: `default_out` ($HINA_RESULTS, else hina-results/ in the current directory;
never the committed benchmarks/results/).  `meta_of` also reads the older layouts (command, date and machine at
the top level, or no commit), and says "not recorded" for what a file lacks.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

# Where a benchmark writes when not told (--out): the folder HINA_RESULTS names, else hina-results/ in the
# current directory (gitignored at the repository's root).  Never benchmarks/results/, the committed figures
# that tools/tables.py renders: only an explicit --out (as tools/campaign.py passes) writes there.  Not a
# bare results/: run from benchmarks/, that would be the committed folder.
RESULTS_ENV = "HINA_RESULTS"
SCRATCH = "hina-results"
OUT_RULE = f"${RESULTS_ENV}, else {SCRATCH}/ in the current directory"


def results_dir() -> Path:
    """The folder default outputs go to: $HINA_RESULTS, else ./hina-results (relative: printed as typed)."""
    return Path(os.environ.get(RESULTS_ENV) or SCRATCH)


def default_out(name: str = "") -> Path:
    """A result's default path: `name` (a file, or "" for the folder itself) in `results_dir()`."""
    return results_dir() / name if name else results_dir()


def out_help(name: str = "", what: str = "the JSON result") -> str:
    """--out's help: what it is and the rule for its default (the same words in every script's --help)."""
    where = f"{name} in " if name else ""
    return (f"{what} (default: {where}{OUT_RULE}; benchmarks/results/, the committed figures, only when "
            f"named here)")


def machine_key() -> dict[str, Any]:
    """What makes a measurement of this machine's speed valid elsewhere: its CPU model and count, the kernel
    (its network stack does the links' work) and the CPU quota this process runs under (`cpu_quota`)."""
    return {"cpu": cpu_model(), "cpus": os.cpu_count(), "kernel": platform.release(), "cpu_quota": cpu_quota()}


# -- the CPU quota: how much CPU time the cgroup this process runs in may take -----------------------------------

@dataclasses.dataclass(frozen=True)
class CpuCgroups:
    """The cgroup hierarchy that holds the cpu controller: its version (2, or 1 where cpu is bound to a v1
    hierarchy), where it is mounted, and the cgroup this process is in (a folder under `mount`)."""

    version: int
    mount: Path
    own: Path

    def quota_of(self, folder: Path) -> float | None:
        """One cgroup's own limit in cores (quota over period), None where it sets none."""
        try:
            if self.version == 2:
                quota, period = (folder / "cpu.max").read_text().split()
                return None if quota == "max" else int(quota) / int(period)
            quota = int((folder / "cpu.cfs_quota_us").read_text())
            return None if quota < 0 else quota / int((folder / "cpu.cfs_period_us").read_text())
        except (OSError, ValueError):
            return None


def cpu_cgroups(mountinfo: str | None = None, cgroup: str | None = None) -> CpuCgroups | None:
    """Where the cpu controller is (/proc/self/mountinfo and /proc/self/cgroup, or their text), or None."""
    try:
        mountinfo = Path("/proc/self/mountinfo").read_text() if mountinfo is None else mountinfo
        cgroup = Path("/proc/self/cgroup").read_text() if cgroup is None else cgroup
    except OSError:
        return None
    paths = {}  # version -> this process's path in that hierarchy
    for line in cgroup.splitlines():
        num, controllers, path = line.split(":", 2)
        if num == "0" and not controllers:
            paths[2] = path
        elif "cpu" in controllers.split(","):
            paths[1] = path
    for line in mountinfo.splitlines():
        fields = line.split()
        if " - " not in line or len(fields) < 5:
            continue
        root, point = fields[3], Path(fields[4])
        fstype, _, options = line.split(" - ", 1)[1].split()[:3]
        if fstype == "cgroup2" and 2 in paths and "cpu" in _read(point / "cgroup.controllers").split():
            version = 2
        elif fstype == "cgroup" and 1 in paths and "cpu" in options.split(","):
            version = 1
        else:
            continue
        rel = os.path.relpath(paths[version], root)
        return CpuCgroups(version, point, point if rel.startswith("..") else (point / rel).resolve())
    return None


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def cpu_quota(where: CpuCgroups | None = None) -> float | None:
    """The CPU time this process may take per second, in cores (1.0: one core's worth, systemd's CPUQuota=100%):
    the least limit of its cgroup and every cgroup above it, rounded to a thousandth; None where none limits it.
    A quota makes a machine slower per byte as fewer cores would, so a measurement of speed made under one is
    no measurement of the machine without it (`machine_key`)."""
    where = cpu_cgroups() if where is None else where
    if where is None:
        return None
    limits, folder = [], where.own
    while True:
        limits.append(where.quota_of(folder))
        if folder == where.mount or where.mount not in folder.parents:
            break
        folder = folder.parent
    found = [x for x in limits if x is not None]
    return round(min(found), 3) if found else None


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def changes() -> list[str] | None:
    """What differs from the checkout's commit, as `git status --porcelain` lines: tracked files changed and
    files git does not ignore but does not track, other than the results and the pages that show them (a
    campaign rewrites those as it goes); None outside git."""
    try:
        status = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=all", "--",
                                 ".", ":!benchmarks/results", ":!docs", ":!README.md"],
                                capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return status.stdout.splitlines() if status.returncode == 0 else None


def commit() -> tuple[str | None, bool]:
    """The checkout's commit (12 hex digits) and whether the code differs from it (`changes`); (None, False)
    outside git."""
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                              text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None, False
    if head.returncode:
        return None, False
    return head.stdout.strip(), bool(changes())


# The committed figures come from clean commits: a result written into benchmarks/results/ from a checkout
# with uncommitted code is refused, unless this variable is 1 (a draft; its meta then says "dirty").
ALLOW_DIRTY = "HINA_ALLOW_DIRTY"
COMMITTED = ROOT / "benchmarks" / "results"


def committed(path: Path | str) -> bool:
    """Whether `path` lies in the committed figures' folder, benchmarks/results/."""
    try:
        Path(path).resolve().relative_to(COMMITTED.resolve())
    except ValueError:
        return False
    return True


def dirty_refusal(path: Path | str) -> str | None:
    """Why a result may not be written to `path` now (a committed figure from uncommitted code), or None."""
    if not committed(path) or os.environ.get(ALLOW_DIRTY) == "1":
        return None
    changed = changes()
    if not changed:
        return None
    shown = ", ".join(line[3:] for line in changed[:4]) + (f" and {len(changed) - 4} more" if len(changed) > 4 else "")
    return (f"{path}: a committed figure must come from a clean commit, and this checkout has uncommitted changes "
            f"({shown}): commit them first, or write elsewhere (--out), or set {ALLOW_DIRTY}=1 for a draft")


def out_path(text: str) -> Path:
    """--out's type: a path, refused as the flag is read when it would put a figure from uncommitted code
    into benchmarks/results/ (`dirty_refusal`), not after the run."""
    why = dirty_refusal(text)
    if why:
        raise argparse.ArgumentTypeError(why)
    return Path(text)


def command_line(script: str, argv: list[str] | None = None) -> str:
    """`python benchmarks/x.py ARGS` as the user typed it (argv None: this process's own arguments)."""
    return shlex.join(["python", script, *(sys.argv[1:] if argv is None else argv)])


def stamp(command: str, **extra: Any) -> dict:
    """The `meta` object of a result: command, date (UTC), machine, cpu, cpus, versions, commit, dirty."""
    import numpy as np

    head, dirty = commit()
    meta = {"command": command, "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "machine": platform.platform(), "cpu": cpu_model(), "cpus": os.cpu_count(),
            "python": platform.python_version(), "numpy": np.__version__, "commit": head, "dirty": dirty,
            "load": _loadavg()}
    meta.update(extra)
    return meta


def p4_versions() -> dict[str, str]:
    """The P4 toolchain a BMv2 figure ran on: p4c's and simple_switch_grpc's versions (those installed)."""
    out = {}
    for tool in ("p4c", "simple_switch_grpc"):
        try:
            run = subprocess.run([tool, "--version"], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            continue
        found = re.search(r"\d+\.\d+\.\d+(\.\d+)?", run.stdout or run.stderr or "")
        if run.returncode == 0 and found:
            out[tool] = found.group(0)
    return out


def _loadavg() -> list[float] | None:
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:
        return None


def write_result(path: Path, result: dict, command: str, **extra: Any) -> dict:
    """Write `result` as JSON with `meta` first (merged over any `meta` the result already has); returns it.
    A committed figure from uncommitted code is not written (`dirty_refusal`): SystemExit says why."""
    why = dirty_refusal(path)
    if why:
        raise SystemExit(f"not written: {why}")
    meta = {**result.get("meta", {}), **stamp(command, **extra)}
    data = {"meta": meta, **{k: v for k, v in result.items() if k != "meta"}}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(result_text(data))
    return data


INDENTED_UP_TO = 1 << 20  # bytes: a larger result (per-step records of long runs) is written without indentation


def result_text(data: dict) -> str:
    """A result file's text: indented to be read and diffed, or compact where indenting would pass
    INDENTED_UP_TO (the same JSON value either way)."""
    text = json.dumps(data, indent=1)
    return text if len(text) <= INDENTED_UP_TO else json.dumps(data, separators=(",", ":"))


NOT_RECORDED = "not recorded"


def meta_of(result: dict) -> dict:
    """command, date, machine, cpus, commit of a result file in any layout this project has written."""
    meta = dict(result.get("meta") or {})
    for key in ("command", "date", "machine", "cpus", "commit"):
        if key not in meta and key in result:
            meta[key] = result[key]
    machine = meta.get("machine")
    if isinstance(machine, str) and "(" not in machine and meta.get("cpus"):
        machine = f"{machine} ({meta['cpus']} CPUs)"
    return {"command": meta.get("command") or NOT_RECORDED, "date": meta.get("date") or NOT_RECORDED,
            "machine": machine or NOT_RECORDED, "commit": meta.get("commit") or NOT_RECORDED,
            "dirty": bool(meta.get("dirty"))}


def source_line(name: str, result: dict) -> str:
    """One line naming a result file's run, for under a generated table."""
    m = meta_of(result)
    commit_text = m["commit"] + (" with uncommitted changes" if m["dirty"] else "")
    command = m["command"]
    if command != NOT_RECORDED and not command.startswith(("python", "sudo", ".venv", "make")):
        command = "python " + (command if "/" in command.split()[0] else f"benchmarks/{command}")
    p4 = (result.get("meta") or {}).get("p4") or result.get("p4") or {}
    tools = "".join(f", {tool} {version}" for tool, version in sorted(p4.items()))
    return (f"Source: `benchmarks/results/{name}`, from `{command}` on {m['machine']}{tools}, {m['date']}, "
            f"commit {commit_text}.")
