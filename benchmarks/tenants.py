"""Several jobs through one switch at once, and a job that meets a full switch (Mininet, root).

The cluster of the deployment guide (mininet/deploy.py): M worker machines and a server on one Linux bridge,
every link at --bw Mbit/s, the emulator as a UDP server on the server.  Every job has one rank on each
machine, each rank a `hina worker` process that joins at the control port, where the switch chooses the
job's slots, and leaves when it is done; the jobs' gradients are model-shaped (compare.py's presets at small
scales, a different preset per job), so their ranks share every machine's link and all of them the
server's: the busiest link.

**Sharing** (`--jobs 2 4 8`): each job alone, then J jobs at once, each running rounds for about as long
as the slowest alone takes for 3.  Per job: its median round alone and beside the others, the slowdown,
every sum exact; over the jobs: Jain's fairness index of the slowdowns, the worst slowdown over the jobs
sharing (twice that is "twice its share"), the server link's load (the bytes all workers sent while the
jobs ran, against its rate), and the fidelity monitor's verdict; the slots each job held over time
(`hina switch jobs --watch`), plotted.

**A full switch** (`--full`): a switch of 96 slots (`--slot-space 96 --slot-policy request`); job A holds
64 of them and runs; job B asks for 64 and answers as its `--when-full` says: refuse (the one-line
refusal, and how long it took), fewer (it runs on the 32 free, at least 16; then again with one of A's
ranks stopped mid-round, A stalled), wait (in line until A's last worker leaves: how long it waited
against A's end); then, with A holding its slots again, a DDP job
of `examples/ddp_torchrun.py --host-fallback` trains on the hosts (gloo) instead, every rank identical.

**Two jobs through a star's switch** (`--star emulator bmv2 xdp`): Mininet's star of 3 hosts, each with a
rank of both jobs, through the emulator's raw-frame backend, through BMv2, which the controller gives
each job at run time, and through the XDP switch (both jobs' slots in its maps, the rules in the kernel);
dense and auto under 1% loss, each job's sum checked.  The sharing and full-switch runs are the emulator's:
their switch is a UDP server on a machine of the cluster, which the XDP switch is not (it serves workers
behind its ports).

    sudo .venv/bin/python benchmarks/tenants.py --jobs 2 4 8 --full --star emulator bmv2 xdp \\
        --out benchmarks/results/tenants.json

Writes the JSON (--out) and a PNG beside it.
"""

from __future__ import annotations

import json
import math
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from hina import codec
from hina.cliargs import OneLineParser, between, positive
from hina.control.fabric import TARGETS
from hina.host.synthetic import workload_preset
from hina.progress import Progress
from hina.provenance import command_line, default_out, out_help, out_path, write_result

PRESETS = ("lstm", "ncf", "deeplight", "bert_base")  # one per job, in turn
SCALES = {"lstm": 0.01, "ncf": 0.005, "deeplight": 0.007, "bert_base": 0.01}  # a few MB per worker at most
FULL_SPACE, FULL_ASK, FULL_LEAST = 96, 64, 16  # the full switch: its slots, what each job asks, B's least
STAR_LENGTH = 40_000  # elements per worker of the two jobs through a star's switch (--star)


class Steps:
    """The progress bar's steps, one after another (`Progress.start` / `done`)."""

    def __init__(self, bar: Progress):
        self.bar, self.under_way = bar, False

    def step(self, label: str) -> None:
        self.finish()
        self.bar.start(label)
        self.under_way = True

    def finish(self) -> None:
        if self.under_way:
            self.bar.done()
            self.under_way = False


def jain(xs: list[float]) -> float:
    """Jain's fairness index: 1 when all equal, 1/n when one takes everything."""
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs)) if xs else float("nan")


