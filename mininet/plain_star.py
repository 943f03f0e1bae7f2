"""The host-based baselines on Mininet: one gloo rank per host, through an ordinary switch (a Linux bridge).

The baselines need no programmable switch, so their star has Mininet's
`LinuxBridge` (no controller, no spanning tree) where hina's has the
emulator: forwarding their TCP through the Python emulator would measure
the emulator.  The links are hina's (`FastTCLink` at the same rate, the
same MTU), hosts and bridge have their own names (`bh1`..., `bsw`), and
host 1 is the rendezvous.  Each host runs `python -m baselines.worker`;
every rank reads its interface's transmitted bytes (headers included)
around each round.

    import plain_star
    runs = plain_star.run(plain_star.StarConfig(workers=4, bw=1000, workload="lstm", scale=0.01,
                                                baselines=("ring", "zen"), rounds=3))
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for p in (str(ROOT), str(Path(__file__).resolve().parent)):
    if p not in sys.path:
        sys.path.insert(0, p)

from hina_net import FastTCLink, missing_requirements  # noqa: E402  (raises ImportError without Mininet)
import fidelity  # noqa: E402
import heterogeneity  # noqa: E402
from mininet.log import setLogLevel  # noqa: E402
from mininet.net import Mininet  # noqa: E402
from mininet.nodelib import LinuxBridge  # noqa: E402
from mininet.topo import Topo  # noqa: E402

from baselines import launch  # noqa: E402

BRIDGE, HOST = "bsw", "bh"
PORT = 29500


def host_ip(i: int) -> str:
    return f"10.0.1.{i}"


class PlainStarTopo(Topo):
    """N hosts, each on its own shaped link to one plain bridge."""

    def build(self, workers: int = 3, link: dict | None = None, per_rank: dict[int, dict] | None = None) -> None:
        sw = self.addSwitch(BRIDGE, dpid="2")
        for i in range(1, workers + 1):
            h = self.addHost(f"{HOST}{i}", ip=f"{host_ip(i)}/24")
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


def cleanup() -> None:
    """Remove links a crashed run of ours left (only `bsw-eth*`), and the bridge."""
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    for name in set(re.findall(rf"\d+: ({BRIDGE}-eth\d+)[@:]", links)):
        subprocess.run(["ip", "link", "del", name], capture_output=True)
    if re.search(rf"\d+: {BRIDGE}[@:]", links):
        subprocess.run(["ip", "link", "del", BRIDGE], capture_output=True)


def run(cfg: StarConfig, log=lambda m: None) -> list[dict]:
    """Start the star, run every baseline for every round on its hosts, stop it; summaries per baseline."""
    problem = missing_requirements()
    if problem:
        raise RuntimeError(problem)
    cleanup()
    setLogLevel("critical")
    link = {"cls": FastTCLink, **({"bw": cfg.bw} if cfg.bw else {})}
    per_rank = heterogeneity.per_rank_links(cfg.host_bw, cfg.host_delay, cfg.workers)
    flows = heterogeneity.flows(cfg.cross, cfg.workers)
    net = Mininet(topo=PlainStarTopo(workers=cfg.workers, link=link, per_rank=per_rank), switch=LinuxBridge,
                  controller=None, link=FastTCLink, build=True)
    spec_files: list[str] = []
    monitor = None
    try:
        net.start()
        monitor = fidelity.monitor_for(net).start()
        hosts = [net[f"{HOST}{i}"] for i in range(1, cfg.workers + 1)]
        for h in hosts:
            intf = h.defaultIntf()
            peer = intf.link.intf2 if intf.link.intf1 is intf else intf.link.intf1
            h.cmd(f"ip link set dev {intf.name} mtu {cfg.mtu}")
            net[BRIDGE].cmd(f"ip link set dev {peer.name} mtu {cfg.mtu}")
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
                                     stderr=subprocess.PIPE, text=True, cwd=ROOT,
                                     env={**os.environ, "GLOO_SOCKET_IFNAME": ifname}))
            log(f"baselines {', '.join(cfg.baselines)} on {cfg.workers} hosts at {cfg.bw} Mbit/s")
            outputs = launch.collect(procs, cfg.deadline + 60)
        runs = launch.summarize(outputs, {**spec, "ifname": "per host"})
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
        cleanup()
        for path in spec_files:
            with contextlib.suppress(OSError):
                os.unlink(path)
