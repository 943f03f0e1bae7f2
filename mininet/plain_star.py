"""The host-based baselines on Mininet: one gloo rank per host, through an ordinary switch (a Linux bridge).

The baselines need no programmable switch, so their star has Mininet's
`LinuxBridge` (no controller, no spanning tree) where hina's has the
emulator: forwarding their TCP through the Python emulator would measure
the emulator.  The links are hina's (`FastTCLink` at the same rate, the
same MTU), hosts and bridge have their own names (`bh1`..., `bsw`), and
host 1 is the rendezvous.  Each host runs `python -m hina.baselines.worker`;
every rank reads its interface's transmitted bytes (headers included)
around each round.

    import plain_star
    runs = plain_star.run(plain_star.StarConfig(workers=4, bw=1000, workload="lstm", scale=0.01,
                                                baselines=("ring", "zen"), rounds=3))

With `fabric` (a `hina.control.Fabric`'s config, as mininet/topo.py
builds hina's trees) the same wires carry the baselines: one plain bridge per
leaf and spine (bsw<name>), host links at --bw, uplinks at the rate the
oversubscription leaves them, ranks in the fabric's host order (a ring runs
rack by rack); each baseline then runs on a network of its own, and its run
reports the bytes that crossed each uplink, both ways, per round.  Trees only
(one spine, or a core over aggregation switches): plain bridges under two
spines would loop (STP would leave one).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import subprocess
from pathlib import Path

from mininet.log import setLogLevel
from mininet.net import Mininet
from mininet.nodelib import LinuxBridge

from hina.baselines import launch
from hina.mininet import fidelity, heterogeneity
from hina.mininet.hina_net import (  # (raises ImportError without Mininet)
    FastTCLink,
    check_run_id,
    missing_requirements,
    new_run_id,
)
from mininet.topo import Topo

BRIDGE, HOST = "bsw", "bh"  # after the run's id: k3fbsw, k3fbh1 (each run removes only its own)
PORT = 29500


@dataclasses.dataclass(frozen=True)
class Names:
    """One run's names: its bridges and hosts begin with its run id (hina_net's run ids)."""

    run: str

    @property
    def bridge(self) -> str:
        return f"{self.run}{BRIDGE}"  # the star's bridge; a fabric's are bridge + the switch's name

    def host(self, i: int) -> str:
        return f"{self.run}{HOST}{i}"

    def label(self, name: str) -> str:
        return name[len(self.run):] if name.startswith(self.run) else name


def host_ip(i: int) -> str:
    return f"10.0.1.{i}"


class PlainStarTopo(Topo):
    """N hosts, each on its own shaped link to one plain bridge."""

    def build(self, workers: int = 3, link: dict | None = None, per_rank: dict[int, dict] | None = None,
              names: Names = Names("")) -> None:
        sw = self.addSwitch(names.bridge, dpid="2")
        for i in range(1, workers + 1):
            h = self.addHost(names.host(i), ip=f"{host_ip(i)}/24")
            self.addLink(h, sw, **{**(link or {}), **(per_rank or {}).get(i - 1, {})})


@dataclasses.dataclass
class StarConfig:
    workers: int = 3
    bw: float | None = 1000.0  # Mbit/s per link; None: unshaped
    mtu: int = 9000  # hina's Mininet links use 9000
    baselines: tuple[str, ...] = ("ring",)
    rounds: int = 3
    seed: int = 0  # every round the same gradients, as hina's Mininet rounds
    workload: str | None = None
    scale: float = 1.0
    length: int = 1 << 20
    density: float = 0.01
    topk_density: float = 0.01
    deadline: float = 300.0
    # heterogeneity, as hina_net.ExperimentConfig's (mininet/heterogeneity.py)
    host_bw: str | None = None
    host_delay: str | None = None
    straggler: str | None = None
    compute: float = 0.0
    cross: tuple[str, ...] = ()
    # trees (mininet/topo.py): the fabric's config and the uplinks' oversubscription
    fabric: dict | None = None
    oversubscription: float = 1.0


class PlainFabricTopo(Topo):
    """The fabric's hosts and switches as plain bridges, with its port numbers and hina's link options."""

    def build(self, fabric=None, link: dict | None = None, uplinks: dict | None = None,
              per_rank: dict[int, dict] | None = None, names: Names = Names("")) -> None:
        br = names.bridge
        for i, s in enumerate(fabric.switches):
            self.addSwitch(f"{br}{s.name}", dpid=f"{0x100 + i:x}")
        for r, h in enumerate(fabric.hosts):
            name = self.addHost(names.host(r + 1), ip=f"{host_ip(r + 1)}/24")
            self.addLink(name, f"{br}{h.switch}", port2=h.port, **{**(link or {}), **(per_rank or {}).get(r, {})})
        for ln in fabric.links:
            self.addLink(f"{br}{ln.a}", f"{br}{ln.b}", port1=ln.a_port, port2=ln.b_port,
                         **(uplinks or {}).get((ln.a, ln.b), link or {}))


def cleanup(run: str) -> None:
    """Remove what run `run` (a crashed one, named explicitly) left: its bridges' links, its bridges, its host
    shells; nothing of another run's."""
    br = Names(check_run_id(run)).bridge
    subprocess.run(["pkill", "-f", f"mininet:{run}{HOST}[0-9]+$"], capture_output=True)
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    for name in set(re.findall(rf"\d+: ({br}[a-z0-9]*-eth\d+)[@:]", links)):
        subprocess.run(["ip", "link", "del", name], capture_output=True)
    for name in set(re.findall(rf"\d+: ({br}[a-z0-9]*)[@:]", links)):
        subprocess.run(["ip", "link", "del", name], capture_output=True)