class Job:
    """A job of the benchmark: its id, preset, and each rank's gradient (a .npy file) on disk."""

    def __init__(self, job_id: int, preset: str, ranks: int, folder: Path, seed: int):
        self.job_id, self.preset, self.ranks = job_id, preset, ranks
        workload = workload_preset(preset, SCALES[preset])
        self.grads = [workload.gradient(seed + job_id, r) for r in range(ranks)]
        self.files = []
        for r, g in enumerate(self.grads):
            path = folder / f"job{job_id}-rank{r}.npy"
            np.save(path, g)
            self.files.append(path)
        self.folder = folder

    @property
    def elements(self) -> int:
        return int(self.grads[0].size)

    def exact(self, reports: list[dict]) -> bool:
        """Every rank's sum (float64 in its --out file) is numpy's sum of the quantized gradients, bit for bit."""
        for r, rep in enumerate(reports):
            shift = rep["rounds"][-1]["shift"]
            total = np.zeros(self.elements, np.int64)
            for g in self.grads:
                total += codec.quantize(g, shift)
            want = total.astype(np.int32).astype(np.float64) / 2.0 ** shift
            if not np.array_equal(np.load(self.folder / f"sum-{self.job_id}-{r}.npy"), want):
                return False
        return True


def worker_command(cluster, job: Job, rank: int, rounds: int, extra: tuple[str, ...] = ()) -> list[str]:
    from hina.mininet.deploy import CONTROL_PORT
    from hina.wire.headers import UDP_PORT

    link = [] if not cluster.bw else ["--link-gbps", f"{cluster.bw / 1000:g}"]
    return [sys.executable, "-m", "hina", "worker", "--switch", f"{cluster.switch_ip}:{UDP_PORT}",
            "--control", f"{cluster.switch_ip}:{CONTROL_PORT}", "--rank", str(rank), "--workers", str(job.ranks),
            "--job-id", str(job.job_id), "--input", str(job.files[rank]), "--out",
            str(job.folder / f"sum-{job.job_id}-{rank}.npy"), "--out-dtype", "float64", "--rounds", str(rounds),
            "--deadline", "120", "--json", *link, *extra]


def launch(cluster, job: Job, rounds: int, extra: tuple[str, ...] = ()) -> list[subprocess.Popen]:
    """Job `job`'s ranks, rank r on machine r mod M (the machines' ranks in turn)."""
    return [cluster.machines[r % len(cluster.machines)].popen(worker_command(cluster, job, r, rounds, extra),
                                                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                                              text=True)
            for r in range(job.ranks)]


def collect(procs: list[subprocess.Popen], timeout: float = 900.0) -> list[dict]:
    """Each process's JSON summary, or {"error": its last line of stderr, "status": its exit status}."""
    out, deadline = [], time.monotonic() + timeout
    for p in procs:
        try:
            stdout, stderr = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            stdout, stderr = p.communicate()
        lines = [line for line in stdout.splitlines() if line.startswith("{")]
        if p.returncode == 0 and lines:
            out.append({**json.loads(lines[-1]), "stderr": stderr[-2000:]})
        else:
            tail = [line for line in stderr.strip().splitlines() if line.strip()]
            out.append({"error": tail[-1] if tail else f"exit {p.returncode}", "status": p.returncode,
                        "stderr": stderr[-2000:]})
    return out


def rounds_of(reports: list[dict]) -> list[dict]:
    """The job's rounds: each one's start (the earliest rank's), end (the latest rank's) and seconds."""
    count = min(len(r["rounds"]) for r in reports)
    out = []
    for k in range(count):
        starts = [r["rounds"][k]["start"] for r in reports]
        ends = [r["rounds"][k]["start"] + r["rounds"][k]["seconds"] for r in reports]
        out.append({"start": min(starts), "end": max(ends), "seconds": max(ends) - min(starts),
                    "wire_bytes": sum(r["rounds"][k]["wire_bytes"] for r in reports),
                    "resent": sum(r["rounds"][k]["retransmissions"] for r in reports)})
    return out


def run_jobs(cluster, jobs: list[Job], rounds: dict[int, int], extra: dict[int, tuple] | None = None) -> dict:
    """The jobs at once (each its `rounds`), every sum checked; per job its rounds and slot range."""
    procs = {job.job_id: launch(cluster, job, rounds[job.job_id], (extra or {}).get(job.job_id, ()))
             for job in jobs}
    result = {}
    for job in jobs:
        reports = collect(procs[job.job_id])
        failed = [r for r in reports if "error" in r]
        result[job.job_id] = ({"ok": False, "errors": [r["error"] for r in failed]} if failed else
                              {"ok": True, "exact": job.exact(reports), "rounds": rounds_of(reports),
                               "slots": reports[0]["job"]})
    return result


