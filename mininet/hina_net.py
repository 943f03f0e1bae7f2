"""hina on Mininet: worker hosts in a star around the aggregation switch (emulator, BMv2 or XDP).

`StarTopo.build` only declares names and link options; the switch class
is passed to Mininet (`EmulatorSwitch` runs `python -m hina.emulator
--raw` on the switch's interfaces, `XdpSwitch` the same with `--xdp`, the
rules then an XDP program in the kernel, `Bmv2Switch` runs `simple_switch_grpc`);
`Experiment` starts the network, configures the switch from one
`Topology` through the controller, runs one `hina worker` process per host,
checks every result against numpy, and always tears down what it created.

Links are shaped by TCLink (`FastTCLink`: the same, up to 100 Gbit/s).  This module must stay importable as a plain
module (the folder has no __init__.py: it would shadow the real mininet
package).  Loss and delay use tc netem when the kernel has it; when it does
not (some VM kernels), loss falls back to nftables random drops on each
host interface, both directions, and delay to the emulator's per-direction
delay line (BMv2 then cannot delay and says so).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import secrets
import shutil
import signal
import string
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

try:
    from mininet.link import Link, TCIntf
    from mininet.log import setLogLevel
    from mininet.net import Mininet
    from mininet.node import Switch

    from mininet.topo import Topo
except ImportError as exc:  # without Mininet, `mininet` is this folder and the message would be cryptic
    raise ImportError(f"Mininet is not installed (Debian: apt install mininet; then `make install`): {exc}") from exc

from hina import codec, kernels
from hina.cliargs import MAX_PIPES, plural
from hina.control import bmv2
from hina.control.bmv2 import start_bmv2, stop_switch
from hina.control.config import Member
from hina.control.controller import P4_BUILD, ControlError, EmulatorTarget
from hina.control.fabric import TARGETS
from hina.control.topology import Host, Topology
from hina.host.congestion_settings import CongestionSettings
from hina.host.demo import digest, expected_fixed
from hina.host.job import JobSpec
from hina.host.synthetic import workload_preset
from hina.mininet import fidelity, heterogeneity
from hina.mininet.targets import default_mtu, take_redirects
from hina.wire.headers import FRAME_OVERHEAD, UDP_PORT, max_words

SWITCH = "hsw"  # each run's names: its run id, then these (k3fhsw, k3fhw1): it cleans up only its own
HOST = "hw"
RUN_ID = re.compile(r"[a-z][a-z0-9]{2}")  # three characters: interface names (k3fhswl1-eth12) stay under 16
SWITCH_MAC, SWITCH_IP = "02:00:00:00:00:fe", "10.0.0.254"
MIN_MTU = 68  # Linux refuses less on an interface
MAX_MTU = 65535  # IPv4's largest packet


def host_mac(i: int) -> str:
    return f"02:00:00:00:01:{i:02x}"


def host_ip(i: int) -> str:
    return f"10.0.0.{i}"


def new_run_id() -> str:
    """A fresh run id: a letter and two letters or digits, not one a live run on this machine uses."""
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    while True:
        run = secrets.choice(string.ascii_lowercase) + "".join(secrets.choice(string.ascii_lowercase + string.digits)
                                                               for _ in range(2))
        if f": {run}" not in links:
            return run


def check_run_id(run: str) -> str:
    if not isinstance(run, str) or not RUN_ID.fullmatch(run):
        raise ValueError(f"a run id is a lowercase letter and two lowercase letters or digits, got {run!r}")
    return run


@dataclasses.dataclass(frozen=True)
class Names:
    """One run's names: its switches, hosts, bridges and nftables table all begin with its run id."""

    run: str

    @property
    def switch(self) -> str:
        return f"{self.run}{SWITCH}"  # the star's switch; a tree's are switch + the fabric's name

    def host(self, i: int) -> str:
        return f"{self.run}{HOST}{i}"

    @property
    def loss_table(self) -> str:
        return f"{UPLINK_LOSS_TABLE}_{self.run}"

    def label(self, name: str) -> str:
        """A node's name as results show it, without the run id (hw1, hsw): runs compare by name."""
        return name[len(self.run):] if name.startswith(self.run) else name


def netem_available() -> bool:
    """Does this kernel's tc know netem?  Tried on a throwaway dummy interface (named for this process)."""
    name = f"hinanetem{os.getpid() % 100000}"
    subprocess.run(["ip", "link", "del", name], capture_output=True)
    if subprocess.run(["ip", "link", "add", name, "type", "dummy"], capture_output=True).returncode != 0:
        return False
    try:
        probe = subprocess.run(["tc", "qdisc", "add", "dev", name, "root", "netem", "delay", "1ms"],
                               capture_output=True)
        return probe.returncode == 0
    finally:
        subprocess.run(["ip", "link", "del", name], capture_output=True)


# BMv2's switch binary, and where `tools/p4-toolchain.sh --fast-bmv2 /opt/bmv2-fast` installs the -O3 build
# without logging (off PATH) that benchmarks/switch_bench.py times the emulator against
BMV2_BINARY = bmv2.BINARY
FAST_BMV2 = "/opt/bmv2-fast/bin/simple_switch_grpc"


