"""Jobs arriving and leaving one switch for an hour of virtual time: no slot leaked, every sum exact.

On the simulator's virtual clock (sim/netsim.py: the switch's compiled rules, the workers' real
sender, packets with latency, jitter and loss), jobs arrive at random (exponential gaps of --gap
seconds), each with 2 to 8 workers asking for 16 to 128 slots of a --space-slot switch shared by
--policy, and answering a full switch as their draw says (refuse, fewer, wait).  Every control
request goes through the emulator's own control port code (`control_port.handle`, with the ledger
that places jobs), so the joins, the queue and the leaves are the switch's own.  A job that got slots
runs 3 to 30 rounds of a few thousand words each, 5 s of computing between rounds, checking
every worker's result against numpy's sum, then its workers leave.  Once a second the slots held are
checked disjoint and within the space.  At the end the switch must hold no job and the ledger no
waiter: every slot given was given back.

    python benchmarks/churn_model.py [--hours 1] [--space 256] [--policy equal] [--out ...]

Writes the JSON (--out) and a PNG of the slots held and the jobs in line over time beside it.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

from hina.cliargs import OneLineParser, between, fraction, positive
from hina.codec.ops import Op, reduce_words
from hina.control.ledger import POLICIES, WAIT_POLL, WHEN_FULL, Ledger, free_runs
from hina.emulator.control_port import handle
from hina.emulator.pipeline import Pipeline
from hina.host.window import PhaseTransfer, RttEstimator, SlotPool
from hina.progress import Progress
from hina.provenance import command_line, default_out, out_help, out_path, write_result
from hina.sim.netsim import VirtualNetwork

WORDS = 64  # K per packet
COMPUTE = 5.0  # virtual seconds of computing between a job's rounds


class SharedNetwork(VirtualNetwork):
    """The virtual network with workers named by their UDP address, as a switch's members are."""

    def _at_switch(self, source, frame: bytes) -> None:
        emit = self.pipeline.update(frame, source)
        if emit is not None:
            for dest in emit.dests:
                self._schedule(("down", dest), lambda d=dest, f=emit.frame: self.on_result(d, f), len(emit.frame))