def median_round(run: dict) -> float:
    return statistics.median(r["seconds"] for r in run["rounds"])


class Watch:
    """`hina switch jobs --json --watch` on the server: the slots each job held over time."""

    def __init__(self, cluster, period: float = 0.2):
        from hina.mininet.deploy import CONTROL_PORT

        # into a file: a pipe nobody reads until the end holds 64 KiB, a few seconds of 8 jobs' listings
        self.path = Path(cluster.tmp) / f"watch-{time.monotonic_ns()}.jsonl"
        self.file = self.path.open("w")
        self.proc = cluster.server.popen([sys.executable, "-m", "hina", "switch", "jobs", "--json", "--watch",
                                          str(period), "--control", f"{cluster.switch_ip}:{CONTROL_PORT}"],
                                         stdout=self.file, stderr=subprocess.DEVNULL, text=True)

    def stop(self) -> list[dict]:
        self.proc.terminate()
        self.proc.wait(timeout=10)
        self.file.close()
        samples = []
        for line in self.path.read_text().splitlines():
            try:
                snap = json.loads(line)
            except ValueError:
                continue  # a line cut by the signal
            samples.append({"t": snap["t"], "jobs": [[j["job_id"], j["slot_base"], j["slots"]] for j in snap["jobs"]]})
        return samples


def sharing(cluster, counts: list[int], seed: int, progress) -> dict:
    """Each job alone, then 2, 4, 8 ... of them at once."""
    most = max(counts)
    jobs = [Job(11 + j, PRESETS[j % len(PRESETS)], len(cluster.machines), cluster.tmp, seed) for j in range(most)]
    alone = {}
    for job in jobs:
        progress.step(f"job {job.job_id} ({job.preset}) alone")
        run = cluster.judged(f"job {job.job_id} alone", lambda j=job: run_jobs(cluster, [j], {j.job_id: 3})[j.job_id])
        alone[job.job_id] = run
        if not run["ok"]:
            raise RuntimeError(f"job {job.job_id} alone failed: {run['errors']}")
    out = {"alone": {j: {"preset": job.preset, "elements": job.elements, "seconds": median_round(alone[j]),
                         "resent": [r["resent"] for r in alone[j]["rounds"]],
                         "sent": [r["wire_bytes"] for r in alone[j]["rounds"]],
                         "exact": alone[j]["exact"], "fidelity": alone[j].get("fidelity", {}).get("verdict")}
                     for j, job in ((job.job_id, job) for job in jobs)}, "together": []}
    for count in counts:
        progress.step(f"{count} jobs at once")
        these = jobs[:count]
        span = 3 * max(out["alone"][j.job_id]["seconds"] for j in these)
        rounds = {j.job_id: max(3, math.ceil(span / out["alone"][j.job_id]["seconds"])) for j in these}
        watch = Watch(cluster)
        runs = cluster.judged(f"{count} jobs at once", lambda these=these, rounds=rounds: {
            "jobs": run_jobs(cluster, these, rounds)})
        occupancy = watch.stop()
        per_job, failed = [], []
        for job in these:
            run = runs["jobs"][job.job_id]
            if not run["ok"]:  # a rank gave up at its deadline (never a wrong sum): shown as it failed
                failed.append({"job_id": job.job_id, "preset": job.preset, "error": run["errors"][0]})
                progress.bar.print(f"{count} jobs at once: job {job.job_id} failed: {run['errors'][0]}")
                continue
            base = out["alone"][job.job_id]["seconds"]
            per_job.append({"job_id": job.job_id, "preset": job.preset, "rounds": len(run["rounds"]),
                            "alone": base, "together": median_round(run), "slowdown": median_round(run) / base,
                            "exact": run["exact"], "slot_base": run["slots"]["slot_base"],
                            "slots": run["slots"]["slots"], "round_seconds": [r["seconds"] for r in run["rounds"]],
                            "resent": [r["resent"] for r in run["rounds"]],
                            "sent": [r["wire_bytes"] for r in run["rounds"]]})
        every = [r for j in these if runs["jobs"][j.job_id]["ok"] for r in runs["jobs"][j.job_id]["rounds"]]
        window = max(r["end"] for r in every) - min(r["start"] for r in every)
        sent = sum(r["wire_bytes"] for r in every)
        slowdowns = [p["slowdown"] for p in per_job]
        ranges = sorted((p["slot_base"], p["slot_base"] + p["slots"]) for p in per_job)
        out["together"].append({
            "jobs": count, "per_job": per_job, "failed": failed, "jain": jain(slowdowns),
            "worst_slowdown": max(slowdowns),
            "worst_over_share": max(slowdowns) / count, "exact": all(p["exact"] for p in per_job),
            "window_s": window, "server_link_load": sent * 8 / (window * cluster.bw * 1e6) if cluster.bw else None,
            "disjoint": all(a[1] <= b[0] for a, b in zip(ranges, ranges[1:])),
            "fidelity": runs.get("fidelity", {}).get("verdict"), "occupancy": occupancy})
    return out