def missing_requirements(switch: str = "emulator", bmv2_binary: str = BMV2_BINARY) -> str | None:
    """None if an experiment can run here, else why not (`bmv2_binary`: the BMv2 build a bmv2 switch runs)."""
    if os.geteuid() != 0:
        return "Mininet needs root"
    for tool in ("mnexec", "tc", "ip"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (Debian: mininet, iproute2)"
    if switch == "bmv2":
        if shutil.which(bmv2_binary) is None:
            return (f"--switch bmv2 needs {BMV2_BINARY} on PATH" if bmv2_binary == BMV2_BINARY
                    else f"{bmv2_binary} is not an executable BMv2 switch")
        if not (P4_BUILD / "hina.json").exists():
            return "--switch bmv2 needs the compiled P4 program: run `make p4` (needs p4c)"
    if switch == "xdp":
        from hina.emulator.xdp.build import cannot_load

        why = cannot_load()
        if why is not None:
            return f"--switch xdp: {why}"
    return None


def kill_namespaces(shells) -> int:
    """SIGKILL every process in the network namespaces of these host shells' (never this process's own
    namespace); how many were killed."""
    def netns(pid) -> str | None:
        try:
            return os.readlink(f"/proc/{pid}/ns/net")
        except OSError:  # gone, or not ours to read
            return None

    mine = netns("self")
    targets = {netns(pid) for pid in shells} - {None, mine}
    killed = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid() and netns(entry) in targets:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(entry), signal.SIGKILL)
                killed += 1
    return killed


def cleanup(run: str) -> None:
    """Remove what run `run` (a crashed one, named explicitly) left: its switches, what runs on its hosts, their
    shells, its links and loss table, and nothing of any other run's or anyone else's."""
    names = Names(check_run_id(run))
    # {run}hsw-eth: the star's switch; {run}hsw<leaf or spine>-eth: a tree's (mininet/topo.py)
    subprocess.run(["pkill", "-f", f"hina[.]emulator.*--raw=[0-9]+={names.switch}[a-z0-9]*-eth"], capture_output=True)
    subprocess.run(["pkill", "-f", f"{BMV2_BINARY}.*@{names.switch}[a-z0-9]*-eth"], capture_output=True)
    # what ran on the run's hosts (workers, ranks: each its own session, so only its namespace finds it), then
    # the host shells themselves
    shells = subprocess.run(["pgrep", "-f", f"mininet:{names.run}{HOST}[0-9]+$"], capture_output=True, text=True)
    kill_namespaces(int(pid) for pid in shells.stdout.split())
    subprocess.run(["pkill", "-f", f"mininet:{names.run}{HOST}[0-9]+$"], capture_output=True)
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    for name in set(re.findall(rf"\d+: ({names.switch}[a-z0-9]*-eth\d+)[@:]", links)):
        subprocess.run(["ip", "link", "del", name], capture_output=True)
    # a tree's loss between switches lives in the root namespace (mininet/topo.py), not in a host's
    subprocess.run(["nft", "delete", "table", "netdev", names.loss_table], capture_output=True)


class FastTCIntf(TCIntf):
    """TCIntf refuses rates above 1 Gbit/s; htb shapes 10 Gbit/s veths fine."""

    bwParamMax = 100_000


class FastTCLink(Link):
    """TCLink whose interfaces accept up to 100 Gbit/s."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("cls1", FastTCIntf)
        kwargs.setdefault("cls2", FastTCIntf)
        super().__init__(*args, **kwargs)


class StarTopo(Topo):
    """N worker hosts, each on its own shaped link to one switch."""

    def build(self, workers: int = 3, link: dict | None = None, per_rank: dict[int, dict] | None = None,
              names: Names = Names("")) -> None:
        """`per_rank`: link options that replace `link`'s for rank r's host (hw{r+1}); names: the run's."""
        sw = self.addSwitch(names.switch, dpid="1")
        for i in range(1, workers + 1):
            h = self.addHost(names.host(i), ip=f"{host_ip(i)}/24", mac=host_mac(i))
            self.addLink(h, sw, **{**(link or {}), **(per_rank or {}).get(i - 1, {})})


def _stop_switch_process(target, proc: subprocess.Popen | None) -> None:
    """Close the control connection, then end the switch process: terminate, and kill if it lingers."""
    if target is not None:
        with contextlib.suppress(Exception):
            target.close()
    stop_switch(proc)


class EmulatorSwitch(Switch):
    """The hina emulator on raw sockets on the switch's interfaces: `pipes` data-plane processes (each
    interface's frames fanned out to them by slot, `switch_emulator --pipes`), one control port."""

    impair_args: list[str] = []
    pipes: int = 1

    def __init__(self, name: str, **params):
        super().__init__(name, **params)
        self.proc: subprocess.Popen | None = None
        self.target = None

    def start(self, controllers) -> None:
        ports = [f"--raw={self.ports[intf]}={intf.name}" for intf in self.intfList() if intf.name != "lo"]
        self.log = open(tempfile.mkstemp(prefix="hina-switch-", suffix=".log")[1], "w")
        self.proc = subprocess.Popen([sys.executable, "-m", "hina.emulator", *ports, "--pipes", str(self.pipes),
                                      *self.impair_args],
                                     stdout=subprocess.PIPE, stderr=self.log, text=True)
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the emulator did not start; see {self.log.name}")
        self.target = EmulatorTarget(tuple(json.loads(line)["control"]))

    def stop(self, deleteIntfs: bool = True) -> None:
        _stop_switch_process(self.target, self.proc)
        super().stop(deleteIntfs)


