"""Several jobs through one switch of a Mininet star at once, each placed on slots the switch has free.

`SharedSwitchExperiment` is `hina_net.Experiment` with `jobs` J: every host runs one rank of each job,
job j's from UDP port 0x4E41 + j (so its members are known by address behind their port, each
with a RESULT replica of its own).  The switch gets the hosts first, then each job on a range of its
slots: BMv2 through the controller at run time (`Bmv2Target.place`: the job's table entries,
replicas and multicast group written beside the others'), the emulator in one configuration whose
ranges the same allocation chose (`hina.control.ledger.choose`).  Each job's gradients have a seed of
their own; every mode runs all jobs at once, and each job's sum is checked against numpy's.

    results = SharedSwitchExperiment(ExperimentConfig(workers=3 * 2, ranks_per_host=2, switch="bmv2", ...),
                                     jobs=2).run()
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile

from hina import codec
from hina.control.config import JobConfig, Member
from hina.control.controller import Bmv2Target
from hina.control.ledger import DEFAULT_POLICY, DEFAULT_SPACE, Held, Placement, choose
from hina.control.topology import Topology
from hina.host.demo import digest, expected_fixed
from hina.host.job import JobSpec
from hina.mininet.hina_net import (
    SWITCH_IP,
    SWITCH_MAC,
    Experiment,
    ExperimentConfig,
    _end_workers,
    _go,
    _summarize,
    host_ip,
    host_mac,
)
from hina.wire.headers import UDP_PORT


class SharedSwitchExperiment(Experiment):
    """J jobs on one star's switch at once; `cfg.workers` is hosts x J and `cfg.ranks_per_host` J."""

    def __init__(self, cfg: ExperimentConfig, jobs: int, log=print, run_id: str | None = None):
        if jobs < 1 or cfg.ranks_per_host != jobs or cfg.workers % jobs:
            raise ValueError(f"{jobs} jobs need ranks_per_host {jobs} and workers a multiple of it, got "
                             f"{cfg.ranks_per_host} and {cfg.workers}")
        super().__init__(cfg, log=log, run_id=run_id)
        self.jobs = jobs
        self.placed: list[JobConfig] = []

    @property
    def hosts_count(self) -> int:
        return self.cfg.workers // self.jobs

    def _prepare(self) -> Topology:
        cfg, sw = self.cfg, self.switch
        hosts = self._prepare_hosts()
        n = self.hosts_count
        wanted = [JobConfig(j + 1, n, cfg.words, 0, cfg.slots,
                            tuple(Member(h, hosts[h].port, (hosts[h].ip, UDP_PORT + j)) for h in range(n)))
                  for j in range(self.jobs)]
        bare = Topology(SWITCH_MAC, SWITCH_IP, tuple(hosts), ())
        if isinstance(sw.target, Bmv2Target):  # the hosts first, then each job at run time
            sw.target.configure(bare)
            self.placed = [sw.target.place(job, Placement(cfg.slots)) for job in wanted]
        else:
            held: list[Held] = []
            for job in wanted:
                got = choose(Placement(cfg.slots), n, held, DEFAULT_SPACE, DEFAULT_POLICY)
                if got is None:
                    raise RuntimeError(f"job {job.job_id}: no {cfg.slots} slots free among {DEFAULT_SPACE}")
                self.placed.append(dataclasses.replace(job, slot_base=got[0], slots=got[1]))
                held.append(Held(job.job_id, got[0], got[1], n))
            sw.target.configure(dataclasses.replace(bare, jobs=tuple(self.placed)))
        for job in self.placed:
            self.log(f"job {job.job_id}: slots [{job.slot_base}, {job.slot_base + job.slots})")
        return dataclasses.replace(bare, jobs=tuple(self.placed))

    def _aggregate(self, mode: str, topology: Topology) -> dict:
        cfg, n = self.cfg, self.hosts_count
        link = {"link_gbps": cfg.bw / 1000} if cfg.bw else {}
        params = codec.CodecParams(length=cfg.length, workers=n, mode=mode, **link)
        hosts = list(dict.fromkeys(self._hosts()))
        specs, procs = [], []
        for j, job in enumerate(self.placed):
            self.switch.target.reset_job(job.job_id)
            spec = {"params": params.to_config(),
                    "job": JobSpec(job.job_id, job.words, job.slot_base, job.slots).to_config(),
                    "density": cfg.density, "seed": cfg.seed + j, "workload": cfg.workload, "scale": cfg.scale,
                    "deadline": cfg.deadline, "switch": {"ip": SWITCH_IP, "mac": SWITCH_MAC},
                    "pipes": cfg.pipes, "offload": self.segmentation_offload,
                    "hosts": [{"ifname": h.defaultIntf().name, "mac": host_mac(i + 1), "ip": host_ip(i + 1),
                               "udp_port": UDP_PORT + j,
                               "congestion": cfg.congestion_for(i * self.jobs + j).to_config()}
                              for i, h in enumerate(hosts)]}
            with tempfile.NamedTemporaryFile("w", prefix="hina-spec-", suffix=".json", delete=False) as f:
                json.dump(spec, f)
            specs.append(f.name)
            procs.append([h.popen([sys.executable, "-m", "hina", "worker", "--spec", f.name, "--rank", str(r),
                                   "--transport", cfg.transport], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for r, h in enumerate(hosts)])
        every = [p for job_procs in procs for p in job_procs]
        try:
            for p in every:
                ready = p.stdout.readline()
                said = json.loads(ready) if ready else {"error": p.stderr.read()}
                if "error" in said:
                    raise RuntimeError(f"a worker did not start: {said['error']}")
            runs = []
            for _ in range(cfg.rounds):
                start = self.monitor.mark().t if self.monitor else None
                _go(every, [0.0] * len(every))
                per_job = []
                for j, job_procs in enumerate(procs):
                    reports = [json.loads(p.stdout.readline() or '{"error": "worker exited"}') for p in job_procs]
                    errors = [f"job {j + 1} worker {r}: {x['error']}" for r, x in enumerate(reports) if "error" in x]
                    want = digest(expected_fixed(n, cfg.length, cfg.density, cfg.seed + j, cfg.workload, cfg.scale))
                    exact = not errors and all(x["digest"] == want for x in reports)
                    summary = _summarize(reports, errors, exact, dataclasses.replace(cfg, workers=n, ranks_per_host=1))
                    per_job.append({"job_id": self.placed[j].job_id, "slot_base": self.placed[j].slot_base,
                                    "slots": self.placed[j].slots, **summary})
                rnd = {"exact": all(x["exact"] for x in per_job), "jobs": per_job,
                       "seconds": max(x["seconds"] for x in per_job)}
                if self.monitor:
                    rnd["fidelity"] = self.monitor.judge_window(start, self.monitor.mark().t)
                runs.append(rnd)
                self.log(f"[{mode}] {self.jobs} jobs at once: exact={rnd['exact']}, "
                         + ", ".join(f"job {x['job_id']} {x['seconds']:.3f} s" for x in per_job))
        finally:
            _end_workers(every)
            for name in specs:
                os.unlink(name)
        return {"mode": mode, "exact": all(r["exact"] for r in runs), "rounds": runs,
                "jobs": [{"job_id": j.job_id, "slot_base": j.slot_base, "slots": j.slots} for j in self.placed]}
