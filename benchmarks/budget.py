"""The budget of a byte: where a Mininet star's CPU goes per megabyte aggregated, beside the kernel alone.

On a small machine an emulated network is only worth the rates at which its links, not its CPUs, set
the time (docs/fidelity.md).  This benchmark says where the CPU goes, rate by rate: an N-worker star
through each switch of --switches (`mininet/run.py`'s experiment: the emulator, the XDP switch), dense
and auto, and for every round

- the workers' own account (`Worker.profile`, summed over them): the codec, the compiled rules (the
  window, frames written into the send ring), the system calls that send and that receive, and the
  rest of their CPU time (Python between those, the collector);
- the switch's (its control port's `profile`): the emulator's receiving, compiled rules with the
  replicas they write, sending and the rest; the XDP switch's rules (its ingress program's run time,
  once per frame received) and sending (its egress program's, once per copy sent), both from the
  kernel's `bpf_stats_enabled`, since the programs run in the receiving CPU's softirq and no process
  shows them, and the rest (its control process);
- the kernel's packet work that no process is charged for (softirq and irq: veth, shaping; the XDP
  programs' run time taken out, counted as the switch's above), other kernel time, and the harness
  (the runner, its monitor);
- frames, retransmissions and timeouts, and the seconds against line rate;

then the same star with a Linux bridge where the emulator was and iperf3 between the hosts (host i to
host i+1, UDP datagrams of the jumbo MTU at the link's rate, one per system call, and TCP with its
segmentation offload): the CPU the kernel alone spends to move a megabyte through the same links, and
the share of the links it fills.  CPU seconds are per megabyte the workers sent (headers and resends
included), so rates and modes compare.

    sudo .venv/bin/python benchmarks/budget.py [--workers 8] [--bws 200 400 800] [--modes dense auto]
        [--switches emulator xdp] [--out benchmarks/results/budget.json]

Writes the JSON and a stacked bar chart beside it (same stem, .png); docs/budget.md shows both.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

# the workers' parts, the switch's, the kernel's and the harness's, in the order the bars stack them
PARTS = ("worker codec", "worker rules", "worker send", "worker receive", "worker rest", "switch receive",
         "switch rules", "switch send", "switch rest", "kernel softirq", "kernel other", "harness")
MB = 1e6


def switch_parts(switch: dict[str, float]) -> tuple[dict[str, float], float]:
    """The switch's CPU seconds by part from its profile over a round, and how many of them ran in the kernel's
    softirq (the XDP programs'), which the machine's softirq time holds too.  The emulator: receive, rules,
    send and the rest of its processes' CPU time.  The XDP switch: no receive (frames reach no process), its
    ingress program's run time as rules, its egress program's as send, its control process as the rest."""
    in_kernel = switch.get("xdp_ingress_s", 0.0) + switch.get("xdp_egress_s", 0.0)
    process = switch.get("cpu_user", 0.0) + switch.get("cpu_system", 0.0)
    if "xdp_ingress_s" in switch:
        return {"switch receive": 0.0, "switch rules": switch["xdp_ingress_s"],
                "switch send": switch.get("xdp_egress_s", 0.0), "switch rest": process}, in_kernel
    parts = {"switch receive": switch.get("recv", 0.0), "switch rules": switch.get("rules", 0.0),
             "switch send": switch.get("send", 0.0)}
    parts["switch rest"] = max(process - sum(parts.values()), 0.0)
    return parts, 0.0


def budget(rnd: dict[str, Any]) -> dict[str, Any]:
    """One round's CPU seconds by part (`PARTS`), from the workers' profiles, the switch's (`switch_parts`) and
    the monitor's split of the machine, with the megabytes the workers sent."""
    prof, switch, cpu = rnd.get("profile", {}), rnd.get("switch_profile") or {}, rnd.get("cpu") or {}
    wire = rnd["wire_bytes_per_worker"] * len(rnd["workers"]) / MB
    worker_cpu = prof.get("cpu_user", 0.0) + prof.get("cpu_system", 0.0)
    worker_parts = {"worker codec": prof.get("codec", 0.0), "worker rules": prof.get("rules", 0.0),
                    "worker send": prof.get("send", 0.0), "worker receive": prof.get("recv", 0.0)}
    worker_parts["worker rest"] = max(worker_cpu - sum(worker_parts.values()), 0.0)
    switching, in_softirq = switch_parts(switch)
    roles, machine = cpu.get("roles", {}), cpu.get("machine", {})
    processes_system = sum(r["system"] for r in roles.values())
    parts = {**worker_parts, **switching,
             "kernel softirq": max(machine.get("softirq", 0.0) + machine.get("irq", 0.0) - in_softirq, 0.0),
             "kernel other": max(machine.get("system", 0.0) - processes_system, 0.0),
             "harness": sum(roles.get("harness", {}).values())}
    return {"seconds": rnd["seconds"], "line_rate_seconds": rnd["line_rate_seconds"], "wire_mb": wire,
            "frames": rnd["frames"], "retransmissions": rnd["retransmissions"], "timeouts": rnd["timeouts"],
            "verdict": (rnd.get("fidelity") or {}).get("verdict"), "cpu_seconds": parts,
            "ms_per_mb": {k: 1000 * v / wire for k, v in parts.items()},
            "machine_busy": sum(machine.values()), "window": cpu.get("seconds")}


# The data path compared: frame by frame as the wire carries them, every window sent at once; with the workers'
# segmentation offload and the workers pacing new chunks at their link's rate (through the emulator the hosts keep
# transmit offload on, so the links carry super-frames, which the emulator cuts, gathering each member's RESULTs
# into its own; through the XDP switch the hosts' stacks cut them, since its program takes frames as the wire
# carries them); and frame by frame with pacing
VARIANTS = {"frame by frame, unpaced": {"offload": False, "pace": False},
            "offload and pacing": {"offload": True, "pace": True},
            "frame by frame, paced": {"offload": False, "pace": True}}
SHORT = {"frame by frame, unpaced": "frames", "offload and pacing": "offload, paced",
         "frame by frame, paced": "frames, paced"}  # the plot's labels
SWITCHES = ("emulator", "xdp")  # the switches a budget runs (BMv2 spends a core per frame: benchmarks/switch_bench.py)
DEFAULT_VARIANTS = {"emulator": ("frame by frame, unpaced", "offload and pacing"),
                    "xdp": ("frame by frame, paced", "offload and pacing")}


def hina_runs(workers: int, bw: float, modes: list[str], length: int, density: float, rounds: int, variant: str,
              log, switch: str = "emulator") -> list[dict[str, Any]]:
    from hina.mininet.hina_net import Experiment, ExperimentConfig

    cfg = ExperimentConfig(workers=workers, switch=switch, modes=tuple(modes), bw=bw, length=length,
                           density=density, rounds=rounds, ping=False, **VARIANTS[variant])
    result = Experiment(cfg, log=log).run()
    out = []
    for run in result["runs"]:
        first = run["rounds"][0]  # a one-shot aggregation: what a job's first step pays
        steady = run["rounds"][1:] or run["rounds"]
        best = min(steady, key=lambda r: r["seconds"])
        out.append({"mode": run["mode"], "mbps": bw, "switch": switch, "mtu": cfg.mtu, "variant": variant,
                    "exact": run["exact"], "encoding": best["encoding"], **budget(best), "first_round": budget(first),
                    "rounds": [budget(r) for r in run["rounds"]],
                    "switch_counters": {k: result["counters"].get(k) for k in ("frames", "drops", "profile")}})
    return out


def kernel_ceiling(workers: int, bw: float, seconds: float, log) -> dict[str, Any]:
    """iperf3 on the same star with a Linux bridge for the switch: host i to host i+1 (every link busy both
    ways, as an aggregation keeps it), UDP at the link's rate in jumbo datagrams, then TCP; the share of the
    links each filled and the CPU the machine spent per megabyte."""
    from mininet.log import setLogLevel
    from mininet.net import Mininet
    from mininet.nodelib import LinuxBridge

    from hina.mininet import fidelity
    from hina.mininet.hina_net import FastTCLink, new_run_id
    from hina.mininet.plain_star import Names, PlainStarTopo, cleanup, host_ip

    names = Names(new_run_id())
    cleanup(names.run)
    setLogLevel("critical")
    link = {"cls": FastTCLink, "bw": bw}
    net = Mininet(topo=PlainStarTopo(workers=workers, link=link, names=names), switch=LinuxBridge,
                  controller=None, link=FastTCLink, build=True)
    out: dict[str, Any] = {"mbps": bw}
    try:
        net.start()
        hosts = [net[names.host(i)] for i in range(1, workers + 1)]
        for h in hosts:
            intf = h.defaultIntf()
            peer = intf.link.intf2 if intf.link.intf1 is intf else intf.link.intf1
            h.cmd(f"ip link set dev {intf.name} mtu 9000")
            peer.node.cmd(f"ip link set dev {peer.name} mtu 9000")
        monitor = fidelity.monitor_for(net, label=names.label).start()
        try:
            for proto, flags in (("udp", f"-u -b {bw:g}M -l 8900"), ("tcp", "")):
                servers = [h.popen(["iperf3", "-s", "-1", "-J"], stdout=open(os.devnull, "w")) for h in hosts]
                time.sleep(0.5)
                start = monitor.mark().t
                clients = [h.popen(f"iperf3 -c {host_ip((i + 1) % workers + 1)} -t {seconds:g} -J {flags}".split())
                           for i, h in enumerate(hosts)]
                reports = [json.loads(c.communicate()[0] or "{}") for c in clients]
                cpu = monitor.cpu_window(start, monitor.mark().t)
                for s in servers:
                    s.wait(10)
                got = [r.get("end", {}).get("sum_received", r.get("end", {}).get("sum", {})).get("bits_per_second",
                                                                                                   0.0)
                       for r in reports]
                moved = sum(got) / 8 * seconds / MB  # megabytes the hosts received
                machine = sum(cpu.get("machine", {}).values())
                out[proto] = {"share_of_line": statistics.fmean(got) / (bw * 1e6), "delivered_mbps": got,
                              "mb": moved, "machine_busy": machine, "window": cpu.get("seconds"),
                              "ms_per_mb": 1000 * machine / moved if moved else None, "cpu": cpu}
                log(f"kernel ceiling at {bw:g} Mbit/s, {proto}: {out[proto]['share_of_line']:.0%} of the links, "
                    f"{out[proto]['ms_per_mb'] or float('nan'):.2f} ms of CPU per MB")
        finally:
            monitor.stop()
    finally:
        net.stop()
        cleanup(names.run)
    return out


# the parts grouped for the table's columns
GROUPS = {"workers": PARTS[:5], "switch": PARTS[5:9], "kernel": PARTS[9:11], "harness": PARTS[11:]}


def switch_of(row: dict[str, Any]) -> str:
    """The switch a row ran through (rows measured before there was a choice ran through the emulator)."""
    return row.get("switch", "emulator")


def markdown(result: dict[str, Any]) -> list[str]:
    """The table of docs/budget.md: per rate, mode and data path, the seconds against line rate, what set
    them, frames, resends and timeouts, and the CPU milliseconds per MB by part; then the kernel alone."""
    cfg = result["config"]
    lines = [f"{cfg['workers']} workers on an emulated star, {cfg['length']:,} elements at {cfg['density']:.0%} "
             f"per worker, the best of rounds 2-{cfg['rounds']} (the first round, a one-shot aggregation, in "
             "brackets); CPU milliseconds per MB the workers sent, by part (the XDP switch's rules and send: its "
             "programs' run time in the kernel).", "",
             "| link | mode | switch | data path | seconds / line rate | what set the time | frames | "
             "resent (timeouts) | CPU ms per MB: workers (codec, rules, send, receive, rest) | "
             "switch (receive, rules, send, rest) | kernel (softirq, other) | harness | total |", "|---" * 13 + "|"]
    order = list(VARIANTS)
    for r in sorted(result["hina"], key=lambda r: (r["mbps"], ["dense", "auto"].index(r["mode"]),
                                                   SWITCHES.index(switch_of(r)), order.index(r["variant"]))):
        ms = r["ms_per_mb"]
        cell = {g: f"{sum(ms[p] for p in parts):.2f} (" + ", ".join(f"{ms[p]:.2f}" for p in parts) + ")"
                for g, parts in GROUPS.items() if len(parts) > 1}
        first = r["first_round"]
        verdict = (r["verdict"] or "not monitored").split(" (")[0].split(":")[0]
        lines.append(f"| {r['mbps']:g} Mbit/s | {r['mode']} | {switch_of(r)} | {r['variant']} | "
                     f"{r['seconds']:.3f} s / {r['line_rate_seconds']:.3f} s = "
                     f"{r['seconds'] / r['line_rate_seconds']:.2f}x "
                     f"({first['seconds'] / first['line_rate_seconds']:.2f}x) | {verdict} | {r['frames']:,} | "
                     f"{r['retransmissions']} ({r['timeouts']}) [{first['retransmissions']} ({first['timeouts']})] | "
                     f"{cell['workers']} | {cell['switch']} | {cell['kernel']} | {ms['harness']:.2f} | "
                     f"{sum(ms.values()):.2f} |")
    if result["ceiling"]:
        lines += ["", "The kernel alone on the same links (iperf3 from host i to host i+1 through a Linux bridge, "
                  "every link busy both ways): the share of the links it filled and the machine's CPU per MB "
                  "delivered.", "", "| link | UDP, one 8,900-byte datagram a call | TCP, segmentation offload |",
                  "|---|---|---|"]
        for c in result["ceiling"]:
            lines.append(f"| {c['mbps']:g} Mbit/s | "
                         + " | ".join(f"{c[p]['share_of_line']:.0%} of the links, {c[p]['ms_per_mb']:.2f} ms per MB"
                                      if c[p]["ms_per_mb"] else "-" for p in ("udp", "tcp")) + " |")
    return lines


def plot(result: dict[str, Any], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    rows = result["hina"]
    modes = sorted({r["mode"] for r in rows}, key=["dense", "auto"].index)
    paths = sorted({(switch_of(r), r["variant"]) for r in rows},
                   key=lambda p: (SWITCHES.index(p[0]), list(VARIANTS).index(p[1])))
    fig, axes = plt.subplots(1, len(modes), figsize=(max(7.5, 1.2 * len(rows) / len(modes)) * len(modes), 5.2),
                             squeeze=False)
    colors = plt.get_cmap("tab20").colors
    for ax, mode in zip(axes[0], modes):
        mine = [r for r in rows if r["mode"] == mode]
        mine.sort(key=lambda r: (r["mbps"], paths.index((switch_of(r), r["variant"]))))
        labels = [f"{r['mbps']:g} Mbit/s\n{switch_of(r)}\n{SHORT[r['variant']]}" if len(paths) > 1
                  else f"{r['mbps']:g} Mbit/s" for r in mine]
        x = list(range(len(mine)))
        bottom = [0.0] * len(mine)
        for k, part in enumerate(PARTS):
            values = [r["ms_per_mb"][part] for r in mine]
            ax.bar(x, values, bottom=bottom, color=colors[k % len(colors)], label=part)
            bottom = [b + v for b, v in zip(bottom, values)]
        ax.set_xticks(x, labels, fontsize=8)
        drawn = False
        for i, r in enumerate(mine):
            ceiling = next((c for c in result["ceiling"] if c["mbps"] == r["mbps"]), None)
            if ceiling and ceiling["udp"]["ms_per_mb"]:
                ax.plot([i - 0.4, i + 0.4], [ceiling["udp"]["ms_per_mb"]] * 2, color="black", linewidth=2,
                        label=None if drawn else "kernel alone (iperf3 UDP)")
                drawn = True
            ax.text(i, bottom[i], f"{r['seconds'] / r['line_rate_seconds']:.2f}x\nline rate\n{r['timeouts']} t/o",
                    ha="center", va="bottom", fontsize=7)
        ax.set(title=f"{mode}: CPU milliseconds per MB the workers sent", ylabel="ms of CPU per MB")
        ax.set_ylim(0, max(bottom) * 1.3 if bottom else 1)
    axes[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.suptitle(f"{result['config']['workers']} workers on an emulated star, {result['config']['length']:,} elements "
                 f"at {result['config']['density']:.0%}: where the CPU goes")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


# -- the same star on loopback: the workers' and the emulator's own CPU, no Mininet --------------------------
# the parts a loopback run splits: the workers' (their wait in select apart from the rest) and the emulator's;
# the kernel's packet work runs in the processes' own system calls here (loopback has no device queue of its own)
LOOPBACK_PARTS = ("worker codec", "worker rules", "worker send", "worker receive", "worker wait", "worker rest",
                  "switch receive", "switch rules", "switch send", "switch rest")


def _loopback_worker(cfg, rank: int, data: tuple[str, int], conn, pace: float) -> None:
    """One worker process of `loopback_runs`: its kernels, its socket, then each round on "go", its report."""
    from hina.host.agent import Worker, load_kernels
    from hina.host.congestion_settings import CongestionSettings
    from hina.host.demo import timed_aggregate
    from hina.host.transport import UdpTransport

    try:
        load_kernels()
        grad = cfg.gradient(rank)
        with UdpTransport(data, segment_offload=True) as transport:
            conn.send(transport.address)
            if conn.recv() != "prepare":
                return
            worker = Worker(transport, cfg.job, rank, deadline=cfg.deadline,
                            congestion=CongestionSettings(pace_mbps=pace))
            worker.prepare(cfg.params, grad)
            conn.send("prepared")
            out = np.zeros(grad.size, np.int32)
            io = worker.batch_io

            def counts():  # an older checkout's sockets may lack a count: 0
                return [getattr(io, name, 0) for name in ("receives", "received", "sends", "sent")]
            while conn.recv() == "go":
                before = counts()
                report = timed_aggregate(worker, cfg.params, grad, out=out)
                report["io"] = [a - b for a, b in zip(counts(), before)]
                conn.send(report)
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which fails the run naming it
        conn.send(f"{type(exc).__name__}: {exc}")


def loopback_budget(reports: list[dict[str, Any]], switch: dict[str, float]) -> dict[str, Any]:
    """One round on loopback: CPU seconds by part (`LOOPBACK_PARTS`) from the workers' reports
    (`timed_aggregate`'s, with their sockets' counts) and the emulator's profile over the round; the
    megabytes the workers sent; the system calls that moved them."""
    wire = sum(r["wire_bytes"] for r in reports) / MB
    prof = {k: sum(r["profile"].get(k, 0.0) for r in reports) for k in ("codec", "rules", "send", "recv", "wait",
                                                                        "cpu_user", "cpu_system")}
    worker_cpu = prof["cpu_user"] + prof["cpu_system"]
    parts = {"worker codec": prof["codec"], "worker rules": prof["rules"], "worker send": prof["send"],
             "worker receive": prof["recv"], "worker wait": prof["wait"]}
    parts["worker rest"] = max(worker_cpu - sum(parts.values()), 0.0)
    switch_cpu = switch.get("cpu_user", 0.0) + switch.get("cpu_system", 0.0)
    mine = {"switch receive": switch.get("recv", 0.0), "switch rules": switch.get("rules", 0.0),
            "switch send": switch.get("send", 0.0)}
    parts.update(mine, **{"switch rest": max(switch_cpu - sum(mine.values()), 0.0)})
    reads, datagrams, sends, messages = (sum(r["io"][k] for r in reports) for k in range(4))
    return {"seconds": max(r["seconds"] for r in reports), "wire_mb": wire,
            "frames": sum(r["frames"] for r in reports), "retransmissions": sum(r["retransmissions"] for r in reports),
            "timeouts": sum(r["timeouts"] for r in reports), "exact": len({r["digest"] for r in reports}) == 1,
            "cpu_seconds": parts, "ms_per_mb": {k: 1000 * v / wire for k, v in parts.items()},
            "worker_system_ms_per_mb": 1000 * prof["cpu_system"] / wire,
            "syscalls": {"worker recvmmsg": reads, "worker datagrams": datagrams, "worker sendmmsg": sends,
                         "worker messages": messages, "worker frames": sum(r["frames"] for r in reports),
                         "switch recvmmsg": switch.get("receives", 0), "switch datagrams": switch.get("received", 0),
                         "switch sendmmsg": switch.get("sends", 0), "switch messages": switch.get("sent", 0)}}


def loopback_runs(workers: int, bw: float, modes: list[str], length: int, density: float, rounds: int,
                  log) -> list[dict[str, Any]]:
    """The star on loopback, mode by mode: `python -m hina.emulator` and `workers` worker processes, each
    pacing new chunks at `bw` Mbit/s (as a worker behind a link of that rate does), every round started
    together; each round's budget (`loopback_budget`), the emulator's profile read through its control
    port before and after.  The worker processes are forked from this one, so that this file, run with an
    older checkout's package, measures that checkout the same way."""
    import multiprocessing as mp

    from hina.control.client import ControlClient
    from hina.control.config import Member
    from hina.host.demo import DemoConfig, start_switch, stop

    out = []
    for mode in modes:
        cfg = DemoConfig(workers=workers, length=length, density=density, mode=mode, rounds=rounds)
        switch, where = start_switch(cfg, warn=log)
        ctx = mp.get_context("fork")  # nothing runs in this process but the parent's loop: no thread to lose
        conns, procs = [], []
        try:
            for rank in range(workers):
                mine, theirs = ctx.Pipe()
                proc = ctx.Process(target=_loopback_worker, args=(cfg, rank, tuple(where["data"]), theirs, bw),
                                   daemon=True)
                proc.start()
                conns.append(mine)
                procs.append(proc)
            members = [Member(rank, tuple(_expect(conn, rank))) for rank, conn in enumerate(conns)]
            with ControlClient(tuple(where["control"])) as ctl:
                ctl.add_job(cfg.job.switch_config(workers, members))
                for conn in conns:
                    conn.send("prepare")
                for rank, conn in enumerate(conns):
                    _expect(conn, rank)
                rows = []
                for _ in range(rounds):
                    before = ctl.counters().get("profile", {})
                    for conn in conns:
                        conn.send("go")
                    reports = [_expect(conn, rank) for rank, conn in enumerate(conns)]
                    after = ctl.counters().get("profile", {})
                    rows.append(loopback_budget(reports, {k: v - before.get(k, 0) for k, v in after.items()}))
                for conn in conns:
                    conn.send("stop")
                ctl.shutdown()
        finally:
            stop(procs, switch)
        steady = rows[1:] or rows
        best = min(steady, key=lambda r: sum(r["ms_per_mb"].values()))
        log(f"loopback at {bw:g} Mbit/s, {mode}: {sum(best['ms_per_mb'].values()):.2f} ms of CPU per MB")
        out.append({"mode": mode, "mbps": bw, "exact": all(r["exact"] for r in rows), **best, "rounds": rows})
    return out


def _expect(conn, rank: int, timeout: float = 600.0):
    """A loopback worker's next message; its error, or its silence, fails the run."""
    if not conn.poll(timeout):
        raise RuntimeError(f"worker {rank} said nothing for {timeout:g} s")
    message = conn.recv()
    if isinstance(message, str) and message != "prepared":
        raise RuntimeError(f"worker {rank}: {message}")
    return message


def loopback_markdown(result: dict[str, Any]) -> list[str]:
    """The loopback budget's table: per rate and mode, the CPU milliseconds per MB by part, and the system calls
    that moved the frames (datagrams a read, messages a send)."""
    cfg = result["config"]
    lines = [f"{cfg['workers']} workers and the emulator on loopback, {cfg['length']:,} elements at "
             f"{cfg['density']:.0%} per worker, each worker pacing at the link rate; the round of rounds "
             f"2-{cfg['rounds']} with the least CPU; CPU milliseconds per MB the workers sent, by part.", "",
             "| link | mode | seconds | workers (codec, rules, send, receive, wait, rest) | of it, system | "
             "switch (receive, rules, send, rest) | total | worker: datagrams a read, frames a send | "
             "switch: datagrams a read, messages a send |", "|---" * 9 + "|"]
    for r in sorted(result["loopback"], key=lambda r: (r["mbps"], ["dense", "auto"].index(r["mode"]))):
        ms, n = r["ms_per_mb"], r["syscalls"]
        cell = {who: f"{sum(ms[p] for p in LOOPBACK_PARTS if p.startswith(who)):.2f} ("
                + ", ".join(f"{ms[p]:.2f}" for p in LOOPBACK_PARTS if p.startswith(who)) + ")"
                for who in ("worker", "switch")}

        def per(a: str, b: str) -> str:
            return f"{n[a] / n[b]:.1f}" if n[b] else "-"
        lines.append(f"| {r['mbps']:g} Mbit/s | {r['mode']} | {r['seconds']:.3f} | {cell['worker']} | "
                     f"{r['worker_system_ms_per_mb']:.2f} | {cell['switch']} | {sum(ms.values()):.2f} | "
                     f"{per('worker datagrams', 'worker recvmmsg')}, {per('worker frames', 'worker sendmmsg')} | "
                     f"{per('switch datagrams', 'switch recvmmsg')}, {per('switch messages', 'switch sendmmsg')} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    from hina.cliargs import OneLineParser, between, fraction, positive
    from hina.provenance import command_line, default_out, out_help, out_path, write_result

    ap = OneLineParser(prog="budget.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=between(2, 32), default=8, help="workers, one per Mininet host (default 8)")
    ap.add_argument("--bws", type=positive, nargs="+", default=[200.0, 400.0, 800.0],
                    help="link rates, Mbit/s (default 200 400 800)")
    ap.add_argument("--modes", nargs="+", choices=("dense", "auto"), default=["dense", "auto"])
    ap.add_argument("--length", type=between(1), default=1 << 22, help="elements per gradient (default 2^22)")
    ap.add_argument("--density", type=fraction, default=0.01, help="non-zero fraction (default 0.01)")
    ap.add_argument("--rounds", type=between(2), default=3, help="rounds per run; the best after the first counts")
    ap.add_argument("--switches", nargs="+", choices=SWITCHES, default=["emulator"],
                    help="the star's switch, a run each: the emulator, the XDP switch (default: emulator)")
    ap.add_argument("--variants", nargs="+", choices=tuple(VARIANTS), default=None,
                    help="the data paths compared (default: the emulator's frame by frame unpaced and offload and "
                         "pacing; the XDP switch's frame by frame paced and offload and pacing)")
    ap.add_argument("--ceiling-seconds", type=positive, default=3.0, help="seconds of iperf3 per protocol and rate")
    ap.add_argument("--no-ceiling", action="store_true", help="leave out the iperf3 measurement")
    ap.add_argument("--loopback", action="store_true",
                    help="the star on loopback instead of Mininet (no root): the workers' and the emulator's CPU "
                         "per MB by part, and the system calls that moved the frames")
    ap.add_argument("--out", type=out_path, default=None,
                    help=out_help("budget.json (budget_loopback.json with --loopback)"))
    args = ap.parse_args(argv)
    if args.out is None:
        args.out = default_out("budget_loopback.json" if args.loopback else "budget.json")
    if args.loopback:
        return loopback_main(args, argv)
    paths = [(switch, v) for switch in dict.fromkeys(args.switches) for v in args.variants or DEFAULT_VARIANTS[switch]]
    if os.geteuid() != 0:
        print("budget.py: Mininet needs root (sudo)", file=sys.stderr)
        return 2
    from hina.mininet.hina_net import missing_requirements
    from hina.progress import Progress

    problem = next(filter(None, (missing_requirements(switch) for switch in dict.fromkeys(args.switches))), None)
    if problem:
        print(f"budget.py: {problem}", file=sys.stderr)
        return 2
    os.environ["HINA_PROFILE"] = "1"  # the workers and the emulator keep their profiles (they inherit it)
    steps = len(args.bws) * (1 if args.no_ceiling else 2)
    rows, ceilings = [], []
    with Progress(steps, "budget") as bar:
        for bw in args.bws:
            for switch, variant in paths:
                bar.start(f"hina at {bw:g} Mbit/s through the {switch}, {variant}")
                rows += hina_runs(args.workers, bw, args.modes, args.length, args.density, args.rounds, variant,
                                  bar.print, switch)
                bar.done(f"{bw:g} Mbit/s, {switch}, {variant}: " + ", ".join(
                    f"{r['mode']} {r['seconds']:.3f} s ({r['seconds'] / r['line_rate_seconds']:.2f}x line rate), "
                    f"{sum(r['ms_per_mb'].values()):.2f} ms/MB" for r in rows
                    if r["mbps"] == bw and r["variant"] == variant and r["switch"] == switch), n=1 / len(paths))
            if not args.no_ceiling:
                bar.start(f"the kernel alone at {bw:g} Mbit/s")
                ceilings.append(kernel_ceiling(args.workers, bw, args.ceiling_seconds, bar.print))
                bar.done()
    variants = list(dict.fromkeys(v for _, v in paths))
    result = {"config": {"workers": args.workers, "bws": args.bws, "modes": args.modes, "length": args.length,
                         "density": args.density, "rounds": args.rounds, "switches": list(dict.fromkeys(args.switches)),
                         "variants": variants, "paths": [list(p) for p in paths]},
              "variants": {v: VARIANTS[v] for v in variants}, "parts": PARTS, "hina": rows,
              "ceiling": ceilings}
    write_result(args.out, result, command_line("benchmarks/budget.py", argv))
    png = args.out.with_suffix(".png")
    print("\n".join(markdown(result)))
    print(f"wrote {args.out}" + (f" and {png}" if plot(result, png) else " (no PNG: matplotlib is missing)"))
    return 0 if all(r["exact"] for r in rows) else 1


def loopback_main(args, argv: list[str] | None) -> int:
    """`--loopback`: every rate and mode on loopback; the JSON and the table."""
    from hina import kernels
    from hina.progress import Progress
    from hina.provenance import command_line, write_result

    os.environ["HINA_PROFILE"] = "1"  # the workers and the emulator keep their profiles (they inherit it)
    kernels.compile_all()  # before any process that a round's limits would count
    rows = []
    with Progress(len(args.bws), "budget on loopback") as bar:
        for bw in args.bws:
            bar.start(f"loopback at {bw:g} Mbit/s")
            rows += loopback_runs(args.workers, bw, args.modes, args.length, args.density, args.rounds, bar.print)
            bar.done()
    result = {"config": {"workers": args.workers, "bws": args.bws, "modes": args.modes, "length": args.length,
                         "density": args.density, "rounds": args.rounds}, "parts": LOOPBACK_PARTS,
              "loopback": rows}
    write_result(args.out, result, command_line("benchmarks/budget.py", argv))
    print("\n".join(loopback_markdown(result)))
    print(f"wrote {args.out}")
    return 0 if all(r["exact"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