def full_switch(seed: int, bw: float, log, progress) -> dict:
    """Job A holds 64 of a 96-slot switch; job B asks for 64 and refuses, runs on fewer, or waits; a DDP job
    trains on the hosts instead."""
    from hina.mininet.deploy import Cluster

    out: dict[str, Any] = {"space": FULL_SPACE, "ask": FULL_ASK}
    args = ("--slot-space", str(FULL_SPACE), "--slot-policy", "request")
    with Cluster(ranks=2, bw=bw, log=log, machines=2, switch_args=args) as cluster:
        a = Job(1, "lstm", 4, cluster.tmp, seed)
        b = Job(2, "lstm", 4, cluster.tmp, seed)
        ask = ("--slots", str(FULL_ASK))

        def hold(rounds: int) -> list[subprocess.Popen]:  # job A on 64 slots, until it is listed
            procs = launch(cluster, a, rounds, ask)
            until = time.monotonic() + 120
            while time.monotonic() < until and not any(j["job_id"] == a.job_id for j in cluster.jobs()):
                time.sleep(0.2)
            return procs

        def timed(what: str, extra: tuple) -> dict:  # job B's 5 rounds, judged by the fidelity monitor
            run = cluster.judged(what, lambda: run_jobs(cluster, [b], {b.job_id: 5}, {b.job_id: extra})[b.job_id])
            return {"seconds": median_round(run), "exact": run["exact"], "slots": run["slots"],
                    "fidelity": run.get("fidelity", {}).get("verdict")}

        fewer = (*ask, "--when-full", "fewer", "--min-slots", str(FULL_LEAST))
        progress.step("job B alone on 64 and on 32 slots")
        for slots in (FULL_ASK, FULL_SPACE - FULL_ASK):
            out[f"b_alone_{slots}"] = timed(f"job B alone on {slots} slots", ("--slots", str(slots)))
        progress.step("job B beside job A: refused, on fewer slots, in line")
        held = hold(rounds=400)
        started = time.monotonic()
        refused = collect(launch(cluster, b, 1, (*ask, "--when-full", "refuse")))
        out["refuse"] = {"seconds": time.monotonic() - started, "status": [r.get("status", 0) for r in refused],
                         "line": refused[0].get("error")}
        out["fewer"] = timed("job B on fewer slots beside job A", fewer)
        progress.step("job B beside job A stalled (one rank stopped)")
        os.kill(held[0].pid, signal.SIGSTOP)  # A's rank 0 stops mid-round: A's chunks wait in A's slots
        out["beside_stalled"] = timed("job B beside job A stalled", fewer)
        os.kill(held[0].pid, signal.SIGCONT)
        for p in held:  # A's ranks go on with their rounds; end them now, as a finished job ends
            p.terminate()
        collect(held, timeout=30)
        if any(j["job_id"] == a.job_id for j in cluster.jobs()):  # its killed ranks never left: as an operator would
            cluster.remove_job(a.job_id)
        held = hold(rounds=15)
        asked = time.time()
        waiting = launch(cluster, b, 3, (*ask, "--when-full", "wait"))
        both = cluster.judged("job B waiting for job A", lambda: {"a": collect(held), "b": collect(waiting)})
        a_reports, b_reports = both["a"], both["b"]
        if any("error" in r for r in a_reports + b_reports):
            raise RuntimeError(f"the wait case failed: {[r.get('error') for r in a_reports + b_reports]}")
        a_end = max(r["end"] for r in rounds_of(a_reports))
        b_first = min(r["start"] for r in rounds_of(b_reports))
        out["wait"] = {"asked_at": asked, "a_ended_at": a_end, "b_began_at": b_first, "waited_s": b_first - asked,
                       "after_a_s": b_first - a_end, "exact": b.exact(b_reports) and a.exact(a_reports),
                       "slots": b_reports[0]["job"], "in_line": "number 1 in line" in b_reports[0]["stderr"],
                       "fidelity": both.get("fidelity", {}).get("verdict")}
        progress.step("a DDP job beside job A: on the hosts")
        held = hold(rounds=400)
        ddp = cluster.judged("a DDP job on the hosts", lambda: cluster.torchrun(
            "hina", steps=5, job_id=3, extra=["--rows", "20000", *ask, "--host-fallback"]))
        for p in held:
            p.terminate()
        collect(held, timeout=30)
        out["host_fallback"] = {k: ddp[k] for k in ("ok", "steps", "identical_every_step", "seconds_per_iteration")}
        out["host_fallback"]["fidelity"] = ddp.get("fidelity", {}).get("verdict")
        out["host_fallback"]["through"] = "hosts" if ddp["ok"] and not any(ddp["bytes_per_step"]) else "switch"
    return out