class Churn:
    """The jobs' lives on one switch: arrive, join (or wait, or be refused), rounds, leave."""

    def __init__(self, args, rng: np.random.Generator):
        self.args, self.rng = args, rng
        self.pipeline = Pipeline()
        self.ledger = Ledger(args.space, args.policy)
        self.net = SharedNetwork(self.pipeline, rng, drop=args.drop)
        self.ledger.clock = lambda: self.net.now  # the queue forgets by virtual seconds
        self.net.on_result = self._result
        self.by_address: dict[tuple[str, int], tuple[dict, int]] = {}
        self.jobs: list[dict] = []
        self.seq = 0
        self.counts = {"arrived": 0, "granted": 0, "fewer": 0, "waited": 0, "refused": 0, "rounds": 0,
                       "exact_rounds": 0, "left": 0}
        self.samples: list[dict] = []
        self.problems: list[str] = []

    # -- the control port, as a worker reaches it ---------------------------------------------------
    def control(self, op: str, **fields: Any) -> dict:
        self.seq += 1
        reply, _ = handle(self.pipeline, json.dumps({"op": op, "seq": self.seq, **fields}).encode(),
                          ledger=self.ledger)
        return reply

    # -- a job's life ----------------------------------------------------------------------------------
    def arrive(self) -> None:
        if self.net.now >= self.horizon:
            return
        self.counts["arrived"] += 1
        job_id = 1 + self.counts["arrived"]
        n = int(self.rng.integers(2, 9))
        job = {"job_id": job_id, "workers": n, "ask": int(self.rng.choice([16, 32, 64, 128])),
               "when_full": str(self.rng.choice(WHEN_FULL)), "rounds": int(self.rng.integers(3, 31)),
               "length": int(self.rng.integers(1, 6)) * 1024, "arrived": self.net.now, "done": 0,
               "addresses": [(f"10.{job_id >> 8 & 255}.{job_id & 255}.{w + 1}", 40000 + w) for w in range(n)]}
        self.jobs.append(job)
        self.join(job)
        self.net.clock.at(self.net.now + self.rng.exponential(self.args.gap), self.arrive)

    def join(self, job: dict) -> None:
        place = {"slots": job["ask"], "least": max(1, job["ask"] // 4), "when_full": job["when_full"]}
        for w, address in enumerate(job["addresses"]):
            reply = self.control("join", job={"job_id": job["job_id"], "workers": job["workers"], "words": WORDS,
                                              "slot_base": 0, "slots": job["ask"]},
                                 member={"worker_id": w, "address": list(address)}, place=place)
            if "queued" in reply:  # in line: every worker asks again shortly, as ControlClient.join does
                job.setdefault("queued_at", self.net.now)
                self.net.clock.at(self.net.now + WAIT_POLL, self.join, job)
                return
            if not reply["ok"]:
                if not reply.get("full"):
                    self.problems.append(f"job {job['job_id']}: {reply['error']}")
                self.counts["refused"] += 1
                return
            job["slot_base"], job["slots"] = reply["job"]["slot_base"], reply["job"]["slots"]
        self.counts["granted"] += 1
        self.counts["fewer"] += job["slots"] < job["ask"]
        self.counts["waited"] += "queued_at" in job
        job["granted"] = self.net.now
        job["pools"] = [SlotPool(job["slot_base"], job["slots"]) for _ in range(job["workers"])]
        job["rtts"] = [RttEstimator(initial=2e-3, minimum=1e-3, maximum=0.05) for _ in range(job["workers"])]
        for w, address in enumerate(job["addresses"]):
            self.by_address[address] = (job, w)
        self.start_round(job)

    def start_round(self, job: dict) -> None:
        payloads = [self.rng.integers(-1 << 20, 1 << 20, job["length"], dtype=np.int32)
                    for _ in range(job["workers"])]
        job["payloads"] = payloads
        job["open"] = True  # until every worker has the round's sum
        job["xfers"] = [PhaseTransfer(job_id=job["job_id"], worker_id=w, words=WORDS, pool=job["pools"][w],
                                      rtt=job["rtts"][w], tag=job["done"], op=Op.ADD, payload=payloads[w],
                                      name=f"round{job['done']}", now=self.net.now, deadline=30.0)
                        for w in range(job["workers"])]
        for w, x in enumerate(job["xfers"]):
            for frame in x.start(self.net.now):
                self.net.uplink(job["addresses"][w], frame)

    def _result(self, address, frame: bytes) -> None:
        found = self.by_address.get(address)
        if found is None:
            return  # a late duplicate for a job that left
        job, w = found
        x = job["xfers"][w]
        for out in x.receive(frame, self.net.now):
            self.net.uplink(address, out)
        if job["open"] and all(x.done for x in job["xfers"]):  # a late duplicate after the round: nothing more
            job["open"] = False
            self.net.clock.at(self.net.now, self.round_done, job)

    def round_done(self, job: dict) -> None:
        want = reduce_words(Op.ADD, job["payloads"])
        exact = all(np.array_equal(x.result, want) for x in job["xfers"])
        self.counts["rounds"] += 1
        self.counts["exact_rounds"] += exact
        if not exact:
            self.problems.append(f"job {job['job_id']} round {job['done']}: a worker's sum differs from numpy's")
        job["done"] += 1
        if job["done"] < job["rounds"]:
            self.net.clock.at(self.net.now + COMPUTE, self.start_round, job)
            return
        for w, address in enumerate(job["addresses"]):
            reply = self.control("leave", job_id=job["job_id"], worker_id=w)
            if not reply["ok"]:
                self.problems.append(f"job {job['job_id']}: leave refused: {reply['error']}")
            del self.by_address[address]
        job["left"] = self.net.now
        self.counts["left"] += 1

    # -- the run ---------------------------------------------------------------------------------------
    def sample(self) -> None:
        held = self.ledger.held(self.pipeline.listing())
        spans = sorted((h.slot_base, h.end) for h in held)
        if any(a[1] > b[0] for a, b in zip(spans, spans[1:])) or any(e > self.args.space for _, e in spans):
            self.problems.append(f"at {self.net.now:.0f} s the slots held overlap or leave the space: {spans}")
        free = sum(n for _, n in free_runs(held, self.args.space))
        self.samples.append({"t": round(self.net.now, 3), "jobs": len(held), "held": self.args.space - free,
                             "waiting": len(self.ledger.waiting)})
        if self.net.now < self.horizon or any("left" not in j for j in self.jobs if "granted" in j):
            self.net.clock.at(self.net.now + 1.0, self.sample)

    def run(self, progress: Progress) -> None:
        self.horizon = self.args.hours * 3600.0
        self.net.clock.at(0.0, self.arrive)
        self.net.clock.at(0.0, self.sample)
        shown = 0
        while True:
            active = [x for j in self.jobs if j.get("xfers") and "left" not in j for x in j["xfers"] if not x.done]
            timer = min((x.next_timer() for x in active), default=math.inf)
            if min(timer, self.net.clock.next_at) == math.inf:
                break
            # to the earliest timer; with none, one instant's events (one may start a transfer, whose timers count)
            self.net.run(until=timer if timer < math.inf else self.net.clock.next_at)
            if timer < math.inf:
                self.net.clock.advance(timer)
                for j in self.jobs:
                    for w, x in enumerate(j.get("xfers") or ()):
                        if "left" not in j and not x.done:
                            for frame in x.poll(self.net.now):
                                self.net.uplink(j["addresses"][w], frame)
            while shown + 60 <= min(self.net.now, self.horizon):
                shown += 60
                progress.done(n=60)


def plot(result: dict, path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    s = result["samples"]
    t = [x["t"] / 60 for x in s]
    fig, ax = plt.subplots(figsize=(9, 3.4))
    ax.fill_between(t, [x["held"] for x in s], step="post", alpha=0.5, label="slots held")
    ax.axhline(result["space"], color="black", lw=1, ls="--", label=f"the switch's {result['space']} slots")
    ax.set_xlabel("virtual minutes")
    ax.set_ylabel("slots")
    ax2 = ax.twinx()
    ax2.step(t, [x["waiting"] for x in s], where="post", color="C3", lw=1, label="jobs in line")
    ax2.set_ylabel("jobs in line", color="C3")
    ax.legend(loc="upper left", fontsize=7)
    ax.set_title(f"{result['counts']['arrived']} jobs over {result['hours']:g} h of virtual time, policy "
                 f"{result['policy']}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="churn_model.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--hours", type=positive, default=1.0, help="virtual hours of arrivals (default: 1)")
    ap.add_argument("--gap", type=positive, default=10.0, help="mean virtual seconds between arrivals (default: 10)")
    ap.add_argument("--space", type=between(16), default=256, help="the switch's slots (default: 256)")
    ap.add_argument("--policy", choices=POLICIES, default="equal", help="the share policy (default: equal)")
    ap.add_argument("--drop", type=fraction, default=0.001, help="each packet's loss probability (default: 0.001)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=out_path, default=default_out("churn_model.json"), help=out_help("churn_model.json"))
    args = ap.parse_args(argv)
    churn = Churn(args, np.random.default_rng(args.seed))
    with Progress(args.hours * 3600, "churn", unit="s") as bar:
        churn.run(bar)
    leftover = churn.pipeline.listing()
    if leftover:
        churn.problems.append(f"jobs left on the switch: {[j['job_id'] for j in leftover]}")
    if churn.ledger.waiting or churn.ledger.owners:
        churn.problems.append(f"the ledger still holds jobs {sorted(churn.ledger.owners)}, waiting "
                              f"{list(churn.ledger.waiting)}")
    waits = [j["granted"] - j["queued_at"] for j in churn.jobs if "queued_at" in j and "granted" in j]
    result = {"hours": args.hours, "space": args.space, "policy": args.policy, "gap_s": args.gap, "drop": args.drop,
              "virtual_seconds": churn.net.now, "counts": churn.counts, "leaked": len(leftover),
              "exact": churn.counts["exact_rounds"] == churn.counts["rounds"], "problems": churn.problems,
              "most_held": max(s["held"] for s in churn.samples), "most_jobs": max(s["jobs"] for s in churn.samples),
              "most_waiting": max(s["waiting"] for s in churn.samples),
              "wait_s": {"median": float(np.median(waits)), "max": float(max(waits))} if waits else None,
              "samples": churn.samples}
    c = churn.counts
    print(f"churn: {c['arrived']} jobs over {churn.net.now / 3600:.2f} virtual hours; {c['granted']} given slots "
          f"({c['fewer']} fewer than asked, {c['waited']} after waiting), {c['refused']} refused; {c['rounds']:,} "
          f"rounds, {c['exact_rounds']:,} exact; {len(leftover)} jobs left on the switch; "
          f"{len(churn.problems)} problems", file=sys.stderr)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_result(args.out, result, command_line("benchmarks/churn_model.py", argv))
    png = args.out.with_suffix(".png")
    print(f"wrote {args.out}" + (f" and {png}" if plot(result, png) else ""), file=sys.stderr)
    return 0 if not churn.problems and result["exact"] else 1


if __name__ == "__main__":
    sys.exit(main())