class XdpSwitch(EmulatorSwitch):
    """hina's rules as an XDP program on the switch's interfaces (`python -m hina.emulator --raw ... --xdp`):
    the process loads and attaches the program and serves the control port; the kernel runs the rules on
    every CPU a frame arrives on, so there are no pipes and no impairments inside the switch."""

    impair_args = ["--xdp"]
    pipes = 1


class Bmv2Switch(Switch):
    """BMv2 simple_switch_grpc running p4/hina.p4 (pushed over P4Runtime by the controller); its gRPC and
    Thrift servers on free ports of their own."""

    binary = BMV2_BINARY  # the build to run (an Experiment's subclass sets another)

    def __init__(self, name: str, **params):
        super().__init__(name, **params)
        self.proc: subprocess.Popen | None = None
        self.target = None

    def start(self, controllers) -> None:
        self.log = Path(tempfile.mkstemp(prefix="hina-bmv2-", suffix=".log")[1])
        self.proc, self.target = start_bmv2(((self.ports[intf], intf.name) for intf in self.intfList()
                                             if intf.name != "lo"), self.log, binary=self.binary)

    def stop(self, deleteIntfs: bool = True) -> None:
        _stop_switch_process(self.target, self.proc)
        super().stop(deleteIntfs)


@dataclasses.dataclass
class ExperimentConfig:
    workers: int = 3
    switch: str = "emulator"
    modes: tuple[str, ...] = ("auto",)  # any of codec.MODES, one run each
    bw: float | None = 1000.0  # Mbit/s per link; None: unshaped
    delay: float = 0.0  # ms per link
    loss: float = 0.0  # percent per link, each direction
    length: int = 1 << 20
    density: float = 0.01
    mtu: int | None = None  # None: default_mtu of the experiment's switches (9000, or the XDP switch's largest)
    slots: int = 64
    rounds: int = 1
    seed: int = 0
    deadline: float = 60.0
    ping: bool = True
    transport: str = "auto"  # workers' transport: auto (UDP when routed), udp, raw
    pipes: int = 1  # the emulator's data-plane processes (BMv2 is one process: 1)
    bmv2_binary: str = BMV2_BINARY  # the BMv2 build --switch bmv2 runs (a path, or a name on PATH)
    workload: str | None = None  # a preset of benchmarks/workloads.py instead of uniform sparsity
    scale: float = 1.0
    # heterogeneity (mininet/heterogeneity.py): per-rank link rate (Mbit/s) and delay (ms) as "R=V,...",
    # a straggler spec with the step's compute time (ms) it is relative to, iperf3 flows "SRC>DST[@MBPS]"
    host_bw: str | None = None
    host_delay: str | None = None
    straggler: str | None = None
    compute: float = 0.0
    cross: tuple[str, ...] = ()
    # workers per host: each rank of a host sends from a UDP port of its own (0x4E41 + its index there), and
    # the switch knows it by that address (1: one worker per host, known by its switch port, as before)
    ranks_per_host: int = 1
    # the workers' congestion windows and pacers (CongestionSettings(fair=False): the delay rule alone)
    congestion: CongestionSettings = CongestionSettings()
    pace: bool = True  # each worker paces its new chunks at its own link's rate, where `congestion` names none
    # segmentation offload where the emulator or the XDP switch is the switch: the workers hand their stacks a
    # batch of datagrams as one buffer; the emulator takes the super-frames the links carry, cuts them and gathers
    # each member's RESULTs into super-frames; before the XDP switch, whose program takes no super-frame, the
    # hosts' stacks cut them (False: frame by frame)
    offload: bool = True

    def __post_init__(self) -> None:
        """Refuse bad parameters here, before any host, link or process exists (one-line ValueErrors)."""
        if self.switch not in TARGETS:
            raise ValueError(f"switch must be emulator, bmv2 or xdp, got {self.switch!r}")
        if self.mtu is None:
            self.mtu = default_mtu(*self.targets)
        if self.transport not in ("auto", "udp", "raw"):
            raise ValueError(f"transport must be auto, udp or raw, got {self.transport!r}")
        checks = (("density", self.density, 0 <= self.density <= 1, "within [0, 1]"),
                  ("loss", self.loss, 0 <= self.loss <= 100, "a percentage within [0, 100]"),
                  ("delay", self.delay, 0 <= self.delay < float("inf"), "a finite number of ms >= 0"),
                  ("bw", self.bw, self.bw is None or 0 < self.bw < float("inf"),
                   "a positive number of Mbit/s (0 on the command line: unshaped)"),
                  ("deadline", self.deadline, 0 < self.deadline < float("inf"), "a positive number of seconds"),
                  ("rounds", self.rounds, self.rounds >= 1, "at least 1"),
                  ("pipes", self.pipes, 1 <= self.pipes <= (MAX_PIPES if self.switch == "emulator" else 1),
                   f"1..{MAX_PIPES}" if self.switch == "emulator"
                   else "1 with BMv2 (one process; pipes are the emulator's)" if self.switch == "bmv2"
                   else "1 with the XDP switch (it runs on every CPU a frame arrives on)"))
        for name, value, ok, what in checks:
            if not ok:
                raise ValueError(f"{name} must be {what}, got {value}")
        self.per_rank_links()
        if not self.pace and self.congestion.pace_mbps is not None:
            raise ValueError(f"pace is off but the congestion settings pace at {self.congestion.pace_mbps:g} Mbit/s: "
                             f"choose one (mininet/run.py: --no-pace or --pace)")
        if self.straggler:
            heterogeneity.Straggler.parse(self.straggler).check(self.workers, self.compute)
        heterogeneity.flows(self.cross, self.workers)
        if self.workload is not None:  # the preset fixes the length
            self.length = workload_preset(self.workload, self.scale).size
        if not MIN_MTU <= self.mtu <= MAX_MTU:
            raise ValueError(f"mtu must be {MIN_MTU}..{MAX_MTU} (Linux's least, IPv4's most), got {self.mtu}")
        if "xdp" in self.targets and self.mtu > default_mtu("xdp"):
            raise ValueError(f"mtu {self.mtu}: the XDP switch takes frames of an MTU up to {default_mtu('xdp')} "
                             f"(the kernel broadcasts no larger frame); give --mtu {default_mtu('xdp')} or less")
        # length, workers and the link rate as the workers will see them (modes: codec modes for `Experiment`,
        # other names for subclasses such as train_ddp's, each checking its own)
        codec.CodecParams(length=self.length, workers=self.workers,
                          **({"link_gbps": self.bw / 1000} if self.bw else {}))
        self.job.switch_config(self.workers)  # words per packet, slots
        if not 1 <= self.ranks_per_host <= self.workers or self.workers % self.ranks_per_host:
            raise ValueError(f"ranks_per_host must divide the workers ({self.workers}), got {self.ranks_per_host}")
        if self.ranks_per_host > 1 and (self.host_bw or self.host_delay or self.cross):
            raise ValueError("--host-bw, --host-delay and --cross name ranks as hosts: not with several ranks per host")

    def per_rank_links(self) -> dict[int, dict]:
        """Link options of the ranks whose link differs (--host-bw, --host-delay)."""
        return heterogeneity.per_rank_links(self.host_bw, self.host_delay, self.workers)

    def congestion_for(self, rank: int) -> CongestionSettings:
        """Rank `rank`'s congestion settings (its spec carries them): the experiment's, with `pace` and no
        rate of their own paced at the rank's host link's rate, which the host's ranks share."""
        if not self.pace or not self.bw or self.congestion.pace_mbps is not None:
            return self.congestion
        bw = self.per_rank_links().get(rank, {}).get("bw", self.bw)
        return dataclasses.replace(self.congestion, pace_mbps=bw / self.ranks_per_host)

    @property
    def targets(self) -> tuple[str, ...]:
        """What the experiment's hina switches run (the star's one switch; a tree's tiers)."""
        return (self.switch,)

    @property
    def words(self) -> int:
        return 32 if self.switch == "bmv2" else max_words(self.mtu)

    @property
    def job(self) -> JobSpec:
        """The one job of the experiment, as the workers see it (the switch gets `job.switch_config`)."""
        return JobSpec(job_id=1, words=self.words, slot_base=0, slots=self.slots)


