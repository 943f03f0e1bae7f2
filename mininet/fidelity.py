"""The fidelity monitor: did the emulated links, or this machine's CPUs, set a Mininet run's time?

An emulated figure is only worth its seconds when the emulated network set
them (Mininet-HiFi, Handigol et al., CoNEXT 2012).  `Monitor` samples,
from a thread of the runner (no daemon, nothing runs in the hosts):

- every link's byte counters, both directions, from
  /sys/class/net/<if>/statistics of the link's end in the root namespace
  (a Mininet switch, emulator or Linux bridge, lives there; a veth's rx on
  the switch side is what its host sent, its tx what the host received);
- the CPU time of every process the runner started (its descendants: the
  switch and its pipes, the workers, iperf3), from /proc/<pid>/stat, each
  named by its command and the host whose network namespace it runs in;
- the machine's busy CPU time, from /proc/stat (other load included).

`judge(samples, links, names, cpus)` is a pure function of those samples
and gives the verdict of one window (one aggregation round):

1. network-bound: the busiest link (the one whose bytes need the most time
   at its configured rate) ran at >= 90% of that rate over the intervals in
   which it was sending, and was sending for at least half the window
   (otherwise it was full only in bursts and the time went elsewhere);
2. CPU-bound: <process> at X% of a core: one process used >= 90% of a core;
3. CPU-bound: the machine: all its cores were >= 90% busy (processes,
   ours and others', shared them and none got a core to itself);
4. neither: what the time went to (the busiest link's share of the window
   at line rate, the busiest process, the machine's load).

Every figure behind the verdict is in the returned dict.  See docs/fidelity.md.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

LINE_SHARE = 0.9  # the busiest link at >= 90% of its rate while sending: network-bound
SENDING_SHARE = 0.5  # ... through at least half the window
CORE_SHARE = 0.9  # one process at >= 90% of a core: CPU-bound
MACHINE_SHARE = 0.9  # every core >= 90% busy: the machine is the bottleneck
ACTIVE_SHARE = 0.05  # an interval in which a link moved >= 5% of its rate counts as sending
PERIOD = 0.025  # seconds between samples: 40 a second, a few dozen file reads each
NAMING_SAMPLES = 20  # a process is named again on each of its first 20 samples (half a second)
CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclasses.dataclass(frozen=True)
class Link:
    """One link, its counters read on `ifname`, the end on node `b` (in the root namespace): rx is the
    direction a -> b, tx b -> a.  `mbps`: its configured rate (None: unshaped)."""

    a: str
    b: str
    ifname: str
    mbps: float | None

    def directions(self) -> tuple[str, str]:
        return f"{self.a}->{self.b}", f"{self.b}->{self.a}"


@dataclasses.dataclass(frozen=True)
class Sample:
    """Counters at time t (monotonic seconds): bytes (rx, tx) per interface, CPU seconds per pid, and the
    machine's (busy, total) CPU seconds summed over its cores."""

    t: float
    links: dict[str, tuple[int, int]]
    cpu: dict[int, float]
    machine: tuple[float, float]
    # where the CPU seconds went: per pid (user, system), the machine's (user, system, irq, softirq)
    split: dict[int, tuple[float, float]] = dataclasses.field(default_factory=dict)
    kernel: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)


# --- the verdict: a pure function of samples -------------------------------------------------------------

def _link_figures(samples: Sequence[Sample], link: Link, direction: int, window: float) -> dict:
    """Bytes, line time and the rate while sending of one direction of one link."""
    name = link.directions()[direction]
    series = [(s.t, s.links[link.ifname][direction]) for s in samples if link.ifname in s.links]
    total = series[-1][1] - series[0][1] if len(series) > 1 else 0
    out = {"link": name, "mbps": link.mbps, "bytes": total, "line_seconds": None, "while_sending": None,
           "sending_share": 0.0}
    if not link.mbps or len(series) < 2:
        return out
    bps = link.mbps * 1e6 / 8  # bytes per second at the configured rate
    out["line_seconds"] = total / bps
    intervals = [(t1 - t0, b1 - b0) for (t0, b0), (t1, b1) in zip(series, series[1:]) if t1 > t0]
    active = [i for i, (dt, db) in enumerate(intervals) if db >= ACTIVE_SHARE * bps * dt]
    if not active:
        return out
    out["sending_share"] = sum(intervals[i][0] for i in active) / window
    # a burst's first and last intervals are partly idle (the sending began or ended inside them): trim
    # them where the burst is long enough to keep a middle
    runs, run = [], [active[0]]
    for i in active[1:]:
        if i == run[-1] + 1:
            run.append(i)
        else:
            runs.append(run)
            run = [i]
    runs.append(run)
    kept = [i for r in runs for i in (r[1:-1] if len(r) >= 3 else r)]
    sent_time = sum(intervals[i][0] for i in kept)
    out["while_sending"] = sum(intervals[i][1] for i in kept) / (bps * sent_time)
    return out


