"""hina on Mininet in aggregation trees: the `Fabric` (control/fabric.py) built as a network.

    --topology star | leafspine:LEAVES,SPINES,HOSTS_PER_LEAF | FILE.json | NAME   (mininet/run.py)

`parse_topology` reads the flag (None: the star of hina_net, unchanged): a
topology file (docs/trees.md, "Topology files") by its path, or one shipped
in mininet/topologies/ by its name (`examples()`);
`FabricTopo.build` declares the fabric's switches (hsw<name>), hosts
(hw<rank + 1>, in the fabric's host order) and links with the fabric's
port numbers, host links at --bw and the links between switches at the
rate the file or `--oversubscription` gives them (`uplink_rate`), at any
depth; `TreeExperiment` is hina_net's `Experiment` on that network: every
switch is configured with its share of the job (its children, its parents,
slot s rooted at root s mod S: the spines, a three-tier tree's core), every
mode starts from fresh slot copies on every switch, and each
mode's run reports the bytes that crossed each uplink, both ways, per
aggregation.  Switches holding workers answer them as hina_net's one
switch does (its MAC and IP), so workers run unchanged; BMv2 switches get
a gRPC and thrift port each.  This module must stay importable as a plain
module (mininet/ has no __init__.py).
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
from pathlib import Path

from mininet.nodelib import LinuxBridge

from hina.control.config import Member
from hina.control.fabric import MAX_PORT, TARGETS, Fabric, TreeJob
from hina.control.topology import BROADCAST_MAC, Host, Topology
from hina.mininet import hina_net
from hina.mininet.hina_net import (
    SWITCH,
    SWITCH_IP,
    SWITCH_MAC,
    Experiment,
    ExperimentConfig,
    host_ip,
    host_mac,
)
from hina.mininet.targets import default_mtu, take_redirects
from hina.wire.headers import max_words
from mininet.topo import Topo

BROADCAST_IP = "255.255.255.255"  # every host takes it (a subnet's broadcast needs the address's brd set)

_LEAFSPINE = re.compile(r"leafspine:(\d+),(\d+),(\d+)$")
TOPOLOGIES = Path(__file__).resolve().parent / "topologies"  # the shipped example files, --topology NAME
IFNAMSIZ = 15  # the longest interface name Linux takes: hsw<name>-eth<port> must fit


def examples() -> list[str]:
    """The names of the shipped topology files (mininet/topologies/NAME.json)."""
    return sorted(p.stem for p in TOPOLOGIES.glob("*.json"))


def topology_file(text: str) -> Path | None:
    """Where --topology TEXT's file is: TEXT as a path, else a shipped example named TEXT (None: neither)."""
    path = Path(text)
    if path.is_file() or text.endswith(".json"):
        return path
    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", text) and (TOPOLOGIES / f"{text}.json").is_file():
        return TOPOLOGIES / f"{text}.json"
    return None