class Experiment:
    """Start, run and always stop one star network; `run()` returns the results as a dict."""

    def __init__(self, cfg: ExperimentConfig, log=print, run_id: str | None = None):
        """run_id: the names this run gives its switches, hosts and links (default: a fresh one)."""
        self.cfg, self.log = cfg, log
        self.names = Names(check_run_id(run_id) if run_id is not None else new_run_id())
        self.netem = netem_available()
        self.net = None
        self.monitor: fidelity.Monitor | None = None
        self._expected_digest: str | None = None

    def run(self) -> dict:
        cfg = self.cfg
        problem = missing_requirements(cfg.switch, cfg.bmv2_binary)
        if problem:
            raise RuntimeError(problem)
        if set(cfg.targets) & {"bmv2", "xdp"} and cfg.delay and not self.netem:
            raise RuntimeError("--delay needs tc netem, which this kernel lacks (the emulator can delay instead)")
        cleanup(self.names.run)  # a crashed earlier run of this id
        kernels.compile_all()  # once per machine, before any host starts: the hosts' processes load them
        self.log(f"run {self.names.run}: switches, hosts and links named {self.names.run}*")
        setLogLevel("critical")  # tc prints htb quantum warnings for jumbo frames as errors
        link = {"cls": FastTCLink}
        if cfg.bw:
            link["bw"] = cfg.bw
        if self.netem:
            if cfg.delay:
                link["delay"] = f"{cfg.delay}ms"
            if cfg.loss:
                link["loss"] = cfg.loss
        switch_cls = self.switch_class(cfg.switch)
        per_rank = cfg.per_rank_links()
        if any("delay" in o for o in per_rank.values()) and not self.netem:
            raise RuntimeError("--host-delay needs tc netem, which this kernel lacks")
        self.net = Mininet(topo=self._topo(link, per_rank), switch=switch_cls,
                           controller=None, link=FastTCLink, autoSetMacs=False, autoStaticArp=False, build=True)
        try:
            self.net.start()
            topology = self._prepare()
            results = {"run_id": self.names.run, "config": dataclasses.asdict(cfg), "netem": self.netem,
                       "loss_by": self._loss_by(),
                       "delay_by": self._delay_by(), "runs": []}
            if cfg.ping:
                results["ping"] = self._ping()
            self.monitor = fidelity.monitor_for(self.net, label=self.names.label).start()
            flows = heterogeneity.flows(cfg.cross, cfg.workers)
            with heterogeneity.CrossTraffic(self._hosts(), flows, lambda r: host_ip(r + 1)) as cross:
                for mode in cfg.modes:
                    start = self.monitor.mark().t
                    run = self._aggregate(mode, topology)
                    if isinstance(run, dict):  # (a test's stand-in may return anything)
                        if "fidelity" not in run:  # a subclass's run (train_ddp's): its whole run is the window
                            run["fidelity"] = self.monitor.judge_window(start, self.monitor.mark().t)
                        self.log(fidelity.verdict_line(f"[{mode}]", run["fidelity"]))
                    results["runs"].append(run)
                if flows:
                    results["cross"] = cross.stop()
            results["counters"] = self.switch.target.counters()
            return results
        finally:
            if self.monitor is not None:
                self.monitor.stop()
            self.stop()

    def switch_class(self, kind: str) -> type[Switch]:
        """The Mininet node class of a switch that runs `kind` (`TARGETS`), configured for this run: BMv2 the
        build the config names, the emulator its pipes and what it impairs itself, the XDP switch as it is."""
        cfg = self.cfg
        if kind == "bmv2":
            return (Bmv2Switch if cfg.bmv2_binary == Bmv2Switch.binary else
                    type("ConfiguredBmv2Switch", (Bmv2Switch,), {"binary": cfg.bmv2_binary}))
        if kind == "xdp":
            return XdpSwitch
        return type("ConfiguredEmulatorSwitch", (EmulatorSwitch,), {
            "impair_args": ([] if self.netem or not cfg.delay else ["--delay", str(cfg.delay)])
            + ([] if cfg.offload else ["--no-offload"]), "pipes": cfg.pipes})

    def _topo(self, link: dict, per_rank: dict[int, dict]) -> Topo:
        """The network to build (a subclass builds another shape: mininet/topo.py's trees)."""
        return StarTopo(workers=self.cfg.workers // self.cfg.ranks_per_host, link=link, per_rank=per_rank,
                        names=self.names)

    def stop(self) -> None:
        if self.net is not None:
            with contextlib.suppress(Exception):
                self.net.stop()
            self.net = None
        cleanup(self.names.run)

    @property
    def switch(self):
        return self.net[self.names.switch]

    def _loss_by(self) -> str:
        return "none" if not self.cfg.loss else ("tc netem" if self.netem else "nftables on host interfaces")

    def _delay_by(self) -> str:
        return "none" if not self.cfg.delay else ("tc netem" if self.netem else "emulator delay line")

    def _hosts(self):
        """The worker hosts, one per rank (a host appears once per rank it runs)."""
        per = self.cfg.ranks_per_host
        return [self.net[self.names.host(r // per + 1)] for r in range(self.cfg.workers)]

    def _rank_port(self, rank: int) -> int:
        """The UDP port rank `rank` sends from on its host: 0x4E41 plus its index among the host's ranks."""
        return UDP_PORT + rank % self.cfg.ranks_per_host

    def _prepare(self) -> Topology:
        """MTU, offloads, static ARP and loss on the hosts; the topology into the switch."""
        cfg, sw = self.cfg, self.switch
        hosts = self._prepare_hosts()
        per = cfg.ranks_per_host
        if per == 1:  # one worker per host: known by its switch port
            members = [Member(r, hosts[r].port) for r in range(cfg.workers)]
        else:  # several: each by its address and UDP port behind its host's port, a RESULT replica each
            members = [Member(r, hosts[r // per].port, (hosts[r // per].ip, self._rank_port(r)))
                       for r in range(cfg.workers)]
        job = cfg.job.switch_config(cfg.workers, members)
        topology = Topology(SWITCH_MAC, SWITCH_IP, tuple(hosts), (job,))
        sw.target.configure(topology)
        return topology

    def _prepare_hosts(self) -> list[Host]:
        """MTU, offloads, static ARP and loss on each worker host and its switch port; the hosts as the switch's
        topology names them."""
        cfg, sw = self.cfg, self.switch
        hosts = []
        for i, h in enumerate(dict.fromkeys(self._hosts()), start=1):
            intf = h.defaultIntf()
            peer = intf.link.intf2 if intf.link.intf1 is intf else intf.link.intf1
            for node, name in ((h, intf.name), (sw, peer.name)):
                node.cmd(f"ip link set dev {name} mtu {cfg.mtu}")
                # a user-space switch forwards frames as read: checksums must be complete in them (BMv2); the
                # emulator completes them and cuts a host's super-frames itself (segmentation offload: a host's
                # batch of datagrams crosses its stack and its link's queue as one buffer)
                tx = "on" if self.segmentation_offload else "off"
                node.cmd(f"ethtool -K {name} tx {tx} rx off >/dev/null 2>&1")
            if cfg.switch == "xdp":
                take_redirects(h, intf.name)
            h.cmd(f"arp -s {SWITCH_IP} {SWITCH_MAC}")
            if cfg.loss and not self.netem:
                _nft_loss(h, intf.name, cfg.loss)
            hosts.append(Host(sw.ports[peer], host_mac(i), host_ip(i)))
        return hosts

    @property
    def segmentation_offload(self) -> bool:
        """Whether the workers send with segmentation offload and the hosts keep transmit checksum and
        segmentation offload on: where the emulator, reading virtio_net_hdrs on its batched path, is the
        switch, and the links carry super-frames; where the XDP switch is, whose program takes no super-frame:
        the kernel clears a veth's software segmentation features while its peer runs an XDP program without
        multi-buffer support, so the host's own stack cuts the worker's batch into frames before its link; not
        BMv2, which reads frames as they are, nor the emulator's impaired path (a delay line without netem), nor
        an emulator with pipes (which steer each frame to its slot's pipe: a super-frame of several slots would
        reach one)."""
        return (self.cfg.offload and self.cfg.switch in ("emulator", "xdp") and self.cfg.pipes == 1
                and not (self.cfg.delay and not self.netem))

    def _switch_profile(self) -> dict | None:
        return _profile_of(getattr(self.switch, "target", None))

    def _expected(self) -> str:
        """Digest of numpy's sum of the quantized inputs: the same for every mode, computed once."""
        if self._expected_digest is None:
            cfg = self.cfg
            self._expected_digest = digest(expected_fixed(cfg.workers, cfg.length, cfg.density, cfg.seed,
                                                          cfg.workload, cfg.scale))
        return self._expected_digest

    def _ping(self) -> dict:
        distinct = list(dict.fromkeys(self._hosts()))
        h1, h2 = distinct[:2] if len(distinct) > 1 else (distinct[0],) * 2
        out = h1.cmd(f"ping -c 5 -i 0.2 -W 2 {h2.IP()}")
        m = re.search(r"(\d+) received", out)
        return {"from": h1.name, "to": h2.name, "received": int(m.group(1)) if m else 0, "sent": 5}

    def _answers_to(self) -> dict:
        """Where the switch addresses its RESULTs, if not to each worker's own address (the spec's
        "answers_to": the address the workers' sockets bind)."""
        return {}

    def _aggregate(self, mode: str, topology: Topology) -> dict:
        cfg = self.cfg
        # the cost model weighs bytes at the links' rate (its default when they are unshaped)
        link = {"link_gbps": cfg.bw / 1000} if cfg.bw else {}
        params = codec.CodecParams(length=cfg.length, workers=cfg.workers, mode=mode, **link)
        job = cfg.job
        self.switch.target.reset_job(job.job_id)  # every mode starts with fresh slot copies, as fresh workers do
        hosts = self._hosts()
        spec = {"params": params.to_config(), "job": job.to_config(), "density": cfg.density, "seed": cfg.seed,
                "workload": cfg.workload, "scale": cfg.scale,
                "deadline": cfg.deadline, "switch": {"ip": SWITCH_IP, "mac": SWITCH_MAC, **self._answers_to()},
                "pipes": cfg.pipes, "offload": self.segmentation_offload,
                "hosts": [{"ifname": h.defaultIntf().name, "mac": host_mac(r // cfg.ranks_per_host + 1),
                           "ip": host_ip(r // cfg.ranks_per_host + 1), "udp_port": self._rank_port(r),
                           "congestion": cfg.congestion_for(r).to_config()}
                          for r, h in enumerate(hosts)]}
        with tempfile.NamedTemporaryFile("w", prefix="hina-spec-", suffix=".json", delete=False) as f:
            json.dump(spec, f)
        self.log(f"[{mode}] {plural(cfg.workers, 'worker')}, d={cfg.length:,}, density {cfg.density:.2%}, "
                 f"{cfg.bw or 'unshaped'} Mbit/s, loss {cfg.loss}% ({self._loss_by()}), delay {cfg.delay} ms")
        expected = self._expected()
        procs = [h.popen([sys.executable, "-m", "hina", "worker", "--spec", f.name, "--rank", str(r),
                          "--transport", cfg.transport],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for r, h in enumerate(hosts)]
        rounds = []
        straggler = heterogeneity.stragglers(cfg.straggler)
        rng = np.random.default_rng(cfg.seed)  # the stragglers' draws, the same every run of this config
        try:
            transports = set()
            for r, p in enumerate(procs):
                ready = p.stdout.readline()
                if not ready:
                    raise RuntimeError(f"worker {r} did not start: {p.stderr.read()}")
                said = json.loads(ready)
                if "error" in said:  # it could not prepare (the hello with the others, its kernels)
                    raise RuntimeError(f"worker {r} did not start: {said['error']}")
                transports.add(said["transport"])
            for rnd in range(cfg.rounds):
                before = self._switch_profile()
                start = self.monitor.mark().t if self.monitor else None
                delays = (straggler.delays(cfg.workers, cfg.compute, rng) if straggler
                          else np.zeros(cfg.workers))
                _go(procs, delays)
                reports = [json.loads(p.stdout.readline() or '{"error": "worker exited"}') for p in procs]
                errors = [f"worker {r}: {x['error']}" for r, x in enumerate(reports) if "error" in x]
                exact = not errors and all(x["digest"] == expected for x in reports)
                rounds.append(_summarize(reports, errors, exact, cfg, delays))
                if self.monitor:  # the round's window: from the first "go" to the last report
                    end = self.monitor.mark().t
                    rounds[-1]["fidelity"] = self.monitor.judge_window(start, end)
                    rounds[-1]["cpu"] = self.monitor.cpu_window(start, end)  # where the machine's time went
                after = self._switch_profile()
                if before is not None and after is not None:  # the emulator's own account of the round
                    rounds[-1]["switch_profile"] = {k: v - before.get(k, 0) for k, v in after.items()}
                self.log(round_line(mode, rnd, rounds[-1]))
        finally:
            _end_workers(procs)
            os.unlink(f.name)
        best = min(rounds, key=lambda x: x["seconds"])
        verdicts = [x["fidelity"] for x in rounds if "fidelity" in x]
        return {"mode": mode, "exact": all(x["exact"] for x in rounds), "transports": sorted(transports),
                "rounds": rounds, **best, **({"fidelity_rounds": fidelity.summary(verdicts)} if verdicts else {})}


def _profile_of(target) -> dict | None:
    """The emulator's profile counters (seconds by where they went, its CPU time), or None (BMv2, a tree)."""
    if not isinstance(target, EmulatorTarget):
        return None
    try:
        return dict(target.counters().get("profile") or {}) or None
    except (ControlError, OSError, ValueError):
        return None


def round_line(mode: str, rnd: int, summary: dict) -> str:
    """A round's line in the log: exact or not, seconds, what ran, bytes, the frames resent and why."""
    return (f"[{mode}] round {rnd + 1}: exact={summary['exact']} {summary['seconds']:.3f} s, "
            f"ran {summary['encoding']} (index group {summary['group']}), "
            f"{summary['wire_bytes_per_worker']:,.0f} B/worker, "
            f"{plural(summary['retransmissions'], 'retransmission')} "
            f"({plural(summary['probes'], 'tail probe')}, {summary['timeouts']:,} on a timeout)"
            + (f", {summary['fidelity']['verdict']}" if "fidelity" in summary else "")
            + (f" {summary['errors']}" if summary["errors"] else ""))


def _end_workers(procs) -> None:
    """Close each spec-driven worker's stdin (its cue to exit), give it 10 s, then kill it."""
    for p in procs:
        with contextlib.suppress(Exception):
            p.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(10)
        if p.poll() is None:
            p.kill()


def _go(procs, delays) -> None:
    """Tell every worker to start, each `delays[r]` seconds after the first (a straggler's late step)."""
    t0 = time.monotonic()
    for r in sorted(range(len(procs)), key=lambda r: delays[r]):
        wait = t0 + delays[r] - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        procs[r].stdin.write("go\n")
        procs[r].stdin.flush()


def _per_worker(reports: list[dict], delays) -> list[dict]:
    """Each worker's start delay, its seconds from its own start, and how long of them it waited for the
    others (beyond the worker that needed least: the last to start, when one straggles)."""
    own = [x.get("seconds") for x in reports]
    least = min((s for s in own if s is not None), default=0.0)
    return [{"rank": r, "delay": float(d), "seconds": s, "waited": None if s is None else s - least,
             "wire_bytes": _wire_bytes(x) if "error" not in x else None,
             **({"window": x["window"]} if "window" in x else {})}  # a traced worker's (benchmarks/cross_traffic.py)
            for r, (d, s, x) in enumerate(zip(delays, own, reports))]


def _wire_bytes(report: dict) -> int:
    """The bytes a worker's frames took on its link, headers included."""
    return report["wire_bytes"] + FRAME_OVERHEAD * report["frames"]


def _summarize(reports: list[dict], errors: list[str], exact: bool, cfg: ExperimentConfig,
               delays=None) -> dict:
    delays = np.zeros(len(reports)) if delays is None else delays
    ok = [x for x in reports if "error" not in x]
    n = max(len(ok), 1)
    wire = sum(_wire_bytes(x) for x in ok) / n
    # a host's ranks share its link: the line-rate time is its ranks' bytes together
    line_rate = wire * cfg.ranks_per_host * 8 / (cfg.bw * 1e6) if cfg.bw else None
    phases: dict[str, float] = {}
    for x in ok:
        for k, v in x["phases"].items():
            phases[k] = max(phases.get(k, 0.0), v)
    compute = {k: max(x["compute"].get(k, 0.0) for x in ok) for k in (ok[0]["compute"] if ok else {})}
    # the round's seconds: from the first worker's start to the last one's result
    finish = [float(d) + x["seconds"] for d, x in zip(delays, reports) if "error" not in x]
    return {"exact": exact, "errors": errors, "seconds": max(finish, default=float("nan")),
            "workers": _per_worker(reports, delays),
            "payload_by_phase": ok[0]["payload_by_phase"] if ok else {},
            # what ran (the same on every worker): the encoding, the index's group size (1: one level,
            # 0: no index) and the trips through the switch ("rounds" is the list of repetitions)
            "encoding": ok[0]["encoding"] if ok else None, "group": ok[0]["group"] if ok else None,
            "switch_rounds": ok[0]["rounds"] if ok else None,
            "wire_bytes_per_worker": wire, "payload_bytes_per_worker": sum(x["payload_bytes"] for x in ok) / n,
            "line_rate_seconds": line_rate, "retransmissions": sum(x["retransmissions"] for x in ok),
            "timeouts": sum(x.get("timeouts", 0) for x in ok), "probes": sum(x.get("probes", 0) for x in ok),
            "pending": sum(x.get("pending", 0) for x in ok), "asked": sum(x.get("asked", 0) for x in ok),
            "frames": sum(x["frames"] for x in ok), "messages": sum(x.get("messages", 0) for x in ok),
            "phase_seconds": phases, "compute_seconds": compute,
            # the workers' own account of the aggregation, summed over them (Worker.profile, their CPU time)
            "profile": {k: sum(x.get("profile", {}).get(k, 0.0) for x in ok)
                        for k in sorted({k for x in ok for k in x.get("profile", {})})}}


UPLINK_LOSS_TABLE = "hina_uplink_loss"  # nftables table (root namespace) of a tree's loss between switches


def _nft_loss(host, ifname: str, percent: float) -> None:
    """Drop `percent`% of frames leaving and entering `ifname`, at random (nftables netdev hooks)."""
    per_million = int(round(percent * 10_000))
    rules = (f"table netdev hina_loss {{\n"
             f" chain egress {{ type filter hook egress device \"{ifname}\" priority 0; "
             f"numgen random mod 1000000 < {per_million} drop; }}\n"
             f" chain ingress {{ type filter hook ingress device \"{ifname}\" priority 0; "
             f"numgen random mod 1000000 < {per_million} drop; }}\n}}\n")
    out = host.cmd(f"nft -f - <<'EOF'\n{rules}EOF")
    if "rror" in out:
        raise RuntimeError(f"nftables loss on {host.name}:{ifname} failed: {out.strip()}")


# one colour per phase bar (tab20 without its greys), and one for the line-rate marker that none of them uses
PHASE_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22",
                 "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5")
LINE_RATE_COLOUR = "black"


def plot(results: dict, path: Path) -> bool:
    """Seconds per phase and bytes on the wire per worker, one bar per mode."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    runs = results["runs"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8), gridspec_kw={"wspace": 0.3})
    # the mode, and for auto what it chose
    names = [r["mode"] if r["mode"] != "auto" or not r.get("encoding") else f"auto ({r['encoding']})"
             for r in runs]
    order = ("check", "scale", "stats", "index", "index_coarse", "index_fine", "values", "sketch", "residual",
             "dense", "block_index", "blocks")
    # a round that carries several segments is named "a+b": it sorts by its first segment
    phases = sorted({p for r in runs for p in r["phase_seconds"]},
                    key=lambda p: (order.index(p.split("+")[0]) if p.split("+")[0] in order else len(order), p))
    bottom = [0.0] * len(runs)
    for k, p in enumerate(phases):
        vals = [r["phase_seconds"].get(p, 0.0) for r in runs]
        ax1.bar(names, vals, bottom=bottom, label=p, color=PHASE_COLOURS[k % len(PHASE_COLOURS)])
        bottom = [b + v for b, v in zip(bottom, vals)]
    rest = [max(0.0, r["seconds"] - b) for r, b in zip(runs, bottom)]
    ax1.bar(names, rest, bottom=bottom, color="lightgray", label="encode/decode (not on the wire)")
    if all(r["line_rate_seconds"] for r in runs):
        # black: no phase bar uses it (the bars take PHASE_COLOURS and light grey)
        ax1.plot(names, [r["line_rate_seconds"] for r in runs], "_", color=LINE_RATE_COLOUR, markersize=30,
                 markeredgewidth=2, label="line rate")
    ax1.set_ylabel("seconds")
    ax1.set_title("time per phase")
    ax1.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=3)
    ax2.bar(names, [r["wire_bytes_per_worker"] / 1e6 for r in runs], color="tab:gray")
    ax2.set_ylabel("MB on the wire per worker")
    ax2.set_title("bytes per worker")
    c = results["config"]
    fig.suptitle(f"{plural(c['workers'], 'worker')}, {c['switch']}, {c['bw']} Mbit/s, loss {c['loss']}%, "
                 f"d={c['length']:,}, density {c['density']:.1%}", fontsize=9)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    return True


if __name__ == "__main__":
    import sys

    from hina.cliargs import library_only

    sys.exit(library_only(__doc__, "mininet/run.py"))
