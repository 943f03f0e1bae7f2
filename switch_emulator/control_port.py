"""The emulator's side of the control port: one JSON request in, one reply out, never raising.

The requests and their replies are described in `hina.control.client`, whose
`ControlClient` is the other side.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from typing import Any

from hina.control.auth import CHANGES, OPERATOR, OWNERS_ONLY, Guard
from hina.control.config import JobConfig, Member
from hina.control.ledger import Full, Ledger, Placement
from hina.control.topology import Topology

from .pipeline import JobMismatch, Pipeline


def handle(pipeline: Pipeline, request: bytes, extra: dict[str, Any] | None = None,
           configure: Callable[[Topology], None] | None = None,
           status: Callable[[], dict] | None = None, *, listing: Callable[[], list] | None = None,
           info: Callable[[], dict] | None = None, guard: Guard | None = None, peer: Any = None,
           where: tuple[str, int] | None = None, ledger: Ledger | None = None) -> tuple[dict, bool]:
    """Apply one request; return (reply, shutdown requested).  Never raises on bad input.

    `configure` installs a whole topology; only raw-frame backends have one.  `status` says
    which pipes are alive, where there are several (`pipes.Pipes`, which is then `pipeline` too);
    `info` adds the server's own lines to `status` (uptime, lease, leases).  `listing` lists the
    jobs (default `pipeline.listing()`).  With a `guard` (the switch has a token) the requests that
    change the switch must carry proof of it (`hina.control.auth`); `peer` is the sender's address.
    `where`, the control port's address, goes into the command a refused join is told to run.
    `ledger` (the process holding the control port has one) places the jobs that join without a slot
    range of their own and keeps each job's owner: with tenants, a job is changed only by its owner or
    the operator (`hina.control.auth`).
    """
    seq = op = msg = None
    try:
        msg = json.loads(request)
        if not isinstance(msg, dict):
            raise ValueError("a control request is a JSON object")
        seq = msg.get("seq")
        op = msg.get("op")
        if guard is not None:
            refusal, again = guard.check(msg, peer)
            if refusal is not None:
                return {"ok": False, "error": refusal, "seq": seq}, False
            if again is not None:  # a retransmission of a request already applied: its reply, nothing applied
                return again, False
        reply: dict[str, Any] = {"ok": True}
        who = guard.who(msg) if guard is not None else None
        jobs = None
        if ledger is not None and op in OWNERS_ONLY:
            jobs = listing() if listing is not None else pipeline.listing()
            job_id = msg["job"].get("job_id") if isinstance(msg.get("job"), dict) else msg.get("job_id")
            refusal = _not_theirs(ledger, jobs, job_id, who, op) if guard is not None else None
            if refusal is not None:
                reply = {"ok": False, "error": refusal, "seq": seq}
                guard.remember(msg, reply)
                return reply, False
        if op == "add_job":
            cfg = JobConfig.from_config(_field(msg, "job", dict))
            pipeline.add_job(cfg)
            if ledger is not None:
                ledger.owners[cfg.job_id] = None if who in (None, OPERATOR) else who
        elif op == "join":
            cfg = JobConfig.from_config(_field(msg, "job", dict))
            have = next((j for j in jobs or () if j["job_id"] == cfg.job_id), None)
            if "place" in msg and ledger is not None:
                want = Placement.from_config(msg["place"])
                if have is not None:  # the job's first member placed it: the others join that range
                    cfg = JobConfig(cfg.job_id, cfg.workers, cfg.words, have["slot_base"], have["slots"], cfg.members)
                else:
                    got = ledger.place(cfg.job_id, cfg.workers, want, jobs or [])
                    if isinstance(got, int):  # in line
                        reply["queued"] = got
                        reply["seq"] = seq
                        if guard is not None:
                            guard.remember(msg, reply)
                        return reply, False
                    cfg = JobConfig(cfg.job_id, cfg.workers, cfg.words, got[0], got[1], cfg.members)
            try:
                replaced = pipeline.join(cfg, Member.from_config(_field(msg, "member", dict)))
                if replaced is not None:  # its rank was held from elsewhere: the joining worker says so
                    reply["replaced"] = replaced.to_config()
            except JobMismatch as exc:
                raise JobMismatch(f"{exc} (remove it: {remove_command(exc.job_id, where)})", exc.job_id) from None
            if ledger is not None and have is None:
                ledger.owners[cfg.job_id] = None if who in (None, OPERATOR) else who
            reply["pipes"] = status()["pipes"] if status is not None else 1  # RESULTs are in order per pipe
            reply["job"] = {k: v for k, v in cfg.to_config().items() if k != "members"}
        elif op == "leave":
            job_id = _field(msg, "job_id", int)
            reply["removed"] = pipeline.leave(job_id, _field(msg, "worker_id", int))
            if reply["removed"] and ledger is not None:
                ledger.forget(job_id)
        elif op == "remove_job":
            pipeline.remove_job(_field(msg, "job_id", int))
            if ledger is not None:
                ledger.forget(msg["job_id"])
        elif op == "reset_job":
            pipeline.reset_job(_field(msg, "job_id", int))
        elif op == "counters":
            reply["counters"] = pipeline.counters()
            if extra:
                reply["counters"].update(extra)
        elif op == "configure":
            if guard is not None and who != OPERATOR:
                raise ValueError(f"only the switch operator's token may configure the switch, not {who}'s")
            if configure is None:
                raise ValueError("this emulator serves UDP on loopback: install jobs with add_job, "
                                 "topologies need the raw-frame backend")
            topology = Topology.from_config(_field(msg, "topology", dict))
            configure(topology)
            jobs = getattr(pipeline, "jobs", None)  # a controller's topology is pinned: no lease removes it
            for job in topology.jobs if isinstance(jobs, dict) else ():
                if job.job_id in jobs:
                    jobs[job.job_id].origin = "configure"
        elif op == "jobs":
            reply["jobs"] = listing() if listing is not None else pipeline.listing()
            if ledger is not None:
                for job in reply["jobs"]:
                    job["owner"] = ledger.owners.get(job["job_id"])
        elif op in ("ping", "status"):
            state = status() if status is not None else {"pipes": 1, "alive": 1, "down": []}
            if op == "status":
                reply["status"] = {**state, **(info() if info is not None else {})}
            elif state["down"]:
                raise RuntimeError(f"{'; '.join(state['down'])}; that pipe's slots are lost")
        elif op == "shutdown":
            if guard is not None and who != OPERATOR:
                raise ValueError(f"only the switch operator's token may shut the switch down, not {who}'s")
            reply = {"ok": True, "seq": seq}
            if guard is not None:
                guard.remember(msg, reply)
            return reply, True
        else:
            raise ValueError(f"unknown control op {op!r}")
    except Exception as exc:  # a bad request must never stop the switch
        detail = f"missing field {exc.args[0]!r}" if type(exc) is KeyError else str(exc)
        if op and isinstance(op, str) and detail.startswith(f"{op}: "):  # a pipe's reply already names the op
            detail = detail[len(op) + 2:]
        reply = {"ok": False, "error": f"{op or 'request'}: {detail}" if op else detail}
        if isinstance(exc, Full):  # the client raises SwitchFull: a DDP job may then aggregate on its hosts
            reply["full"] = True
    reply["seq"] = seq
    if guard is not None and isinstance(msg, dict):
        guard.remember(msg, reply)
    return reply, False


def _not_theirs(ledger: Ledger, jobs: list[dict], job_id: Any, who: str | None, op: str) -> str | None:
    """Why `who` may not `op` job `job_id` (None: they may): a job installed by an owner is changed only by that
    owner or the operator, one installed by the operator (or from the command line) only by the operator."""
    if who == OPERATOR or op not in CHANGES or not any(j["job_id"] == job_id for j in jobs):
        return None
    owner = ledger.owners.get(job_id)
    if owner == who:
        return None
    holder = f"{owner}'s" if owner else "the switch operator's"
    tokens = f"{owner}'s token or the switch operator's" if owner else "the switch operator's token"
    return (f"{op}: job {job_id} is {holder}, and this request is {who}'s; only {tokens} changes it "
            f"(sign with that --token-file, or use another --job-id)")


def remove_command(job_id: int, where: tuple[str, int] | None) -> str:
    """The command that removes job `job_id` from the switch whose control port is `where`."""
    if where is None:
        return f"hina switch remove {job_id} --control HOST:PORT"
    host, port = where[0], where[1]
    if host in ("0.0.0.0", ""):  # bound to every address: name this machine
        host = socket.gethostname()
    return f"hina switch remove {job_id} --control {host}:{port}"


def _field(msg: dict, name: str, kind: type):
    """msg[name], which must be a `kind` (a JSON object for dict, an integer for int)."""
    if name not in msg:
        raise KeyError(name)
    value = msg[name]
    if kind is int and isinstance(value, bool) or not isinstance(value, kind):
        want = "a JSON object" if kind is dict else "an integer"
        raise ValueError(f"{name!r} must be {want}, got {json.dumps(value)}")
    return value