def star(targets: list[str], bw: float, log, progress, bmv2_binary: str | None) -> dict:
    """Two jobs of three hosts through one star's switch at once, each on a range the switch's allocation chose
    (`SharedSwitchExperiment`): the emulator's raw-frame backend, BMv2 given each job at run time by the
    controller, the XDP switch; dense and auto, 3 rounds each under 1% loss, every job's sum checked, and the
    switch's counters (the XDP program's runs among them) kept."""
    from hina.mininet import hina_net
    from hina.mininet.shared_switch import SharedSwitchExperiment

    out = {}
    for target in targets:
        progress.step(f"two jobs through one {target} switch")
        binary = {"bmv2_binary": bmv2_binary} if target == "bmv2" and bmv2_binary else {}
        cfg = hina_net.ExperimentConfig(workers=6, ranks_per_host=2, switch=target, modes=("dense", "auto"), bw=bw,
                                        loss=1.0, length=STAR_LENGTH, density=0.02, slots=16, rounds=3, ping=False,
                                        deadline=60.0, mtu=172 if target == "bmv2" else None, **binary)
        results = SharedSwitchExperiment(cfg, jobs=2, log=log, run_id=f"tn{target[0]}").run()
        out[target] = {"loss_percent": cfg.loss, "mtu": cfg.mtu, "length": cfg.length, "binary": binary.get(
            "bmv2_binary"), "counters": results["counters"], "runs": [{
                "mode": run["mode"], "exact": run["exact"], "jobs": run["jobs"],
                "seconds": {str(j["job_id"]): statistics.median(r["jobs"][k]["seconds"] for r in run["rounds"])
                            for k, j in enumerate(run["jobs"])},
                "fidelity": run.get("fidelity", {}).get("verdict")} for run in results["runs"]]}
    return out