def _cpu_figures(samples: Sequence[Sample], names: dict[int, str], window: float) -> dict[str, float]:
    """Share of a core per process over the window (a process seen in part of it: over that part's
    CPU time, still divided by the whole window)."""
    shares = {}
    for pid in dict.fromkeys(p for s in samples for p in s.cpu):
        seen = [s.cpu[pid] for s in samples if pid in s.cpu]
        used = seen[-1] - seen[0]
        if used > 0:
            shares[names.get(pid, f"pid {pid}")] = used / window
    return dict(sorted(shares.items(), key=lambda kv: -kv[1]))


def judge(samples: Sequence[Sample], links: Iterable[Link], names: dict[int, str], cpus: int) -> dict:
    """The verdict of the window the samples span (see the module docstring), with its figures."""
    links = list(links)
    if len(samples) < 2 or samples[-1].t <= samples[0].t:
        return {"verdict": "unknown: fewer than two samples", "bound": "unknown", "samples": len(samples)}
    window = samples[-1].t - samples[0].t
    figures = [_link_figures(samples, link, d, window) for link in links for d in (0, 1)]
    shaped = [f for f in figures if f["line_seconds"] is not None]
    busiest = max(shaped, key=lambda f: f["line_seconds"], default=None)
    cpu = _cpu_figures(samples, names, window)
    (b0, t0), (b1, t1) = samples[0].machine, samples[-1].machine
    machine = (b1 - b0) / (t1 - t0) * cpus if t1 > t0 else 0.0
    top = next(iter(cpu.items()), None)
    out = {"seconds": window, "samples": len(samples), "busiest": busiest, "links": figures,
           "cpu": {k: round(v, 4) for k, v in cpu.items()}, "machine_cores_busy": machine, "cpus": cpus}
    if (busiest is not None and busiest["while_sending"] is not None and busiest["while_sending"] >= LINE_SHARE
            and busiest["sending_share"] >= SENDING_SHARE):
        out.update(bound="network", verdict="network-bound",
                   detail=f"{busiest['link']} at {busiest['while_sending']:.0%} of {busiest['mbps']:g} Mbit/s "
                          f"while sending, sending {busiest['sending_share']:.0%} of {window:.3f} s")
    elif top is not None and top[1] >= CORE_SHARE:
        out.update(bound="cpu", verdict=f"CPU-bound: {top[0]} at {top[1]:.0%} of a core",
                   detail=f"machine {machine:.2f} of {cpus} cores busy")
    elif machine >= MACHINE_SHARE * cpus:
        out.update(bound="cpu", verdict=f"CPU-bound: the machine, {machine:.2f} of {cpus} cores busy",
                   detail="no process had a core to itself" + (f"; busiest {top[0]} at {top[1]:.0%} of a core"
                                                              if top else ""))
    else:
        if busiest is None:
            where = "links unshaped"
        elif busiest["while_sending"] is None:
            where = f"{busiest['link']} idle"
        else:
            where = (f"{busiest['link']} at line rate would take {busiest['line_seconds'] / window:.0%} of the "
                     f"window, it sent {busiest['sending_share']:.0%} of it at {busiest['while_sending']:.0%} "
                     f"of {busiest['mbps']:g} Mbit/s")
        busy = f"busiest process {top[0]} at {top[1]:.0%} of a core" if top else "no process busy"
        out.update(bound="neither", verdict=f"neither: {where}; {busy}; machine {machine:.2f} of {cpus} cores",
                   detail="the rest of the time: waiting (latency, timeouts, a straggler) or work spread "
                          "over processes none of which had a full core")
    return out


def verdict_line(label: str, fid: dict) -> str:
    """One line for stderr: the label, the verdict and its detail."""
    detail = fid.get("detail")
    return f"fidelity {label}: {fid['verdict']}" + (f" ({detail})" if detail else "")