def load_topology(path: Path) -> Fabric:
    """A topology file, checked (one-line ValueErrors naming the field and the fix)."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise ValueError(exc.strerror) from None
    try:
        cfg = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc})") from None
    return Fabric.from_config(cfg)


def parse_topology(text: str) -> Fabric | None:
    """The --topology flag: None for the star, else the fabric (one-line ValueErrors)."""
    if text == "star":
        return None
    m = _LEAFSPINE.match(text)
    if m:
        leaves, spines, per_leaf = map(int, m.groups())
        if leaves < 2 or spines < 1 or per_leaf < 1 or leaves * per_leaf > 32 or leaves + spines > 32:
            raise ValueError(f"--topology {text}: leafspine needs LEAVES >= 2, SPINES >= 1, HOSTS_PER_LEAF >= 1, "
                             f"at most 32 hosts and 32 switches")
        fabric = Fabric.leaf_spine(leaves * per_leaf, rack=per_leaf, spines=spines)
    else:
        path = topology_file(text)
        if path is None:
            raise ValueError(f"--topology must be star, leafspine:LEAVES,SPINES,HOSTS_PER_LEAF, a FILE.json or the "
                             f"name of a shipped example ({', '.join(examples())}), got {text!r}")
        try:
            fabric = load_topology(path)
        except ValueError as exc:
            raise ValueError(f"--topology {text}: {exc}") from None
    for i, h in enumerate(fabric.hosts):  # a fabric may describe more ports than a switch takes
        if h.port > MAX_PORT:
            raise ValueError(f"--topology {text}: topology hosts[{i}].port: {h.port} will not do on a switch: ports "
                             f"1..{MAX_PORT} (511 is BMv2's drop port)")
    for i, ln in enumerate(fabric.links):
        if max(ln.a_port, ln.b_port) > MAX_PORT:
            raise ValueError(f"--topology {text}: topology links[{i}]: port {max(ln.a_port, ln.b_port)} will not do "
                             f"on a switch: ports 1..{MAX_PORT} (511 is BMv2's drop port)")
    for i, s in enumerate(fabric.switches):  # Mininet's interfaces are hsw<name>-eth<port>
        longest = max([h.port for h in fabric.hosts if h.switch == s.name]
                      + [my_port for my_port, _, _ in fabric.neighbours(s.name)])
        room = IFNAMSIZ - len(f"run{SWITCH}-eth{longest}")  # run: the three characters of a run id
        if not re.fullmatch(r"[a-z][a-z0-9]*", s.name) or len(s.name) > room:
            raise ValueError(f"--topology {text}: topology switches[{i}].name: {s.name!r} will not do in Mininet: "
                             f"lower-case letters and digits, at most {room} characters (its interfaces are "
                             f"<run id>{SWITCH}<name>-eth<port>, at most {IFNAMSIZ} characters)")
    # hosts get hina_net's addresses by rank, which the workers' spec names them by
    hosts = tuple(dataclasses.replace(h, mac=host_mac(i), ip=host_ip(i)) for i, h in enumerate(fabric.hosts, 1))
    if not 1 <= len(hosts) <= 32:
        raise ValueError(f"--topology {text}: 1..32 hosts in Mininet (the workers' addresses), got {len(hosts)}")
    return dataclasses.replace(fabric, hosts=hosts)


def uplink_rate(fabric: Fabric, *, bw: float | None, oversubscription: float) -> dict[tuple[str, str], float | None]:
    """Mbit/s of each link between switches, keyed (lower, upper); None: unshaped.  The fabric's rule
    (`Fabric.link_rates`) with the hosts at --bw (0: unshaped) and --oversubscription where the file gives
    none."""
    return fabric.link_rates(bw or 0, oversubscription)


class FabricTopo(Topo):
    """The fabric's switches, hosts and links, declared with their port numbers and link options."""

    def build(self, fabric: Fabric | None = None, link: dict | None = None, uplinks: dict | None = None,
              per_rank: dict[int, dict] | None = None, switch_cls: dict | None = None,
              names: hina_net.Names = hina_net.Names("")) -> None:
        sw = names.switch  # a switch's Mininet name: the run's switch prefix and its name in the fabric
        for i, s in enumerate(fabric.switches):
            opts = {"cls": switch_cls[s.name]} if switch_cls and s.name in switch_cls else {}
            self.addSwitch(f"{sw}{s.name}", dpid=f"{i + 1:x}", **opts)
        for r, h in enumerate(fabric.hosts):
            name = self.addHost(names.host(r + 1), ip=f"{h.ip}/24", mac=h.mac)
            self.addLink(name, f"{sw}{h.switch}", port2=h.port, **{**(link or {}), **(per_rank or {}).get(r, {})})
        for ln in fabric.links:
            self.addLink(f"{sw}{ln.a}", f"{sw}{ln.b}", port1=ln.a_port, port2=ln.b_port,
                         **(uplinks or {}).get((ln.a, ln.b), link or {}))


@dataclasses.dataclass
class TreeConfig(ExperimentConfig):
    """An experiment's settings over a fabric: the spines' target (None: `switch`'s) and the
    oversubscription of the uplinks; with BMv2 anywhere every switch runs K = 32 words, with the XDP switch
    anywhere every link its MTU unless one is given."""

    spine_switch: str | None = None
    oversubscription: float = 1.0
    leaves: str = "hina"  # "plain": the leaves are Linux bridges, the job is summed at the spine only
    fabric_targets: tuple[str, ...] = ()  # the targets a fabric file names for its switches (TreeExperiment)

    def __post_init__(self) -> None:
        if self.spine_switch not in (None, *TARGETS):
            raise ValueError(f"spine switch must be emulator, bmv2 or xdp, got {self.spine_switch!r}")
        if self.leaves not in ("hina", "plain"):
            raise ValueError(f"leaves must be hina or plain, got {self.leaves!r}")
        if not 0 < self.oversubscription < float("inf"):
            raise ValueError(f"oversubscription must be a positive ratio, got {self.oversubscription}")
        super().__post_init__()

    @property
    def targets(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((self.switch, self.spine_switch or self.switch, *self.fabric_targets)))

    @property
    def words(self) -> int:
        return 32 if "bmv2" in self.targets else max_words(self.mtu)