def plot(result: dict, path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    runs = result.get("sharing", {}).get("together", [])
    if not runs:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    ax = axes[0]
    for i, run in enumerate(runs):
        width = 0.8 / len(run["per_job"])
        ax.bar([i - 0.4 + (k + 0.5) * width for k in range(len(run["per_job"]))],
               [p["slowdown"] for p in run["per_job"]], width=width, color=f"C{i}",
               label=f"{run['jobs']} jobs (Jain {run['jain']:.2f})")
        ax.axhline(run["jobs"], color=f"C{i}", ls=":", lw=1)
    ax.set_xticks(range(len(runs)), [f"{r['jobs']} jobs" for r in runs])
    ax.set_ylabel("round seconds together / alone")
    ax.set_title("each job's slowdown (dotted: the number of jobs)")
    ax.legend(fontsize=7)
    ax = axes[1]
    last = runs[-1]
    samples = last["occupancy"]
    if samples:
        t0 = samples[0]["t"]
        spans: dict[int, list] = {}
        for s in samples:
            for job_id, base, slots in s["jobs"]:
                spans.setdefault(job_id, []).append((s["t"] - t0, base, slots))
        for k, (job_id, points) in enumerate(sorted(spans.items())):
            for t, base, slots in points:
                ax.broken_barh([(t, 0.2)], (base, slots), color=f"C{k % 10}")
            ax.text(points[0][0], points[0][1] + points[0][2] / 2, f"job {job_id}", fontsize=6, va="center")
    ax.set_xlabel("seconds")
    ax.set_ylabel("slot")
    ax.set_title(f"slots held over time, {last['jobs']} jobs")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="tenants.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=between(1, 16), nargs="*", default=[2, 4, 8],
                    help="how many jobs at once, one run each (default: 2 4 8; none: skip the sharing runs)")
    ap.add_argument("--machines", type=between(2, 16), default=4, help="worker machines, a rank of every job "
                                                                      "on each (default: 4)")
    ap.add_argument("--bw", type=positive, default=100.0, help="Mbit/s per link (default: 100)")
    ap.add_argument("--full", action="store_true", help="also the full switch: refuse, fewer, wait, the hosts")
    ap.add_argument("--star", nargs="*", choices=TARGETS, default=[],
                    help="also two jobs through one Mininet star's switch at once: the emulator's raw-frame backend, "
                         "BMv2, the XDP switch (default: none)")
    ap.add_argument("--bmv2-binary", default=None, help="with --star bmv2: the BMv2 build to run (default: "
                                                       "simple_switch_grpc on PATH)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=out_path, default=default_out("tenants.json"), help=out_help("tenants.json"))
    args = ap.parse_args(argv)
    from hina.mininet.deploy import Cluster
    from hina.mininet.hina_net import BMV2_BINARY, missing_requirements

    problems = [missing_requirements(), *(missing_requirements(t, args.bmv2_binary or BMV2_BINARY) for t in args.star)]
    problem = next((p for p in problems if p), None)  # said before any run: a switch --star names that is missing
    if problem:
        print(f"tenants.py: {problem}", file=sys.stderr)
        return 2
    steps = (len(args.jobs) + max(args.jobs, default=0) if args.jobs else 0) + (4 if args.full else 0) + len(args.star)
    result: dict[str, Any] = {"machines": args.machines, "bw_mbps": args.bw, "presets": dict(SCALES)}
    with Progress(max(steps, 1), "tenants") as bar:
        progress, log = Steps(bar), bar.print
        if args.jobs:
            with Cluster(ranks=1, bw=args.bw, log=log, machines=args.machines) as cluster:
                result["sharing"] = sharing(cluster, sorted(set(args.jobs)), args.seed, progress)
        if args.full:
            result["full"] = full_switch(args.seed, args.bw, log, progress)
        if args.star:
            result["star"] = star(args.star, args.bw, log, progress, args.bmv2_binary)
        progress.finish()
    for run in result.get("sharing", {}).get("together", []):
        log(f"{run['jobs']} jobs: {len(run['failed'])} timed out; Jain {run['jain']:.3f}, worst slowdown "
            f"{run['worst_slowdown']:.2f}x "
            f"({run['worst_over_share']:.2f} of the jobs sharing), server link {run['server_link_load']:.0%} "
            f"busy, exact {run['exact']}, {run['fidelity']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_result(args.out, result, command_line("benchmarks/tenants.py", argv))
    png = args.out.with_suffix(".png")
    log(f"wrote {args.out}" + (f" and {png}" if plot(result, png) else ""))
    ok = all(r["exact"] for r in result.get("sharing", {}).get("together", []))
    ok = ok and all(run["exact"] for target in result.get("star", {}).values() for run in target["runs"])
    full = result.get("full")
    if full:
        ok = (ok and full["fewer"]["exact"] and full["beside_stalled"]["exact"] and full["wait"]["exact"]
              and full["host_fallback"]["identical_every_step"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
