"""The emulator's side of the control port: one JSON request in, one reply out, never raising.

The requests and their replies are described in `hina.control.client`, whose
`ControlClient` is the other side.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from typing import Any

from hina.control.auth import Guard
from hina.control.config import JobConfig, Member
from hina.control.topology import Topology

from .pipeline import JobMismatch, Pipeline


def handle(pipeline: Pipeline, request: bytes, extra: dict[str, Any] | None = None,
           configure: Callable[[Topology], None] | None = None,
           status: Callable[[], dict] | None = None, *, listing: Callable[[], list] | None = None,
           info: Callable[[], dict] | None = None, guard: Guard | None = None, peer: Any = None,
           where: tuple[str, int] | None = None) -> tuple[dict, bool]:
    """Apply one request; return (reply, shutdown requested).  Never raises on bad input.

    `configure` installs a whole topology; only raw-frame backends have one.  `status` says
    which pipes are alive, where there are several (`pipes.Pipes`, which is then `pipeline` too);
    `info` adds the server's own lines to `status` (uptime, lease, leases).  `listing` lists the
    jobs (default `pipeline.listing()`).  With a `guard` (the switch has a token) the requests that
    change the switch must carry proof of it (`hina.control.auth`); `peer` is the sender's address.
    `where`, the control port's address, goes into the command a refused join is told to run.
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
        if op == "add_job":
            pipeline.add_job(JobConfig.from_config(_field(msg, "job", dict)))
        elif op == "join":
            try:
                replaced = pipeline.join(JobConfig.from_config(_field(msg, "job", dict)),
                                         Member.from_config(_field(msg, "member", dict)))
                if replaced is not None:  # its rank was held from elsewhere: the joining worker says so
                    reply["replaced"] = replaced.to_config()
            except JobMismatch as exc:
                raise JobMismatch(f"{exc} (remove it: {remove_command(exc.job_id, where)})", exc.job_id) from None
            reply["pipes"] = status()["pipes"] if status is not None else 1  # RESULTs are in order per pipe
        elif op == "remove_job":
            pipeline.remove_job(_field(msg, "job_id", int))
        elif op == "reset_job":
            pipeline.reset_job(_field(msg, "job_id", int))
        elif op == "counters":
            reply["counters"] = pipeline.counters()
            if extra:
                reply["counters"].update(extra)
        elif op == "configure":
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
        elif op in ("ping", "status"):
            state = status() if status is not None else {"pipes": 1, "alive": 1, "down": []}
            if op == "status":
                reply["status"] = {**state, **(info() if info is not None else {})}
            elif state["down"]:
                raise RuntimeError(f"{'; '.join(state['down'])}; that pipe's slots are lost")
        elif op == "shutdown":
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
    reply["seq"] = seq
    if guard is not None and isinstance(msg, dict):
        guard.remember(msg, reply)
    return reply, False


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