def summary(verdicts: Sequence[dict]) -> str:
    """One verdict for several windows (a system's rounds): the common one, or each with its count."""
    counts: dict[str, int] = {}
    for v in verdicts:
        key = v["verdict"] if v.get("bound") != "neither" else "neither"
        counts[key] = counts.get(key, 0) + 1
    if len(counts) == 1:
        return next(iter(counts))
    return "; ".join(f"{k} ({n} of {len(verdicts)})" for k, n in counts.items())


# --- sampling: reading the counters ------------------------------------------------------------------------

def read_link(ifname: str) -> tuple[int, int] | None:
    stats = Path("/sys/class/net", ifname, "statistics")
    try:
        return int((stats / "rx_bytes").read_text()), int((stats / "tx_bytes").read_text())
    except (OSError, ValueError):
        return None


def read_split(pid: int) -> tuple[float, float] | None:
    """(utime, stime) of the process (all its threads), seconds."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # after "pid (comm) ": state is field 3, utime 14, stime 15
    return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK


def read_cpu(pid: int) -> float | None:
    """utime + stime of the process (all its threads), seconds."""
    split = read_split(pid)
    return None if split is None else split[0] + split[1]


def read_machine_split() -> tuple[tuple[float, float], tuple[float, float, float, float]]:
    """(busy, total) CPU seconds since boot, all cores (steal counts as busy: we could not run), and the busy
    seconds as (user, system, irq, softirq)."""
    with open("/proc/stat") as f:
        user, nice, system, idle, iowait, irq, softirq, steal = (int(x) for x in f.readline().split()[1:9])
    busy = user + nice + system + irq + softirq + steal
    return ((busy / CLK_TCK, (busy + idle + iowait) / CLK_TCK),
            ((user + nice) / CLK_TCK, system / CLK_TCK, irq / CLK_TCK, softirq / CLK_TCK))


def read_machine() -> tuple[float, float]:
    """(busy, total) CPU seconds since boot, all cores (steal counts as busy: we could not run)."""
    return read_machine_split()[0]


def children(pid: int) -> list[int]:
    try:
        return [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def descendants(root: int) -> list[int]:
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children(pid))
    return out


def netns(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return None


def command_name(pid: int) -> str:
    """A short name for a process: python's module or script (`hina worker`, `train_ddp.py`), else the
    program (iperf3)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    argv = [a.decode(errors="replace") for a in argv if a]
    if not argv:
        return "?"
    prog = os.path.basename(argv[0])
    if prog.startswith("python") and len(argv) > 1:
        if argv[1] == "-c":
            return "python -c"
        if argv[1] == "-m" and len(argv) > 2:
            sub = argv[3] if len(argv) > 3 and not argv[3].startswith("-") else ""
            return f"{argv[2]} {sub}".strip()
        return os.path.basename(argv[1])
    return prog


