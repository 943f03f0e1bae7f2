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
    port = _Port(pipeline, extra, configure, status, listing or pipeline.listing, info, guard, where, ledger)
    return port.handle(request, peer)


class _Request:
    """One request as its op's method sees it: the message, who signed it, the switch's jobs where the
    owners' check listed them, and the reply it fills in."""

    def __init__(self, msg: dict, who: str | None, jobs: list[dict] | None):
        self.msg, self.who, self.jobs = msg, who, jobs
        self.reply: dict[str, Any] = {"ok": True}
        self.shutdown = False


class _Port:
    """The control port's context for one request (what `handle` was given), and one method per op."""

    OPS = ("add_job", "join", "leave", "remove_job", "reset_job", "counters", "configure", "jobs", "ping", "status",
           "shutdown")

    def __init__(self, pipeline, extra, configure, status, listing, info, guard, where, ledger):
        self.pipeline, self.extra, self.configure, self.status = pipeline, extra, configure, status
        self.listing, self.info, self.guard, self.where, self.ledger = listing, info, guard, where, ledger

    def handle(self, request: bytes, peer: Any) -> tuple[dict, bool]:
        seq = op = msg = None
        try:
            msg = json.loads(request)
            if not isinstance(msg, dict):
                raise ValueError("a control request is a JSON object")
            seq, op = msg.get("seq"), msg.get("op")
            if self.guard is not None:
                refusal, again = self.guard.check(msg, peer)
                if refusal is not None:
                    return {"ok": False, "error": refusal, "seq": seq}, False
                if again is not None:  # a retransmission of a request already applied: its reply, nothing applied
                    return again, False
            req = self._admitted(msg, op)
        except Exception as exc:  # a bad request must never stop the switch
            req = _Request({}, None, None)
            req.reply = _error_reply(op, exc)
        req.reply["seq"] = seq
        if self.guard is not None and isinstance(msg, dict):
            self.guard.remember(msg, req.reply)
        return req.reply, req.shutdown

    def _admitted(self, msg: dict, op: Any) -> _Request:
        """The request, applied by its op's method unless its job is another owner's (the reply says so)."""
        if op not in self.OPS:
            raise ValueError(f"unknown control op {op!r}")
        who = self.guard.who(msg) if self.guard is not None else None
        jobs = self.listing() if self.ledger is not None and op in OWNERS_ONLY else None
        req = _Request(msg, who, jobs)
        if jobs is not None and self.guard is not None:
            job_id = msg["job"].get("job_id") if isinstance(msg.get("job"), dict) else msg.get("job_id")
            refusal = _not_theirs(self.ledger, jobs, job_id, who, op)
            if refusal is not None:
                req.reply = {"ok": False, "error": refusal}
                return req
        getattr(self, f"_{op}")(req)
        return req

    def _own(self, req: _Request, job_id: int) -> None:
        """The ledger's record of who installed job `job_id`: the signer, unless the operator (or nobody)."""
        if self.ledger is not None:
            self.ledger.owners[job_id] = None if req.who in (None, OPERATOR) else req.who

    def _add_job(self, req: _Request) -> None:
        cfg = JobConfig.from_config(_field(req.msg, "job", dict))
        self.pipeline.add_job(cfg)
        self._own(req, cfg.job_id)

    def _join(self, req: _Request) -> None:
        cfg = JobConfig.from_config(_field(req.msg, "job", dict))
        have = next((j for j in req.jobs or () if j["job_id"] == cfg.job_id), None)
        if "place" in req.msg and self.ledger is not None:
            cfg = self._placed(req, cfg, have)
            if cfg is None:  # in line
                return
        try:
            replaced = self.pipeline.join(cfg, Member.from_config(_field(req.msg, "member", dict)))
        except JobMismatch as exc:
            raise JobMismatch(f"{exc} (remove it: {remove_command(exc.job_id, self.where)})", exc.job_id) from None
        if replaced is not None:  # its rank was held from elsewhere: the joining worker says so
            req.reply["replaced"] = replaced.to_config()
        if have is None:
            self._own(req, cfg.job_id)
        req.reply["pipes"] = self.status()["pipes"] if self.status is not None else 1  # RESULTs in order per pipe
        req.reply["job"] = {k: v for k, v in cfg.to_config().items() if k != "members"}

    def _placed(self, req: _Request, cfg: JobConfig, have: dict | None) -> JobConfig | None:
        """The job on the slot range the switch chooses (its first member placed it: the others join that
        range); None while it waits in line (the reply says its place)."""
        if have is not None:
            return JobConfig(cfg.job_id, cfg.workers, cfg.words, have["slot_base"], have["slots"], cfg.members)
        got = self.ledger.place(cfg.job_id, cfg.workers, Placement.from_config(req.msg["place"]), req.jobs or [])
        if isinstance(got, int):
            req.reply["queued"] = got
            return None
        return JobConfig(cfg.job_id, cfg.workers, cfg.words, got[0], got[1], cfg.members)

    def _leave(self, req: _Request) -> None:
        job_id, worker_id = _field(req.msg, "job_id", int), _field(req.msg, "worker_id", int)
        if "member" in req.msg:  # the worker that joined: a rank taken over since is the new holder's
            gone = Member.from_config(_field(req.msg, "member", dict))
            holder = self._member(req.jobs or self.listing(), job_id, worker_id)
            if holder is not None and holder != gone:
                req.reply.update(removed=False, held_by=holder.to_config())
                return
        req.reply["removed"] = self.pipeline.leave(job_id, worker_id)
        if req.reply["removed"] and self.ledger is not None:
            self.ledger.forget(job_id)

    @staticmethod
    def _member(jobs: list[dict], job_id: int, worker_id: int) -> Member | None:
        job = next((j for j in jobs if j["job_id"] == job_id), None)
        held = next((m for m in (job or {}).get("members", ()) if m["worker_id"] == worker_id), None)
        return Member.from_config(held) if held is not None else None

    def _remove_job(self, req: _Request) -> None:
        self.pipeline.remove_job(_field(req.msg, "job_id", int))
        if self.ledger is not None:
            self.ledger.forget(req.msg["job_id"])

    def _reset_job(self, req: _Request) -> None:
        self.pipeline.reset_job(_field(req.msg, "job_id", int))

    def _counters(self, req: _Request) -> None:
        req.reply["counters"] = self.pipeline.counters()
        if self.extra:
            req.reply["counters"].update(self.extra)

    def _configure(self, req: _Request) -> None:
        if self.guard is not None and req.who != OPERATOR:
            raise ValueError(f"only the switch operator's token may configure the switch, not {req.who}'s")
        if self.configure is None:
            raise ValueError("this emulator serves UDP on loopback: install jobs with add_job, "
                             "topologies need the raw-frame backend")
        topology = Topology.from_config(_field(req.msg, "topology", dict))
        self.configure(topology)
        jobs = getattr(self.pipeline, "jobs", None)  # a controller's topology is pinned: no lease removes it
        for job in topology.jobs if isinstance(jobs, dict) else ():
            if job.job_id in jobs:
                jobs[job.job_id].origin = "configure"

    def _jobs(self, req: _Request) -> None:
        req.reply["jobs"] = self.listing()
        if self.ledger is not None:
            for job in req.reply["jobs"]:
                job["owner"] = self.ledger.owners.get(job["job_id"])

    def _state(self) -> dict:
        return self.status() if self.status is not None else {"pipes": 1, "alive": 1, "down": []}

    def _ping(self, req: _Request) -> None:
        down = self._state()["down"]
        if down:
            raise RuntimeError(f"{'; '.join(down)}; that pipe's slots are lost")

    def _status(self, req: _Request) -> None:
        req.reply["status"] = {**self._state(), **(self.info() if self.info is not None else {})}

    def _shutdown(self, req: _Request) -> None:
        if self.guard is not None and req.who != OPERATOR:
            raise ValueError(f"only the switch operator's token may shut the switch down, not {req.who}'s")
        req.shutdown = True


def _error_reply(op: Any, exc: Exception) -> dict:
    """A refused request's reply: its error in one line that names the op."""
    detail = f"missing field {exc.args[0]!r}" if type(exc) is KeyError else str(exc)
    if op and isinstance(op, str) and detail.startswith(f"{op}: "):  # a pipe's reply already names the op
        detail = detail[len(op) + 2:]
    reply = {"ok": False, "error": f"{op or 'request'}: {detail}" if op else detail}
    if isinstance(exc, Full):  # the client raises SwitchFull: a DDP job may then aggregate on its hosts
        reply["full"] = True
    return reply


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
