"""Train real models with PyTorch DDP through the switch, against gloo's allreduce, on the same seeds.

N worker processes on loopback train the LSTM language model and the
NCF-style model that `capture_torch.py` builds, on data generated here (a
fresh, seeded batch per rank and step), for a given number of steps, once
per backend:

    hina        DDP + host.ddp's hook: every bucket through the emulator, auto mode
    hina-dense  the same hook in dense mode (SwitchML-style: every quantized element through the switch)
    gloo        DDP's own allreduce over gloo (TCP on loopback), timed by its hook in baselines/lossy_hooks.py

and any other baseline's DDP hook of hina.baselines.registry (topk, int8) when --backends names it.

Every backend starts from the same parameters and sees the same batches;
after every step each hina run checks that every rank holds bit-identical
parameters, and the loss of each hina run is compared with gloo's step by
step.  Writes a JSON (every step of every run) and a PNG (loss against step,
seconds per iteration) to --out (default: train_ddp.json in $HINA_RESULTS,
else hina-results/ in the current directory), and prints a summary table;
progress goes to stderr: a bar redrawn on a terminal (the run under way,
runs done of all, the time left), a line per run in a log.

    pip install -e '.[torch,plot]'
    python benchmarks/train_ddp.py --workers 4 --steps 20 [--models lstm,ncf] [--backends hina,hina-dense,gloo]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from hina.control.controller import P4_WORDS
from hina.control.fabric import TARGETS
from hina.host.job import DEFAULT_SLOTS, DEFAULT_WORDS
from hina.wire.sockio import free_tcp_ports

ROOT = Path(__file__).resolve().parent.parent

MODELS = ("lstm", "ncf")
MODE_OF = {"hina": "auto", "hina-dense": "dense", "hina-blocks": "blocks"}  # hina's DDP hook in each codec mode
HINA_BACKENDS = ("hina", "hina-dense")  # this benchmark's; time_to_accuracy.py trains hina-blocks too
DEFAULT_BACKENDS = ("hina", "hina-dense", "gloo")
HINA_COLOR = {"hina": "C1", "hina-dense": "C2", "hina-blocks": "C5"}  # a baseline's is its registry entry's


def backends() -> tuple[str, ...]:
    """Every backend a run may train with: hina's, then each baseline's DDP hook (hina.baselines.registry)."""
    from hina.baselines import registry

    return (*HINA_BACKENDS, *(b.name for b in registry.trained()))


def color_of(system: str) -> str:
    """One colour per system in every panel (of this benchmark's plots and time_to_accuracy.py's)."""
    from hina.baselines import registry

    return HINA_COLOR.get(system) or registry.get(system).color or "black"


@dataclass(frozen=True)
class RunConfig:
    """One training run: a model, a backend, N ranks, on one switch (hina) or gloo alone."""

    model: str = "lstm"
    backend: str = "hina"
    workers: int = 2
    steps: int = 5
    seed: int = 0
    lr: float = 0.1
    scale: float = 1.0  # shrinks the models' tables and batches (1: capture_torch.py's sizes)
    bucket_mb: float = 25.0  # DDP's bucket_cap_mb
    deadline: float = 30.0  # seconds a bucket may take through the switch
    job_id: int = 1
    words: int = DEFAULT_WORDS
    slots: int = DEFAULT_SLOTS
    link_gbps: float = 10.0
    threads: int = 1  # torch threads per rank
    switch: tuple[str, int] | None = None  # the emulator's data and control addresses (hina backends)
    control: tuple[str, int] | None = None
    nan_at: tuple[int, int] | None = None  # (rank, step): that rank's gradients turn NaN then (a test of refusal)
    # on Mininet: gloo's rendezvous on host 1, no control port (the topology authorizes each host), the
    # workers' transport (auto: UDP from port 0x4E41 when routed, else raw frames) and each host's interface
    store: tuple[str, int] | None = None
    transport: str = "auto"
    switch_mac: str | None = None
    hosts: tuple[dict, ...] | None = None

    def __post_init__(self) -> None:
        if self.model not in MODELS:
            raise ValueError(f"model must be one of {', '.join(MODELS)}, got {self.model!r}")
        if self.backend not in backends():
            raise ValueError(f"backend must be one of {', '.join(backends())}, got {self.backend!r}")
        if not 1 <= self.workers <= 32:
            raise ValueError(f"workers must be 1..32, got {self.workers}")
        if self.steps < 1:
            raise ValueError(f"steps must be at least 1, got {self.steps}")
        if not 0 < self.scale <= 1:
            raise ValueError(f"scale must be within (0, 1], got {self.scale}")
        if self.transport not in ("auto", "udp", "raw"):
            raise ValueError(f"transport must be auto, udp or raw, got {self.transport!r}")

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> RunConfig:
        """From `asdict` through JSON: the pairs come back as tuples."""
        return cls(**tuples_again(cfg, ("switch", "control", "nan_at", "store", "hosts")))


# -- models and data (the models are capture_torch.py's) ------------------------------------------------

def model_shape(cfg: RunConfig) -> dict[str, int]:
    s = cfg.scale
    if cfg.model == "lstm":
        return {"vocab": max(64, round(50_000 * s)), "emb": 64, "hidden": 128, "batch": max(2, round(32 * s)),
                "seq": 21, "samples": max(8, round(2048 * s))}
    return {"users": max(64, round(20_000 * s)), "items": max(64, round(10_000 * s)), "dim": 32,
            "batch": max(16, round(8_192 * s))}


def build(cfg: RunConfig):
    """The model (same initial parameters on every rank and backend) and loss(module, rng): one batch's loss.

    module: the DDP wrapper (its forward prepares the reducer for backward).
    """
    import torch

    from hina.benchmarks import capture_torch
    from hina.host import workloads

    shape = model_shape(cfg)
    torch.manual_seed(cfg.seed)
    if cfg.model == "lstm":
        model = capture_torch.lstm_model(shape["vocab"], shape["emb"], shape["hidden"])

        def loss(module, rng):  # Zipf tokens, their targets plus log-uniform sampled candidates
            ranks = (rng.zipf(1.05, size=shape["batch"] * shape["seq"]) - 1) % shape["vocab"]
            sampled = workloads.loguniform_ranks(rng, shape["vocab"], shape["samples"])
            candidates = torch.from_numpy(np.unique(np.concatenate([ranks, sampled])))
            return module(torch.from_numpy(ranks.reshape(shape["batch"], shape["seq"])), candidates)
    else:
        model = capture_torch.ncf_model(shape["users"], shape["items"], shape["dim"])
        truth = np.random.default_rng([cfg.seed, 1 << 20])  # hidden preferences: labels the model can learn
        tu = truth.standard_normal((shape["users"], 8)).astype(np.float32)
        ti = truth.standard_normal((shape["items"], 8)).astype(np.float32)

        def loss(module, rng):  # log-uniform user and item ids, labels from the hidden preferences
            u = workloads.loguniform_ranks(rng, shape["users"], shape["batch"])
            i = workloads.loguniform_ranks(rng, shape["items"], shape["batch"])
            y = torch.from_numpy(((tu[u] * ti[i]).sum(1) > 0).astype(np.float32))
            return module(torch.from_numpy(u), torch.from_numpy(i), y)
    return model, loss


def digest(model) -> str:
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


# -- one rank ---------------------------------------------------------------------------------------------

def run_rank(cfg: RunConfig, rank: int, store_port: int, conn, trainer=None) -> None:
    """One DDP rank: train cfg.steps steps, report per step (loss, seconds, communication, digest).
    trainer: what trains (default this module's `train`; time_to_accuracy.py passes its own)."""
    try:
        conn.send(("done", (trainer or train)(cfg, rank, store_port)))
    except BaseException as exc:  # reported, never swallowed: the parent names the rank and fails
        conn.send(("error", said(exc), traceback.format_exc()))
    finally:
        conn.close()


def said(exc: BaseException) -> str:
    """An exception's type and its message's first line (torch appends a traceback to its messages)."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {first}"


# seconds a rank waits for the others to join, and for any one gloo call: a rank whose peers never connect (a
# network that drops their TCP) fails with torch's error after this, not after torch's 30 minutes a call
RENDEZVOUS = 300.0


def join_group(cfg, rank: int, store_port: int) -> None:
    """Join the ranks' gloo process group at cfg.store (or this machine's `store_port`), waiting at most
    RENDEZVOUS (or the bucket deadline, where longer) for the others and for each call after."""
    import datetime

    import torch.distributed as dist

    store = cfg.store or ("127.0.0.1", store_port)
    dist.init_process_group("gloo", init_method=f"tcp://{store[0]}:{store[1]}", rank=rank, world_size=cfg.workers,
                            timeout=datetime.timedelta(seconds=max(RENDEZVOUS, cfg.deadline)))


def train(cfg: RunConfig, rank: int, store_port: int) -> list[dict[str, Any]]:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    torch.set_num_threads(cfg.threads)
    join_group(cfg, rank, store_port)
    hook = transport = None
    try:
        model, batch_loss = build(cfg)
        ddp = DistributedDataParallel(model, bucket_cap_mb=cfg.bucket_mb)
        hook, hook_fn, transport = make_hook(cfg, rank)
        ddp.register_comm_hook(hook, hook_fn)
        steps_done = [0]
        if cfg.nan_at is not None and cfg.nan_at[0] == rank:
            nan_step = cfg.nan_at[1]
            next(model.parameters()).register_hook(lambda g: g * float("nan") if steps_done[0] == nan_step else g)
        dist.barrier()  # every rank has joined the switch before any gradient is sent
        opt = torch.optim.SGD(ddp.parameters(), lr=cfg.lr)
        records = []
        for step in range(cfg.steps):
            rng = np.random.default_rng([cfg.seed, rank, step])  # the same batches for every backend
            start = time.perf_counter()
            opt.zero_grad(set_to_none=False)
            loss = batch_loss(ddp, rng)
            forward = time.perf_counter()
            loss.backward()
            backward = time.perf_counter()
            opt.step()
            end = time.perf_counter()
            steps_done[0] += 1
            rec = {"step": step, "loss": float(loss.detach()), "seconds": end - start,
                   "forward": forward - start, "backward": backward - forward, "digest": digest(model)}
            rep = hook.pop_step()
            rec["comm"], rec["bytes"] = rep["span"], rep["bytes"]  # bytes: this rank's payload
            if cfg.backend in MODE_OF:
                rec.update({k: rep[k] for k in ("wire_bytes", "retransmissions", "encode", "network", "decode",
                                                "encodings")})
                rec["buckets"] = [b["elements"] for b in rep["buckets"]]
                rec["transport"] = type(hook.worker.transport).__name__
            records.append(rec)
        return records
    finally:
        if hook is not None:
            hook.close()
        if transport is not None:
            transport.close()
        dist.destroy_process_group()


def make_hook(cfg, rank: int):
    """The backend's DDP communication hook for this rank: (its state, the hook function, a transport to close
    or None).  hina's joins the switch; a baseline's is its registry entry's (hina.baselines.registry), given
    the run's config (time_to_accuracy.py's too: the fields it reads have the same names)."""
    if cfg.backend not in MODE_OF:
        from hina.baselines import lossy_hooks, registry

        return registry.get(cfg.backend).hook(rank, cfg.workers, asdict(cfg)), lossy_hooks.lossy_allreduce_hook, None
    from hina.host import JobSpec
    from hina.host.ddp import SwitchAllreduce, switch_allreduce_hook

    transport = None
    if cfg.hosts is not None:  # a Mininet host: the switch already authorizes this host's port
        from hina.host.transport import open_transport

        me = cfg.hosts[rank]
        transport = open_transport(cfg.switch[0], kind=cfg.transport, ifname=me["ifname"], src_mac=me["mac"],
                                   src_ip=me["ip"], switch_mac=cfg.switch_mac)
    hook = SwitchAllreduce.connect(
        cfg.switch, rank, cfg.workers, control=cfg.control, deadline=cfg.deadline, transport=transport,
        job=JobSpec(job_id=cfg.job_id, words=cfg.words, slots=cfg.slots), mode=MODE_OF[cfg.backend],
        link_gbps=cfg.link_gbps)
    return hook, switch_allreduce_hook, transport


# -- orchestration -----------------------------------------------------------------------------------------

def tuples_again(cfg: dict[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    """A config dataclass's `asdict` back from JSON: these fields' lists as the tuples they were."""
    return {**cfg, **{k: tuple(cfg[k]) for k in fields if cfg.get(k) is not None}}


def run(cfg: RunConfig, *, timeout: float = 600.0, target=None) -> dict[str, Any]:
    """Spawn cfg.workers ranks, wait for them; every rank's steps, or the errors they raised.

    target: what each rank runs, `target(cfg, rank, store_port, conn)` (default `run_rank`; another
    benchmark's own, with its own config dataclass)."""
    ctx = mp.get_context("spawn")
    port, = free_tcp_ports()
    procs, conns = [], []
    for rank in range(cfg.workers):
        parent, child = ctx.Pipe(duplex=False)
        p = ctx.Process(target=target or run_rank, args=(cfg, rank, port, child), daemon=True)
        p.start()
        child.close()
        procs.append(p)
        conns.append(parent)
    ranks, errors = [], []
    end = time.monotonic() + timeout
    for rank, conn in enumerate(conns):
        if not conn.poll(max(0.0, end - time.monotonic())):
            errors.append(f"rank {rank}: said nothing within {timeout:g} s")
            ranks.append(None)
            continue
        try:
            msg = conn.recv()
        except EOFError:
            msg = ("error", "died without a report", "")
        if msg[0] == "done":
            ranks.append(msg[1])
        else:
            ranks.append(None)
            errors.append(f"rank {rank}: {msg[1]}")
    for p in procs:
        p.join(timeout=10)
        if p.is_alive():
            p.terminate()
    return {"config": asdict(cfg), "ranks": ranks, "errors": errors}


def summarize(result: dict[str, Any], gloo: dict[str, Any] | None = None) -> dict[str, Any]:
    """Per step: mean loss, slowest rank's seconds, identical parameters; the steady state after step 0."""
    ranks = result["ranks"]
    if result["errors"] or not ranks:
        return {"errors": result["errors"]}
    steps = len(ranks[0])
    per_step = []
    for s in range(steps):
        recs = [r[s] for r in ranks]
        row = {"step": s, "loss": statistics.fmean(r["loss"] for r in recs),
               "seconds": max(r["seconds"] for r in recs), "comm": max(r["comm"] for r in recs),
               "identical": len({r["digest"] for r in recs}) == 1, "bytes": recs[0]["bytes"]}
        for key in ("wire_bytes", "encode", "network", "decode", "encodings", "retransmissions"):
            if key in recs[0]:
                row[key] = recs[0][key] if key == "encodings" else max(r[key] for r in recs)
        if gloo is not None and not gloo["errors"]:
            row["loss_diff"] = max(abs(r[s]["loss"] - g[s]["loss"]) for r, g in zip(ranks, gloo["ranks"]))
        per_step.append(row)
    steady = per_step[1:] or per_step  # step 0 pays first-use costs (buffers, DDP's bucket rebuild)
    out = {"steps": per_step, "identical_every_step": all(r["identical"] for r in per_step),
           "seconds_per_iteration": statistics.median(r["seconds"] for r in steady),
           "comm_seconds": statistics.median(r["comm"] for r in steady), "errors": []}
    if "wire_bytes" in per_step[-1]:
        out["wire_bytes_per_step"] = statistics.median(r["wire_bytes"] for r in steady)
        out["encodings"] = per_step[-1]["encodings"]
        for key in ("encode", "network", "decode"):
            out[f"{key}_seconds"] = statistics.median(r[key] for r in steady)
    if any("loss_diff" in r for r in per_step):
        out["loss_diff_per_step"] = [r.get("loss_diff") for r in per_step]
        out["loss_diff_max"] = max(r.get("loss_diff", 0.0) for r in per_step)
    return out


def remove_job(control: tuple[str, int], job_id: int) -> None:
    from hina.control.client import ControlClient, ControlError

    with ControlClient(control) as ctl:
        try:
            ctl.remove_job(job_id)
        except ControlError:
            pass  # no rank got as far as joining: nothing to remove


def _started(bar, log, what: str) -> None:
    """A run begins: the progress bar's step (a line in a log), or a log line without one."""
    if bar is not None:
        bar.start(what)
    else:
        log(what)


def run_loopback(configs: list[RunConfig], pipes: int, timeout: float, log, bar=None,
                 target=None) -> list[dict[str, Any]]:
    """Every run on loopback: one emulator process for all, a fresh job (slots emptied) for each hina run;
    `bar` (hina.progress.Progress): a step per run; `target`: what each rank runs (`run`'s)."""
    from hina.host.demo import DemoConfig, start_switch

    switch, where = start_switch(DemoConfig(workers=1, pipes=pipes)) if any(
        c.backend in MODE_OF for c in configs) else (None, None)
    results = []
    try:
        for job_id, cfg in enumerate(configs, start=1):
            if where is not None and cfg.backend in MODE_OF:
                cfg = replace(cfg, job_id=job_id, switch=tuple(where["data"]), control=tuple(where["control"]))
            _started(bar, log, f"{cfg.model}, {cfg.workers} workers, {cfg.backend}, loopback: {cfg.steps} steps ...")
            results.append(run(cfg, timeout=timeout, target=target))
            if bar is not None:
                bar.done()
            if cfg.backend in MODE_OF:
                remove_job(cfg.control, job_id)  # its slots are free for the next run's job
    finally:
        if switch is not None:
            switch.terminate()
            switch.wait(5)
    return results


def run_mininet(configs: list[RunConfig], args: argparse.Namespace, log, bar=None,
                script: Path | None = None) -> list[dict[str, Any]]:
    """The runs of one worker count on Mininet (as root), one rank per host, the same links for every backend.

    hina's runs: hina_net's star around the switch (emulator or BMv2), job reset before each run.
    gloo's: plain_star's star around a Linux bridge; through the emulator, which forwards other traffic
    in Python, gloo's TCP would measure the emulator.  gloo runs first (the others compare with it).
    """
    from hina.mininet import hina_net

    gloo = [(i, c) for i, c in enumerate(configs) if c.backend not in MODE_OF]  # gloo (or another's baselines)
    hina = [(i, c) for i, c in enumerate(configs) if c.backend in MODE_OF]
    results: dict[int, dict[str, Any]] = {}
    if gloo:
        results.update(run_gloo_plain_star(gloo, args, log, bar, script=script))

    class DdpExperiment(hina_net.Experiment):
        """hina_net's star and switch; each "mode" is one training run, its ranks on the hosts."""

        def _aggregate(self, mode: str, topology) -> dict[str, Any]:
            from hina.wire.headers import UDP_PORT

            index, cfg = hina[int(mode)]
            job = self.cfg.job
            self.switch.target.reset_job(job.job_id)  # every run starts with empty slot copies
            hosts = self._hosts()
            cfg = replace(cfg, job_id=job.job_id, words=job.words, slots=job.slots, control=None,
                          switch=(hina_net.SWITCH_IP, UDP_PORT), switch_mac=hina_net.SWITCH_MAC,
                          store=(hina_net.host_ip(1), 29500 + index), transport=args.transport,
                          link_gbps=args.bw / 1000 if args.bw else cfg.link_gbps,
                          hosts=tuple({"ifname": h.defaultIntf().name, "mac": hina_net.host_mac(i),
                                       "ip": hina_net.host_ip(i)} for i, h in enumerate(hosts, start=1)))
            _started(bar, log, f"{cfg.model}, {cfg.workers} workers, {cfg.backend}, Mininet {args.switch} at "
                               f"{args.bw or 'unshaped'} Mbit/s: {cfg.steps} steps ...")
            out = launch_on_hosts(hosts, cfg, args.timeout, script=script)
            if bar is not None:
                bar.done()
            return out

    if hina:
        ecfg = hina_net.ExperimentConfig(workers=configs[0].workers, switch=args.switch,
                                         modes=tuple(str(i) for i in range(len(hina))), bw=args.bw or None,
                                         slots=args.slots, seed=configs[0].seed, deadline=args.deadline,
                                         transport=args.transport, ping=False)
        out = DdpExperiment(ecfg, log=log).run()
        results.update({index: res for (index, _), res in zip(hina, out["runs"])})
    return [results[i] for i in range(len(configs))]


def run_gloo_plain_star(runs: list[tuple[int, RunConfig]], args: argparse.Namespace, log,
                        bar=None, script: Path | None = None) -> dict[int, dict]:
    """gloo's runs on plain_star's bridge star: hina_net's links (their rate, and the MTU hina's switch runs:
    9000, or the XDP switch's 3506), host 1 the rendezvous."""
    from mininet.log import setLogLevel
    from mininet.net import Mininet
    from mininet.nodelib import LinuxBridge

    from hina.mininet import fidelity, hina_net, plain_star
    from hina.mininet.targets import default_mtu

    problem = hina_net.missing_requirements()
    if problem:
        raise RuntimeError(problem)
    names = plain_star.Names(hina_net.new_run_id())
    setLogLevel("critical")
    link = {"cls": hina_net.FastTCLink, **({"bw": args.bw} if args.bw else {})}
    net = Mininet(topo=plain_star.PlainStarTopo(workers=runs[0][1].workers, link=link, names=names),
                  switch=LinuxBridge, controller=None, link=hina_net.FastTCLink, build=True)
    results = {}
    monitor = None
    try:
        net.start()
        monitor = fidelity.monitor_for(net, label=names.label).start()
        hosts = [net[names.host(i)] for i in range(1, runs[0][1].workers + 1)]
        for h in hosts:
            intf = h.defaultIntf()
            peer = intf.link.intf2 if intf.link.intf1 is intf else intf.link.intf1
            h.cmd(f"ip link set dev {intf.name} mtu {default_mtu(args.switch)}")
            net[names.bridge].cmd(f"ip link set dev {peer.name} mtu {default_mtu(args.switch)}")
        for index, cfg in runs:
            cfg = replace(cfg, store=(plain_star.host_ip(1), 29500 + index),
                          hosts=tuple({"ifname": h.defaultIntf().name} for h in hosts))
            _started(bar, log, f"{cfg.model}, {cfg.workers} workers, {cfg.backend}, Mininet bridge at "
                               f"{args.bw or 'unshaped'} Mbit/s: {cfg.steps} steps ...")
            start = monitor.mark().t
            results[index] = launch_on_hosts(hosts, cfg, args.timeout, script=script)
            results[index]["fidelity"] = monitor.judge_window(start, monitor.mark().t)  # the whole training run
            log(fidelity.verdict_line(f"[{cfg.model} {cfg.backend}]", results[index]["fidelity"]))
            if bar is not None:
                bar.done()
    finally:
        if monitor is not None:
            monitor.stop()
        with contextlib.suppress(Exception):
            net.stop()
        plain_star.cleanup(names.run)
    return results


def launch_on_hosts(hosts, cfg: RunConfig, timeout: float, script: Path | None = None) -> dict[str, Any]:
    """One rank per Mininet host (`script --rank-spec SPEC --rank R`, default this script); every rank's steps,
    or the errors they reported."""
    with tempfile.TemporaryDirectory(prefix="hina-ddp-") as tmp:
        spec = Path(tmp) / "run.json"
        spec.write_text(json.dumps(asdict(cfg)))
        errs = [open(Path(tmp) / f"rank{r}.err", "w+") for r in range(cfg.workers)]
        procs = [h.popen([sys.executable, str(script or ROOT / "benchmarks" / "train_ddp.py"), "--rank-spec", str(spec),
                          "--rank", str(r)], stdout=subprocess.PIPE, stderr=errs[r], text=True, cwd=ROOT)
                 for r, h in enumerate(hosts)]
        ranks, errors = [], []
        end = time.monotonic() + timeout
        for r, p in enumerate(procs):
            try:
                out, _ = p.communicate(timeout=max(1.0, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                out = json.dumps({"error": f"no report within {timeout:g} s"})
            lines = out.strip().splitlines()
            msg = json.loads(lines[-1]) if lines else {"error": "exited without a report"}
            if "records" in msg:
                ranks.append(msg["records"])
            else:
                ranks.append(None)
                errs[r].seek(0)
                last = (errs[r].read().strip().splitlines() or [""])[-1]
                errors.append(f"rank {r}: {msg['error']}" + (f" ({last})" if last and last not in msg["error"] else ""))
        for f in errs:
            f.close()
    return {"config": asdict(cfg), "ranks": ranks, "errors": errors}


def rank_main(spec: Path, rank: int, config=None, trainer=None) -> int:
    """One rank of a Mininet run (--rank-spec): train, print one JSON line: {"records": [...]} or {"error": ...}.
    config, trainer: the run's config class and what trains (default RunConfig and `train`; time_to_accuracy.py
    passes its own)."""
    try:
        cfg = (config or RunConfig).from_config(json.loads(spec.read_text()))
        if cfg.hosts is not None:  # gloo's own traffic leaves by this host's one interface
            os.environ.setdefault("GLOO_SOCKET_IFNAME", cfg.hosts[rank]["ifname"])
        print(json.dumps({"records": (trainer or train)(cfg, rank, 0)}), flush=True)
        return 0
    except BaseException as exc:
        traceback.print_exc()
        print(json.dumps({"error": said(exc)}), flush=True)
        return 1


def summarize_all(results: list[dict[str, Any]], log) -> tuple[list[dict[str, Any]], bool]:
    """Each run's summary, hina runs against the gloo run of the same model and worker count."""
    runs, failed, gloo = [], False, {}
    for res in results:
        cfg = res["config"]
        key = (cfg["model"], cfg["workers"])
        summary = summarize(res, gloo.get(key) if cfg["backend"] != "gloo" else None)
        if cfg["backend"] == "gloo":
            gloo[key] = res
        what = f"{cfg['model']}, {cfg['workers']} workers, {cfg['backend']}"
        if summary["errors"]:
            failed = True
            log(f"{what}: FAILED: {'; '.join(summary['errors'])}")
        else:
            log(f"{what}: {summary['seconds_per_iteration']:.3f} s/iteration, comm {summary['comm_seconds']:.3f} s, "
                f"identical parameters every step: {summary['identical_every_step']}"
                + (f", largest loss difference to gloo {summary['loss_diff_max']:.2e}"
                   if "loss_diff_max" in summary else ""))
        runs.append({"model": cfg["model"], "workers": cfg["workers"], "backend": cfg["backend"], "config": cfg,
                     "summary": summary, "ranks": res["ranks"],
                     **({"fidelity": res["fidelity"]} if "fidelity" in res else {})})
    return runs, failed


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The flags, and from them `sweeps`: per worker count, every model's run with every backend (gloo's first:
    the others compare with it), each config checked as it is made."""
    from hina.cliargs import OneLineParser
    from hina.provenance import OUT_RULE, default_out, out_path

    ap = OneLineParser(prog="train_ddp.py", description=__doc__.split("\n\n")[0],
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--workers", type=int, nargs="+", default=[4], help="ranks per run (several: one sweep each)")
    ap.add_argument("--steps", type=int, default=20, help="training steps per run")
    ap.add_argument("--models", type=csv(MODELS), default=",".join(MODELS), help="comma-separated: lstm, ncf")
    ap.add_argument("--backends", type=csv(backends()), default=",".join(DEFAULT_BACKENDS),
                    help="comma-separated: " + ", ".join(backends()))
    ap.add_argument("--env", choices=("loopback", "mininet"), default="loopback",
                    help="loopback: the emulator as a UDP server on 127.0.0.1; mininet (root): a star of hosts")
    ap.add_argument("--switch", choices=TARGETS, default="emulator",
                    help="the Mininet star's switch: the Python emulator, BMv2 or the XDP switch (--env mininet)")
    ap.add_argument("--bw", type=float, default=1000.0, help="Mbit/s per Mininet link, 0: unshaped (--env mininet)")
    ap.add_argument("--transport", choices=("auto", "udp", "raw"), default="auto",
                    help="hina's transport on Mininet hosts: UDP when routed (auto), or raw frames")
    ap.add_argument("--scale", type=float, default=1.0,
                    help="model size factor in (0, 1] (1: capture_torch.py's tables and batches)")
    ap.add_argument("--seed", type=int, default=0, help="parameters and batches")
    ap.add_argument("--lr", type=float, default=0.1, help="SGD learning rate")
    ap.add_argument("--bucket-mb", type=float, default=25.0, help="DDP's bucket_cap_mb")
    ap.add_argument("--deadline", type=float, default=30.0, help="seconds one bucket may take through the switch")
    ap.add_argument("--words", type=int, default=DEFAULT_WORDS,
                    help=f"words per packet K on loopback (Mininet: the star's, {DEFAULT_WORDS} emulator, "
                         f"{P4_WORDS} BMv2)")
    ap.add_argument("--slots", type=int, default=DEFAULT_SLOTS, help="packets in flight per worker W")
    ap.add_argument("--link-gbps", type=float, default=10.0,
                    help="the link rate auto's cost model assumes on loopback (Mininet: --bw)")
    ap.add_argument("--pipes", type=int, default=1, help="the loopback emulator's data plane processes")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds one run may take")
    ap.add_argument("--out", type=out_path, default=default_out("train_ddp.json"),
                    help=f"the JSON written, the PNG beside it (same stem); when not given, train_ddp.json in "
                         f"{OUT_RULE} (benchmarks/results/, the committed figures, only when named here)")
    ap.add_argument("--rank-spec", type=Path, help="internal: run one rank of a Mininet run from this spec file")
    ap.add_argument("--rank", type=int, default=0, help="internal: the rank --rank-spec runs")
    args = ap.parse_args(argv)
    if args.rank_spec is not None:
        return args
    try:
        order = sorted(args.backends, key=lambda b: b != "gloo")
        args.sweeps = [[RunConfig(model=m, backend=b, workers=n, steps=args.steps, seed=args.seed, lr=args.lr,
                                  scale=args.scale, bucket_mb=args.bucket_mb, deadline=args.deadline,
                                  words=args.words, slots=args.slots, link_gbps=args.link_gbps, threads=args.threads,
                                  transport=args.transport)
                        for m in args.models for b in order] for n in args.workers]
        if args.pipes < 1:
            raise ValueError(f"--pipes must be at least 1, got {args.pipes}")
        if args.bw < 0:
            raise ValueError(f"--bw must be >= 0, got {args.bw}")
    except ValueError as exc:
        ap.error(str(exc))
    return args


def run_sweeps(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every sweep's runs, on loopback or Mininet, under one progress bar (a step per run)."""
    from hina.progress import Progress

    results = []
    with Progress(sum(len(configs) for configs in args.sweeps), "train_ddp") as bar:
        for configs in args.sweeps:
            if args.env == "loopback":
                results += run_loopback(configs, args.pipes, args.timeout, bar.print, bar)
            else:
                results += run_mininet(configs, args, bar.print, bar)
    return results


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.rank_spec is not None:
        return rank_main(args.rank_spec, args.rank)
    try:
        import torch
    except ImportError:
        print("train_ddp.py needs PyTorch: pip install -e '.[torch]' (CPU build)", file=sys.stderr)
        return 2
    from hina.provenance import command_line, write_result

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    runs, failed = summarize_all(run_sweeps(args), log)
    env = "loopback" if args.env == "loopback" else (
        f"mininet at {args.bw or 'unshaped'} Mbit/s: hina through the {args.switch}, gloo through a Linux bridge")
    report = write_result(args.out, {"env": env, "runs": runs, "table": table(runs)},
                          command_line("benchmarks/train_ddp.py", argv), torch=torch.__version__)
    print(format_table(report["table"]))
    png = args.out.with_suffix(".png")
    if plot(runs, png):
        log(f"wrote {args.out} and {png}")
    else:
        log(f"wrote {args.out} (no PNG: matplotlib is missing, pip install -e '.[plot]')")
    return 1 if failed else 0


def table(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per run: seconds per iteration and communication, speedups of hina over gloo and dense."""
    by = {(r["model"], r["workers"], r["backend"]): r["summary"] for r in runs}
    rows = []
    for r in runs:
        s = r["summary"]
        if s["errors"]:
            rows.append({"model": r["model"], "workers": r["workers"], "backend": r["backend"], "error": s["errors"]})
            continue
        row = {"model": r["model"], "workers": r["workers"], "backend": r["backend"],
               "seconds_per_iteration": s["seconds_per_iteration"], "comm_seconds": s["comm_seconds"],
               "identical_every_step": s["identical_every_step"], "encodings": s.get("encodings"),
               "wire_bytes_per_step": s.get("wire_bytes_per_step"), "loss_diff_max": s.get("loss_diff_max"),
               "fidelity": r["fidelity"]["verdict"] if "fidelity" in r else None}
        for other in ("gloo", "hina-dense"):
            o = by.get((r["model"], r["workers"], other))
            if o and not o["errors"] and r["backend"] != other:
                row[f"speedup_vs_{other}"] = o["seconds_per_iteration"] / s["seconds_per_iteration"]
                row[f"comm_speedup_vs_{other}"] = o["comm_seconds"] / s["comm_seconds"]
        rows.append(row)
    return rows


def format_table(rows: list[dict[str, Any]]) -> str:
    lines = ["| model | workers | backend | s/iteration | comm s | vs gloo (iter / comm) | vs hina-dense (iter / comm) "
             "| identical | max loss diff vs gloo | encodings | fidelity (Mininet: the whole run) |", "|---" * 11 + "|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['workers']} | {r['backend']} | failed: {'; '.join(r['error'])} |")
            continue

        def speed(other):
            return (f"{r[f'speedup_vs_{other}']:.2f}x / {r[f'comm_speedup_vs_{other}']:.2f}x"
                    if f"speedup_vs_{other}" in r else "")

        enc = ", ".join(sorted(set(r["encodings"]))) if r["encodings"] else ""
        diff = f"{r['loss_diff_max']:.2e}" if r["loss_diff_max"] is not None else ""
        lines.append(f"| {r['model']} | {r['workers']} | {r['backend']} | {r['seconds_per_iteration']:.3f} | "
                     f"{r['comm_seconds']:.3f} | {speed('gloo')} | {speed('hina-dense')} | "
                     f"{'yes' if r['identical_every_step'] else 'NO'} | {diff} | {enc} | "
                     f"{r.get('fidelity') or 'n/a (loopback)'} |")
    return "\n".join(lines)


def plot(runs: list[dict[str, Any]], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    keys = sorted({(r["model"], r["workers"]) for r in runs})
    fig, axes = plt.subplots(len(keys), 3, figsize=(16, 3.2 * len(keys)), squeeze=False)
    for row, (model, n) in enumerate(keys):
        for r in runs:
            if (r["model"], r["workers"]) != (model, n) or r["summary"]["errors"]:
                continue
            steps = r["summary"]["steps"]
            axes[row][0].plot([s["step"] for s in steps], [s["loss"] for s in steps], label=r["backend"],
                              color=color_of(r["backend"]), linestyle="-" if r["backend"] in MODE_OF else "--")
            axes[row][1].plot([s["step"] for s in steps], [s["seconds"] for s in steps], marker=".",
                              label=r["backend"], color=color_of(r["backend"]))
            if "loss_diff" in steps[0]:
                axes[row][2].plot([s["step"] for s in steps], [s["loss_diff"] for s in steps], marker="o",
                                  label=r["backend"], color=color_of(r["backend"]))
        axes[row][0].set(title=f"{model}, {n} workers: mean loss", xlabel="step", ylabel="loss")
        axes[row][1].set(title=f"{model}, {n} workers: seconds per iteration (slowest rank)", xlabel="step",
                         ylabel="seconds", ylim=(0, None))
        axes[row][2].set(title=f"{model}, {n} workers: largest |loss - gloo's loss| over ranks", xlabel="step",
                         ylabel="loss difference")
        for ax in axes[row]:
            ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def csv(choices):
    def parse(text: str) -> list[str]:
        items = [t for t in text.split(",") if t]
        bad = [t for t in items if t not in choices]
        if bad or not items:
            raise argparse.ArgumentTypeError(f"choose from {', '.join(choices)}, got {text!r}")
        return items

    return parse


if __name__ == "__main__":
    sys.exit(main())