class Monitor:
    """Samples `links` and the runner's descendant processes every `period` seconds on a thread.

    `hosts` maps a host's name to a pid in its network namespace (its shell), to name the processes found
    there; `mark()` takes a sample at once (the edges of a window), `window(a, b)` gives the samples
    between two marks, `judge_window(a, b)` their verdict.
    """

    def __init__(self, links: Sequence[Link], hosts: dict[str, int] | None = None, root: int | None = None,
                 period: float = PERIOD):
        self.links = list(links)
        self.root = os.getpid() if root is None else root
        self.period = period
        self.names: dict[int, str] = {}
        self._seen: dict[int, int] = {}
        self._ns = {ns: name for name, pid in (hosts or {}).items() if (ns := netns(pid)) is not None}
        self._root_ns = netns(self.root)
        self._samples: list[Sample] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.cpus = os.cpu_count() or 1

    def _name(self, pid: int) -> str:
        ns = netns(pid)
        where = self._ns.get(ns, "root" if ns == self._root_ns else "?")
        return "runner" if pid == self.root else f"{command_name(pid)} on {where} (pid {pid})"

    def _rename(self) -> None:
        """Name the processes still alive again: a fresh child carries its parent's command line until it
        execs (a host's popen forks the runner, then execs mnexec and python)."""
        for pid in list(self.names):
            name = self._name(pid)
            if "?" not in name:
                self.names[pid] = name

    def sample(self) -> Sample:
        links = {link.ifname: c for link in self.links if (c := read_link(link.ifname)) is not None}
        cpu, split = {}, {}
        for pid in descendants(self.root):
            parts = read_split(pid)
            if parts is not None:
                cpu[pid] = parts[0] + parts[1]
                split[pid] = parts
                # a fresh child carries its parent's command line, then mnexec's, until it has entered its
                # host's namespace and exec'd: name it again on its first few samples
                seen = self._seen.get(pid, 0)
                if seen < NAMING_SAMPLES:
                    self._seen[pid] = seen + 1
                    name = self._name(pid)
                    if pid not in self.names or "?" not in name:  # an exited process keeps its last name
                        self.names[pid] = name
        machine, kernel = read_machine_split()
        return Sample(time.monotonic(), links, cpu, machine, split, kernel)

    def mark(self) -> Sample:
        """Take a sample now (the runner's thread), kept in order with the sampler's."""
        s = self.sample()
        with self._lock:
            self._samples.append(s)
        return s

    def _loop(self) -> None:
        while not self._stop.wait(self.period):
            self.mark()

    def start(self) -> Monitor:
        self.mark()
        self._thread = threading.Thread(target=self._loop, name="fidelity-monitor", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> Monitor:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def window(self, start: float, end: float) -> list[Sample]:
        """The samples from the last one at or before `start` to the first one at or after `end`."""
        with self._lock:
            samples = sorted(self._samples, key=lambda s: s.t)
        first = max((i for i, s in enumerate(samples) if s.t <= start), default=0)
        last = min((i for i, s in enumerate(samples) if s.t >= end), default=len(samples) - 1)
        return samples[first:last + 1]

    def judge_window(self, start: float, end: float) -> dict:
        self._rename()
        return judge(self.window(start, end), self.links, self.names, self.cpus)

    def cpu_window(self, start: float, end: float) -> dict:
        """Where the window's CPU time went (`cpu_split`)."""
        self._rename()
        return cpu_split(self.window(start, end), self.names)


def role(name: str) -> str:
    """What a monitored process is, by its name: worker, switch (the emulator and its pipes, BMv2), harness
    (the runner and what else it started: the monitor is a thread of it) or traffic (iperf3)."""
    if name.startswith("hina worker") or "time_to_accuracy" in name or "train_ddp" in name:
        return "worker"
    if name.startswith(("hina.emulator", "simple_switch")):
        return "switch"
    if name.startswith("iperf3"):
        return "traffic"
    return "harness"


def cpu_split(samples: Sequence[Sample], names: dict[int, str]) -> dict:
    """CPU seconds over a window, by role (`role`) as user and system time of its processes, and the machine's:
    user, system, irq and softirq (the kernel's packet work: veth, the bridge, shaping, mostly runs there,
    charged to no process), with the window's wall seconds."""
    if len(samples) < 2:
        return {}
    first, last = samples[0], samples[-1]
    roles: dict[str, dict[str, float]] = {}
    for pid, (user, system) in last.split.items():
        u0, s0 = first.split.get(pid, (0.0, 0.0))
        r = roles.setdefault(role(names.get(pid, "?")), {"user": 0.0, "system": 0.0})
        r["user"] += user - u0
        r["system"] += system - s0
    machine = {k: b - a for k, a, b in zip(("user", "system", "irq", "softirq"), first.kernel, last.kernel)}
    return {"seconds": last.t - first.t, "roles": roles, "machine": machine}


def links_of(net, label=lambda name: name) -> list[Link]:
    """Every link of a Mininet network, read at its end in the root namespace (a switch's interface);
    its rate from the link's `bw` option; its ends named by `label` (a run's names without its run id)."""
    out = []
    for link in net.links:
        i1, i2 = link.intf1, link.intf2
        end, other = (i2, i1) if not i2.node.inNamespace else (i1, i2)
        if end.node.inNamespace:
            continue  # host to host: no end where the runner can read it
        bw = end.params.get("bw") or other.params.get("bw")
        out.append(Link(label(other.node.name), label(end.node.name), end.name, float(bw) if bw else None))
    return out


def monitor_for(net, period: float = PERIOD, label=lambda name: name) -> Monitor:
    """A monitor of every link of `net` and of the runner's processes, named by their hosts (by `label`)."""
    return Monitor(links_of(net, label), {label(h.name): h.pid for h in net.hosts}, period=period)


if __name__ == "__main__":
    import sys

    from hina.cliargs import library_only

    sys.exit(library_only(__doc__, "mininet/run.py"))