def _fabric(cfg: StarConfig):
    from hina.control.fabric import Fabric

    fabric = Fabric.from_config(cfg.fabric)
    if len(fabric.hosts) != cfg.workers:
        raise ValueError(f"the fabric has {len(fabric.hosts)} hosts, the baselines {cfg.workers} ranks")
    if not fabric.is_tree:
        raise ValueError("plain bridges loop where switches form a cycle (several spines or cores): "
                         "the baselines need a tree")
    return fabric


def _uplink_bytes(fabric, names: Names) -> dict[str, dict[str, int]]:
    def tx(sw, port):
        return int(Path(f"/sys/class/net/{names.bridge}{sw}-eth{port}/statistics/tx_bytes").read_text())
    return {f"{ln.a}-{ln.b}": {"up": tx(ln.a, ln.a_port), "down": tx(ln.b, ln.b_port)} for ln in fabric.links}


def run(cfg: StarConfig, log=lambda m: None) -> list[dict]:
    """Start the star, run every baseline for every round on its hosts, stop it; summaries per baseline.
    Over a fabric each baseline gets a network of its own, so that its uplink bytes are its alone."""
    problem = missing_requirements()
    if problem:
        raise RuntimeError(problem)
    fabric = _fabric(cfg) if cfg.fabric is not None else None
    if fabric is not None:
        return [r for b in cfg.baselines for r in _run(dataclasses.replace(cfg, baselines=(b,)), fabric, log)]
    return _run(cfg, None, log)


