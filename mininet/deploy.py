"""The deployment guide's commands (docs/deploy.md) run in Mininet, hosts standing in for machines (root).

Two worker machines with R ranks each and a server machine, on one Linux bridge at --bw Mbit/s per link,
as a cluster's top-of-rack switch: the server runs the switch (the emulator as a UDP server:
`python -m hina.emulator --listen 10.0.0.3:20033 --control 10.0.0.3:20034`), the workers reach it by
address, each rank from a UDP port of its own.  Two checks, each with the guide's exact commands:

- standalone workers: R `hina worker` processes per machine, one job of 2R ranks; every rank's sum must
  be numpy's sum of the quantized gradients, bit for bit;
- multi-node DDP: `torchrun --nnodes 2 --nproc-per-node R` on each machine running
  examples/ddp_torchrun.py through the switch, then the same with gloo's allreduce; parameters must be
  identical on every rank after every step (the script checks), and seconds per iteration are kept.

    sudo .venv/bin/python mininet/deploy.py --ranks 4 --bw 100 --steps 10 --out /tmp/deploy.json

Every name this run creates (hosts, bridge, links) carries its own run id, so it runs beside other
experiments, and it removes only what it created.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from mininet.log import setLogLevel
from mininet.net import Mininet
from mininet.nodelib import LinuxBridge

from hina.cliargs import OneLineParser, between, fraction, positive
from hina.host.demo import expected_fixed
from hina.mininet import fidelity
from hina.mininet.hina_net import FastTCLink, missing_requirements
from hina.provenance import command_line, out_path, write_result
from hina.wire.headers import UDP_PORT
from mininet.topo import Topo

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "ddp_torchrun.py"
CONTROL_PORT = UDP_PORT + 1  # the guide puts the control port beside the data port
RDZV_PORT = 29500
JUMBO_MTU = 9000  # every link's MTU: the workers' default K fills one such frame (docs/deploy.md)
STANDALONE_JOB = 7  # the check job (the guide's standalone command): its workers leave it before the training


def ip(i: int) -> str:
    return f"10.0.0.{i}"


class ClusterTopo(Topo):
    """`machines` worker hosts and one server on a Linux bridge; names prefixed by the run id."""

    def build(self, run: str, machines: int = 2, bw: float | None = None) -> None:
        bridge = self.addSwitch(f"{run}br", dpid="1")
        link = {"bw": bw} if bw else {}
        for i in range(1, machines + 2):  # the last is the server
            name = f"{run}sv" if i == machines + 1 else f"{run}m{i}"
            host = self.addHost(name, ip=f"{ip(i)}/24", mac=f"02:00:00:00:{int(run, 36) % 256:02x}:{i:02x}")
            self.addLink(host, bridge, cls=FastTCLink, **link)


class Cluster:
    """The network, the switch on the server, and the commands of the guide on the worker machines.

    machines: worker hosts (the guide's two by default); switch_args: more flags for the emulator (its slot
    space and share policy, for instance)."""

    def __init__(self, ranks: int, bw: float | None, log=print, *, machines: int = 2, switch_args: tuple = ()):
        self.ranks, self.bw, self.log = ranks, bw, log
        self.machine_count, self.switch_args = machines, tuple(switch_args)
        self.run = secrets.token_hex(2)[:3]  # this run's names: <run>m1, <run>m2, <run>sv, <run>br
        self.net: Mininet | None = None
        self.monitor: fidelity.Monitor | None = None
        self.switch: subprocess.Popen | None = None
        self.tmp = Path(tempfile.mkdtemp(prefix=f"hina-deploy-{self.run}-"))

    def __enter__(self) -> Cluster:
        setLogLevel("critical")
        self.net = Mininet(topo=ClusterTopo(run=self.run, machines=self.machine_count, bw=self.bw),
                           switch=LinuxBridge, controller=None, link=FastTCLink, autoSetMacs=False, build=True)
        self.net.start()
        # jumbo frames on every link, as the guide asks for the workers' default K (one 9000-byte frame): at
        # Linux's 1500 each datagram went in 7 IP fragments, and a reassembly queue that lost one waited 30 s
        for link in self.net.links:
            for intf in (link.intf1, link.intf2):
                intf.node.cmd(f"ip link set dev {intf.name} mtu {JUMBO_MTU}")
        self.net[f"{self.run}br"].cmd(f"ip link set dev {self.run}br mtu {JUMBO_MTU}")
        self.machines = [self.net[f"{self.run}m{i}"] for i in range(1, self.machine_count + 1)]
        self.server = self.net[f"{self.run}sv"]
        for h in (*self.machines, self.server):  # complete checksums for hosts that read raw frames
            h.cmd(f"ethtool -K {h.defaultIntf().name} tx off rx off >/dev/null 2>&1")
        self.switch_ip = self.server.IP()
        # the guide: the emulator on the server, its data and control ports on the server's address
        cmd = [sys.executable, "-m", "hina.emulator", "--listen", f"{self.switch_ip}:{UDP_PORT}",
               "--control", f"{self.switch_ip}:{CONTROL_PORT}", *self.switch_args]
        self.switch = self.server.popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.switch.stdout.readline()
        if not line:
            raise RuntimeError(f"the emulator did not start on the server: {self.switch.stderr.read()}")
        self.log(f"[{self.run}] emulator on {self.switch_ip}:{UDP_PORT} (control {CONTROL_PORT}): {line.strip()}")
        self.monitor = fidelity.monitor_for(self.net).start()  # whether the links or the CPU set each check's time
        return self

    def __exit__(self, *exc) -> None:
        if self.monitor is not None:
            self.monitor.stop()
        if self.switch is not None and self.switch.poll() is None:
            self.switch.terminate()
            try:
                self.switch.wait(5)
            except subprocess.TimeoutExpired:
                self.switch.kill()
        if self.net is not None:
            self.net.stop()  # removes this run's hosts, links and bridge, nothing else
        for f in self.tmp.glob("*"):
            f.unlink()
        self.tmp.rmdir()

    def judged(self, what: str, run) -> dict:
        """run() -> its result dict, with the fidelity monitor's verdict for the time it took."""
        start = self.monitor.mark().t if self.monitor else None
        result = run()
        if self.monitor is not None:
            result["fidelity"] = self.monitor.judge_window(start, self.monitor.mark().t)
            self.log(fidelity.verdict_line(f"[{self.run} {what}]", result["fidelity"]))
        return result

    def _run_everywhere(self, commands: list[tuple[object, list[str]]], timeout: float) -> list[dict]:
        # gloo (torch.distributed) binds the address of the interface named here, not the root namespace's
        # hostname, which a Mininet host cannot reach
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        procs = [(h, cmd, h.popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env={**env, "GLOO_SOCKET_IFNAME": h.defaultIntf().name}))
                 for h, cmd in commands]
        out = []
        deadline = time.monotonic() + timeout
        for h, cmd, p in procs:
            try:
                stdout, stderr = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                stdout, stderr = p.communicate()
            out.append({"host": h.name, "command": shlex.join(cmd), "status": p.returncode, "stdout": stdout,
                        "stderr": stderr})
        return out

    def standalone(self, length: int, density: float, seed: int = 0) -> dict:
        """R `hina worker`s per machine, each joining at the control port; every sum checked against numpy."""
        workers = 2 * self.ranks
        commands = []
        for r in range(workers):
            out = self.tmp / f"sum-{r}.npy"
            commands.append((self.machines[r // self.ranks], [
                sys.executable, "-m", "hina", "worker", "--switch", f"{self.switch_ip}:{UDP_PORT}",
                "--control", f"{self.switch_ip}:{CONTROL_PORT}", "--rank", str(r), "--workers", str(workers),
                "--length", str(length), "--density", str(density), "--seed", str(seed),
                "--job-id", str(STANDALONE_JOB), "--out", str(out), "--out-dtype", "float64", "--json"]))
        runs = self._run_everywhere(commands, timeout=300)
        fixed = expected_fixed(workers, length, density, seed)
        exact = []
        for r, run in enumerate(runs):
            ok = run["status"] == 0
            if ok:
                shift = json.loads(run["stdout"].strip().splitlines()[-1])["rounds"][-1]["shift"]
                ok = np.array_equal(np.load(self.tmp / f"sum-{r}.npy"), fixed.astype(np.float64) / 2.0 ** shift)
            exact.append(ok)
        return {"workers": workers, "ranks_per_machine": self.ranks, "length": length, "density": density,
                "exact": all(exact), "exact_by_rank": exact, "commands": [r["command"] for r in runs[:1]],
                "failures": [{k: r[k] for k in ("host", "status", "stderr")} for r, ok in zip(runs, exact) if not ok]}

    def jobs(self) -> list[dict]:
        """`hina switch jobs --json` from the first machine: the jobs on the switch now."""
        run, = self._run_everywhere([(self.machines[0], [
            sys.executable, "-m", "hina", "switch", "jobs", "--json",
            "--control", f"{self.switch_ip}:{CONTROL_PORT}"])], timeout=30)
        if run["status"] != 0:
            raise RuntimeError(f"hina switch jobs failed: {run['stderr'].strip()}")
        return json.loads(run["stdout"])["jobs"]

    def remove_job(self, job_id: int) -> bool:
        """`hina switch remove JOB_ID` from the first machine, as the guide has a user do after the check."""
        run, = self._run_everywhere([(self.machines[0], [
            sys.executable, "-m", "hina", "switch", "remove", str(job_id),
            "--control", f"{self.switch_ip}:{CONTROL_PORT}"])], timeout=30)
        return run["status"] == 0

    def torchrun(self, backend: str, steps: int, job_id: int, extra: list[str]) -> dict:
        """examples/ddp_torchrun.py under torchrun on both machines (the first is the rendezvous)."""
        out = self.tmp / f"ddp-{backend}.json"
        commands = []
        for node, machine in enumerate(self.machines):
            cmd = [str(Path(sys.executable).with_name("torchrun")), "--nnodes", "2", "--nproc-per-node",
                   str(self.ranks), "--node-rank", str(node), "--master-addr", self.machines[0].IP(),
                   "--master-port", str(RDZV_PORT), str(EXAMPLE), "--backend", backend,
                   "--steps", str(steps), *extra]
            if backend == "hina":
                cmd += ["--switch", f"{self.switch_ip}:{UDP_PORT}", "--control", f"{self.switch_ip}:{CONTROL_PORT}",
                        "--job-id", str(job_id)]
            if node == 0:
                cmd += ["--out", str(out)]
            commands.append((machine, cmd))
        runs = self._run_everywhere(commands, timeout=900)
        ok = all(r["status"] == 0 for r in runs) and out.exists()
        lines = json.loads(out.read_text()) if out.exists() else []
        seconds = [x["seconds"] for x in lines[1:]] or [x["seconds"] for x in lines]  # past the first step
        return {"backend": backend, "ok": ok, "steps": len(lines),
                "identical_every_step": bool(lines) and all(x["identical"] for x in lines),
                "seconds_per_iteration": statistics.median(seconds) if seconds else None,
                "first_step_seconds": lines[0]["seconds"] if lines else None, "losses": [x["loss"] for x in lines],
                "bytes_per_step": [x.get("bytes") for x in lines], "command": runs[0]["command"],
                "failures": [{k: r[k] for k in ("host", "status", "stderr")} for r in runs if r["status"] != 0]}


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="mininet/deploy.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=between(1, 16), default=4, help="ranks per worker machine (default: 4)")
    ap.add_argument("--bw", type=positive, default=100.0, help="Mbit/s per link (default: 100)")
    ap.add_argument("--steps", type=between(2), default=10, help="training steps of each DDP run (default: 10)")
    ap.add_argument("--length", type=between(1), default=1 << 20,
                    help="elements per standalone worker's gradient (default: 2^20)")
    ap.add_argument("--density", type=fraction, default=0.01, help="their non-zero share (default: 0.01)")
    ap.add_argument("--rows", type=between(2), default=100_000, help="the DDP model's embedding rows")
    ap.add_argument("--skip", choices=("standalone", "torchrun"), action="append", default=[],
                    help="leave out one of the two checks (repeatable)")
    ap.add_argument("--out", type=out_path, help="write the result here (default: print it only)")
    args = ap.parse_args(argv)
    problem = missing_requirements()
    if problem:
        print(f"mininet/deploy.py: {problem}", file=sys.stderr)
        return 2
    result: dict = {"ranks_per_machine": args.ranks, "machines": 2, "bw_mbps": args.bw}
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    with Cluster(args.ranks, args.bw, log) as cluster:
        result["run_id"] = cluster.run
        if "standalone" not in args.skip:
            log(f"[{cluster.run}] standalone workers: {2 * args.ranks} ranks on 2 machines")
            result["standalone"] = cluster.judged("standalone", lambda: cluster.standalone(args.length, args.density))
            # as the guide's check says: the workers leave the job when they are done, and its slots are free
            result["standalone"]["jobs_after"] = [j["job_id"] for j in cluster.jobs()]
            log(f"  exact: {result['standalone']['exact']}; jobs on the switch after it: "
                f"{result['standalone']['jobs_after'] or 'none'}")
        if "torchrun" not in args.skip:
            extra = ["--rows", str(args.rows)]
            for job, backend in enumerate(("hina", "gloo"), start=20):
                log(f"[{cluster.run}] torchrun, {backend}: 2 machines x {args.ranks} ranks, {args.steps} steps")
                train = lambda b=backend, j=job: cluster.torchrun(b, args.steps, j, extra)  # noqa: E731
                result[f"ddp_{backend}"] = cluster.judged(f"torchrun {backend}", train)
                r = result[f"ddp_{backend}"]
                log(f"  ok {r['ok']}, identical on every rank after every step: {r['identical_every_step']}, "
                    f"{r['seconds_per_iteration']} s per iteration")
    ok = result.get("standalone", {"exact": True})["exact"] and all(
        result[k]["ok"] and result[k]["identical_every_step"] for k in ("ddp_hina", "ddp_gloo") if k in result)
    result["ok"] = ok
    if args.out:
        write_result(args.out, result, command_line("mininet/deploy.py", argv))
        log(f"wrote {args.out}")
    print(json.dumps({k: v for k, v in result.items() if not isinstance(v, dict)} | {
        k: {kk: vv for kk, vv in v.items() if kk in ("exact", "ok", "identical_every_step", "seconds_per_iteration")}
        for k, v in result.items() if isinstance(v, dict)}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