class TreeExperiment(Experiment):
    """hina_net's experiment over a fabric: one job over every host, rooted at the fabric's top (the spines,
    a three-tier tree's core, or the roots its file names).

    A switch's target: the file's `target`, else cfg.switch for a switch holding hosts and `spine_switch`
    ("emulator", "bmv2" or "xdp"; default: cfg.switch) for the others, so that a tree mixes BMv2, emulator
    and XDP switches."""

    def __init__(self, cfg: TreeConfig, fabric: Fabric, log=print, run_id: str | None = None):
        targets = tuple(sorted({s.target for s in fabric.switches if s.target}))
        if targets != cfg.fabric_targets:  # K = 32 words on every switch once BMv2 is anywhere
            # (and an MTU left to its default follows the file's targets: the XDP switch's where it is one)
            mtu = None if cfg.mtu == default_mtu(*cfg.targets) else cfg.mtu
            cfg = dataclasses.replace(cfg, fabric_targets=targets, mtu=mtu)
        super().__init__(cfg, log, run_id)
        self.fabric, self.oversubscription = fabric, cfg.oversubscription
        leaves = {h.switch for h in fabric.hosts}
        self.kinds = {s.name: s.target or (cfg.switch if s.name in leaves else (cfg.spine_switch or cfg.switch))
                      for s in fabric.switches}
        if cfg.leaves == "plain":  # aggregation at the spine only: the leaves forward frames as they are
            spines = [s.name for s in fabric.switches if s.name not in leaves]
            if len(spines) != 1 or any(ln.a in leaves and ln.b in leaves for ln in fabric.links):
                raise ValueError(f"plain leaves need one spine and every link between a leaf and it, got "
                                 f"spines {spines}")
            self.kinds.update({name: "bridge" for name in leaves})
            self.kinds[spines[0]] = cfg.spine_switch or cfg.switch
        self.uplink_loss = False  # set once the uplinks drop frames (`_uplink_loss`)

    def _topo(self, link: dict, per_rank: dict[int, dict]) -> Topo:
        uplinks = {}
        for key, rate in uplink_rate(self.fabric, bw=self.cfg.bw, oversubscription=self.oversubscription).items():
            uplinks[key] = {**{k: v for k, v in link.items() if k != "bw"}, **({"bw": rate} if rate else {})}
        # every switch its own kind's class (BMv2 each on gRPC and Thrift ports of its own), a plain leaf a bridge
        switch_cls = {name: LinuxBridge if kind == "bridge" else self.switch_class(kind)
                      for name, kind in self.kinds.items()}
        return FabricTopo(fabric=self.fabric, link=link, uplinks=uplinks, per_rank=per_rank, switch_cls=switch_cls,
                          names=self.names)

    @property
    def switch(self):
        """The root of slot 0 (its counters are the run's `counters`; every switch's are in `switches`)."""
        return self.net[f"{self.names.switch}{self._roots[0]}"]

    @property
    def _roots(self) -> tuple[str, ...]:
        return self.fabric.roots_of(self._job())

    def _job(self) -> TreeJob:
        job = self.cfg.job
        return TreeJob(job.job_id, job.words, job.slot_base, job.slots, tuple(h.name for h in self.fabric.hosts))

    def _switches(self):
        """hina's switches (a plain leaf is a bridge: nothing to configure, reset or count)."""
        return [(s.name, self.net[f"{self.names.switch}{s.name}"]) for s in self.fabric.switches
                if self.kinds[s.name] != "bridge"]

    def _prepare(self) -> Topology:
        """MTU, offloads, static ARP and loss on the hosts and every switch port; each switch's share."""
        cfg = self.cfg
        for h in self._hosts():
            intf = h.defaultIntf()
            h.cmd(f"ip link set dev {intf.name} mtu {cfg.mtu}")
            h.cmd(f"ethtool -K {intf.name} tx off rx off >/dev/null 2>&1")
            h.cmd(f"arp -s {SWITCH_IP} {SWITCH_MAC}")
            if cfg.loss and not self.netem:
                hina_net._nft_loss(h, intf.name, cfg.loss)
        for s in self.fabric.switches:  # every switch, plain leaves too (a bridge drops what exceeds its MTU)
            sw = self.net[f"{self.names.switch}{s.name}"]
            for intf in sw.intfList():
                if intf.name != "lo":
                    sw.cmd(f"ip link set dev {intf.name} mtu {cfg.mtu}")
                    sw.cmd(f"ethtool -K {intf.name} tx off rx off >/dev/null 2>&1")
        self._take_redirects()
        if cfg.loss and not self.netem:  # netem shapes every link itself; nftables only the hosts'
            self._uplink_loss(cfg.loss)
        if self.cfg.leaves == "plain":
            return self._prepare_spine_only()
        topologies = self.fabric.topologies([self._job()])
        for name, sw in self._switches():
            topo = topologies[name]
            if any(h.switch == name for h in self.fabric.hosts):  # the workers' switch address
                topo = dataclasses.replace(topo, switch_mac=SWITCH_MAC, switch_ip=SWITCH_IP)
            sw.target.configure(topo)
        return topologies[self._roots[0]]

    def _take_redirects(self) -> None:
        """Every link with an XDP switch at one end: its other end (a host, a bridge, an emulator's or BMv2's
        port) takes the frames the program redirects (`hina_net.take_redirects`)."""
        kind = {f"{self.names.switch}{name}": k for name, k in self.kinds.items()}
        for link in self.net.links:
            for end, other in ((link.intf1, link.intf2), (link.intf2, link.intf1)):
                if kind.get(end.node.name) == "xdp" and kind.get(other.node.name) != "xdp":
                    take_redirects(other.node, other.name)

    def _uplink_chains(self) -> dict[str, tuple[str, str, str]]:
        """nftables chain -> (uplink "a-b", direction, the interface whose egress it drops on)."""
        chains = {}
        for i, ln in enumerate(self.fabric.links):
            chains[f"u{i}_up"] = (f"{ln.a}-{ln.b}", "up", f"{self.names.switch}{ln.a}-eth{ln.a_port}")
            chains[f"u{i}_down"] = (f"{ln.a}-{ln.b}", "down", f"{self.names.switch}{ln.b}-eth{ln.b_port}")
        return chains

    def _uplink_loss(self, percent: float) -> None:
        """`percent`% of the frames each switch sends on an uplink dropped at random, counted: an
        nftables egress chain per direction in the root namespace, where the switches' ports are (an
        egress hook, because a switch reading raw frames sees them before any ingress hook could drop
        them).  `hina_net.cleanup` removes the table."""
        per_million = int(round(percent * 10_000))
        rules = "".join(f" chain {chain} {{ type filter hook egress device \"{dev}\" priority 0; "
                        f"numgen random mod 1000000 < {per_million} counter drop; }}\n"
                        for chain, (_, _, dev) in self._uplink_chains().items())
        out = subprocess.run(["nft", "-f", "-"], input=f"table netdev {self.names.loss_table} {{\n{rules}}}\n",
                             capture_output=True, text=True)
        if out.returncode:
            raise RuntimeError(f"nftables loss on the uplinks failed: {out.stderr.strip()}")
        self.uplink_loss = True

    def _uplink_drops(self) -> dict[str, dict[str, int]]:
        """Frames dropped so far on each uplink by `_uplink_loss`, both ways (zeros without loss)."""
        chains = self._uplink_chains()
        out = {key: {"up": 0, "down": 0} for key, _, _ in chains.values()}
        if not self.uplink_loss:
            return out
        listing = subprocess.run(["nft", "-j", "list", "table", "netdev", self.names.loss_table],
                                 capture_output=True, text=True, check=True).stdout
        for item in json.loads(listing)["nftables"]:
            rule = item.get("rule")
            if rule and rule["chain"] in chains:
                key, way, _ = chains[rule["chain"]]
                out[key][way] += sum(e["counter"]["packets"] for e in rule["expr"] if "counter" in e)
        return out

    def _loss_by(self) -> str:
        return ("nftables on host interfaces and uplinks" if self.cfg.loss and not self.netem
                else super()._loss_by())

    def _prepare_spine_only(self) -> Topology:
        """The spine holds the whole job: worker r on the port of its leaf, answered there at the
        broadcast addresses (the leaf, a bridge, floods a RESULT to its hosts, which take the ones of
        their job; each port gets one copy, however many workers are behind it)."""
        (spine,) = (name for name, _ in self._switches())
        port_of = {other: my_port for my_port, other, _ in self.fabric.neighbours(spine)}
        hosts = tuple(Host(port, BROADCAST_MAC, BROADCAST_IP) for port in sorted(port_of.values()))
        members = [Member(rank, port_of[h.switch]) for rank, h in enumerate(self.fabric.hosts)]
        topo = Topology(SWITCH_MAC, SWITCH_IP, hosts, (self.cfg.job.switch_config(len(members), members),))
        self.net[f"{self.names.switch}{spine}"].target.configure(topo)
        return topo

    def _answers_to(self) -> dict:
        return {"answers_to": BROADCAST_IP} if self.cfg.leaves == "plain" else {}

    def _uplink_counters(self) -> dict[str, dict[str, int]]:
        """Bytes sent so far on each uplink: up (lower switch -> upper), down."""
        out = {}
        for ln in self.fabric.links:
            def tx(sw, port):
                path = Path(f"/sys/class/net/{self.names.switch}{sw}-eth{port}/statistics/tx_bytes")
                return int(path.read_text())
            out[f"{ln.a}-{ln.b}"] = {"up": tx(ln.a, ln.a_port), "down": tx(ln.b, ln.b_port)}
        return out

    def _aggregate(self, mode: str, topology: Topology) -> dict:
        for _, sw in self._switches():  # fresh slot copies on every tier
            sw.target.reset_job(self.cfg.job.job_id)
        before, dropped = self._uplink_counters(), self._uplink_drops()
        run = super()._aggregate(mode, topology)
        after, dropped_after = self._uplink_counters(), self._uplink_drops()
        rounds = self.cfg.rounds
        run["uplinks"] = {k: {d: (after[k][d] - before[k][d]) / rounds for d in ("up", "down")} for k in after}
        # frames the injected loss dropped on each uplink, all rounds together
        run["uplink_drops"] = {k: {d: dropped_after[k][d] - dropped[k][d] for d in ("up", "down")}
                               for k in dropped_after}
        run["uplink_bytes_per_aggregation"] = sum(v["up"] + v["down"] for v in run["uplinks"].values())
        run["switches"] = {name: sw.target.counters() for name, sw in self._switches()}
        self.log(f"[{mode}] uplinks per aggregation: " + ", ".join(
            f"{k} {v['up']:,.0f} B up {v['down']:,.0f} B down" for k, v in run["uplinks"].items()))
        return run

    def unshaped(self) -> list[str]:
        """The directions of the links between switches that leave an XDP switch ("l1-s1 up": leaf l1's partials
        up): its redirects skip the port's queue and its egress hooks, so neither the link's rate nor the uplinks'
        loss reaches them (docs/switch.md)."""
        return [f"{ln.a}-{ln.b} {way}" for ln in self.fabric.links
                for end, way in ((ln.a, "up"), (ln.b, "down")) if self.kinds[end] == "xdp"]

    def run(self) -> dict:
        for kind in set(self.kinds.values()) - {"bridge"}:
            problem = hina_net.missing_requirements(kind)
            if problem:
                raise RuntimeError(problem)
        if self.unshaped():
            self.log(f"note: what an XDP switch sends skips its port's queue, so neither these uplinks' rates nor "
                     f"their loss reach it: {', '.join(self.unshaped())}")
        results = super().run()
        results["topology"] = {"fabric": self.fabric.to_config(), "oversubscription": self.oversubscription,
                               "switches": self.kinds, "leaves": self.cfg.leaves, "tiers": self.fabric.tiers(),
                               "roots": list(self._roots), "described": self.fabric.describe(),
                               "unshaped": self.unshaped(),
                               "uplink_mbps": {f"{a}-{b}": r for (a, b), r in uplink_rate(
                                   self.fabric, bw=self.cfg.bw, oversubscription=self.oversubscription).items()}}
        return results


if __name__ == "__main__":
    import sys

    from hina.cliargs import library_only

    sys.exit(library_only(__doc__, "mininet/run.py"))