def _run(cfg: StarConfig, fabric, log, run_id: str | None = None) -> list[dict]:
    names = Names(check_run_id(run_id) if run_id else new_run_id())
    cleanup(names.run)
    setLogLevel("critical")
    link = {"cls": FastTCLink, **({"bw": cfg.bw} if cfg.bw else {})}
    per_rank = heterogeneity.per_rank_links(cfg.host_bw, cfg.host_delay, cfg.workers)
    flows = heterogeneity.flows(cfg.cross, cfg.workers)
    if fabric is None:
        topo = PlainStarTopo(workers=cfg.workers, link=link, per_rank=per_rank, names=names)
    else:
        from hina.mininet.topo import uplink_rate

        rates = uplink_rate(fabric, bw=cfg.bw, oversubscription=cfg.oversubscription)
        uplinks = {k: {**link, **({"bw": r} if r else {})} for k, r in rates.items()}
        topo = PlainFabricTopo(fabric=fabric, link=link, uplinks=uplinks, per_rank=per_rank, names=names)
    net = Mininet(topo=topo, switch=LinuxBridge, controller=None, link=FastTCLink, build=True)
    spec_files: list[str] = []
    monitor = None
    try:
        net.start()
        monitor = fidelity.monitor_for(net, label=names.label).start()
        hosts = [net[names.host(i)] for i in range(1, cfg.workers + 1)]
        for h in hosts:
            intf = h.defaultIntf()
            peer = intf.link.intf2 if intf.link.intf1 is intf else intf.link.intf1
            h.cmd(f"ip link set dev {intf.name} mtu {cfg.mtu}")
            peer.node.cmd(f"ip link set dev {peer.name} mtu {cfg.mtu}")
        for ln in fabric.links if fabric is not None else ():
            for sw, port in ((ln.a, ln.a_port), (ln.b, ln.b_port)):
                net[f"{names.bridge}{sw}"].cmd(f"ip link set dev {names.bridge}{sw}-eth{port} mtu {cfg.mtu}")
        spec = {"world": cfg.workers, "master": f"{host_ip(1)}:{PORT}", "baselines": list(cfg.baselines),
                "seeds": [cfg.seed] * cfg.rounds, "workload": cfg.workload, "scale": cfg.scale,
                "length": cfg.length, "density": cfg.density, "topk_density": cfg.topk_density,
                "link_gbps": (cfg.bw or 10_000) / 1000, "deadline": cfg.deadline,
                "delays": {b: heterogeneity.straggler_delays(cfg.straggler, cfg.workers, cfg.compute, cfg.seed,
                                                             cfg.rounds) for b in cfg.baselines}}
        launch.validate(spec)
        with heterogeneity.CrossTraffic(hosts, flows, lambda r: host_ip(r + 1)) as cross:  # before the ranks
            procs = []
            for r, h in enumerate(hosts):
                ifname = h.defaultIntf().name
                spec_files.append(launch.write_spec({**spec, "ifname": ifname}))
                procs.append(h.popen(launch.worker_command(spec_files[-1], r), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True,
                                     env={**os.environ, "GLOO_SOCKET_IFNAME": ifname}))
            log(f"baselines {', '.join(cfg.baselines)} on {cfg.workers} hosts at {cfg.bw} Mbit/s")
            before = _uplink_bytes(fabric, names) if fabric is not None else None
            outputs = launch.collect(procs, cfg.deadline + 60)
            after = _uplink_bytes(fabric, names) if fabric is not None else None
        runs = launch.summarize(outputs, {**spec, "ifname": "per host"})
        for run_ in runs:
            run_["run_id"] = names.run
        if fabric is not None:  # one baseline on this network: the uplinks' bytes per round are its own
            for run_ in runs:
                run_["uplinks"] = {k: {d: (after[k][d] - before[k][d]) / cfg.rounds for d in ("up", "down")}
                                   for k in after}
                run_["uplink_bytes_per_aggregation"] = sum(v["up"] + v["down"] for v in run_["uplinks"].values())
        for run in runs:  # each round's verdict over its window, the best round's on the run
            for rnd in run["rounds"]:
                if rnd.get("window"):
                    rnd["fidelity"] = monitor.judge_window(*rnd["window"])
            best = min(run["rounds"], key=lambda r: r["seconds"])
            if "fidelity" in best:
                run["fidelity"] = best["fidelity"]
                run["fidelity_rounds"] = fidelity.summary([r["fidelity"] for r in run["rounds"] if "fidelity" in r])
                log(fidelity.verdict_line(f"[{run['mode']}]", run["fidelity"]))
            if flows:
                run["cross"] = cross.report
        return runs
    finally:
        if monitor is not None:
            monitor.stop()
        with contextlib.suppress(Exception):
            net.stop()
        cleanup(names.run)
        for path in spec_files:
            with contextlib.suppress(OSError):
                os.unlink(path)


if __name__ == "__main__":
    import sys

    from hina.cliargs import library_only

    sys.exit(library_only(__doc__, "mininet/run.py"))
