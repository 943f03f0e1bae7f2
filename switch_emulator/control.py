"""The emulator's control interface: JSON requests over UDP on loopback.

Requests are one JSON object per datagram with an "op" and a "seq" echoed
back; every reply has "ok" and either the result or an "error" string:

    {"op": "add_job", "job": {JobConfig.to_config()}}   install or replace a job, slots empty
    {"op": "join", "job": {...}, "member": {"worker_id": 0, "address": [host, port]}}
                                                         authorize one worker (installs the job if absent,
                                                         else checks its shape; slots are kept)
                                                         -> {"pipes": P}
    {"op": "remove_job", "job_id": 1}
    {"op": "reset_job", "job_id": 1}                     empty every slot copy of the job
    {"op": "configure", "topology": {Topology}}          raw-frame backends: hosts, MAC table, jobs
    {"op": "counters"}                                   -> {"counters": Pipeline.counters()}, summed over the
                                                         pipes, each pipe's own in "pipes" (when several)
    {"op": "status"}                                     -> {"status": {"pipes": P, "alive": A, "down": [...]}}
    {"op": "ping"}                                       fails naming any pipe that is down
    {"op": "shutdown"}

`handle` is the server side, pure; `ControlClient` the client side.
"""

from __future__ import annotations

import itertools
import json
import socket
import time
from typing import Any, Callable

from .config import JobConfig, Member
from .pipeline import Pipeline
from .topology import Topology


class ControlError(RuntimeError):
    """The switch refused a control request; the message says why."""


def handle(pipeline: Pipeline, request: bytes, extra: dict[str, Any] | None = None,
           configure: Callable[[Topology], None] | None = None,
           status: Callable[[], dict] | None = None) -> tuple[dict, bool]:
    """Apply one request; return (reply, shutdown requested).  Never raises on bad input.

    `configure` installs a whole topology; only raw-frame backends have one.  `status` says
    which pipes are alive, where there are several (`pipes.Pipes`, which is then `pipeline` too).
    """
    seq = None
    try:
        msg = json.loads(request)
        if not isinstance(msg, dict):
            raise ValueError("a control request is a JSON object")
        seq = msg.get("seq")
        op = msg.get("op")
        reply: dict[str, Any] = {"ok": True}
        if op == "add_job":
            pipeline.add_job(JobConfig.from_config(_field(msg, "job", dict)))
        elif op == "join":
            pipeline.join(JobConfig.from_config(_field(msg, "job", dict)),
                          Member.from_config(_field(msg, "member", dict)))
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
            configure(Topology.from_config(_field(msg, "topology", dict)))
        elif op in ("ping", "status"):
            state = status() if status is not None else {"pipes": 1, "alive": 1, "down": []}
            if op == "status":
                reply["status"] = state
            elif state["down"]:
                raise RuntimeError(f"{'; '.join(state['down'])}; that pipe's slots are lost")
        elif op == "shutdown":
            return {"ok": True, "seq": seq}, True
        else:
            raise ValueError(f"unknown control op {op!r}")
    except Exception as exc:  # a bad request must never stop the switch
        detail = f"missing field {exc.args[0]!r}" if type(exc) is KeyError else str(exc)
        reply = {"ok": False, "error": f"{op or 'request'}: {detail}" if op else detail}
    reply["seq"] = seq
    return reply, False


def _field(msg: dict, name: str, kind: type):
    """msg[name], which must be a `kind` (a JSON object for dict, an integer for int)."""
    if name not in msg:
        raise KeyError(name)
    value = msg[name]
    if kind is int and isinstance(value, bool) or not isinstance(value, kind):
        want = "a JSON object" if kind is dict else "an integer"
        raise ValueError(f"{name!r} must be {want}, got {json.dumps(value)}")
    return value


class ControlClient:
    """Talk to a running emulator's control port."""

    def __init__(self, address: tuple[str, int], *, timeout: float = 2.0, retries: int = 3):
        self.address = address
        self.timeout = timeout
        self.retries = retries
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sock.bind(("127.0.0.1" if address[0].startswith("127.") else "0.0.0.0", 0))
        self._seq = itertools.count(1)

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> "ControlClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def request(self, op: str, **fields: Any) -> dict:
        seq = next(self._seq)
        data = json.dumps({"op": op, "seq": seq, **fields}).encode()
        for _ in range(self.retries):
            self._sock.sendto(data, self.address)
            deadline = time.monotonic() + self.timeout
            while (left := deadline - time.monotonic()) > 0:
                self._sock.settimeout(left)
                try:
                    raw, _ = self._sock.recvfrom(1 << 20)
                except socket.timeout:
                    break
                reply = json.loads(raw)
                if reply.get("seq") != seq:
                    continue  # a late reply to an earlier retry
                if not reply.get("ok"):
                    raise ControlError(f"{op} refused by the switch: {reply.get('error')}")
                return reply
        raise ControlError(f"no reply from the switch's control port {self.address} to {op!r}")

    def add_job(self, job: JobConfig) -> None:
        self.request("add_job", job=job.to_config())

    def join(self, job: JobConfig, member: Member) -> int:
        """Authorize `member` for `job` (installing it if the switch lacks it); return the switch's
        pipes, which a worker's loss detection needs (`Worker(pipes=...)`)."""
        return self.request("join", job=job.to_config(), member=member.to_config()).get("pipes", 1)

    def remove_job(self, job_id: int) -> None:
        self.request("remove_job", job_id=job_id)

    def reset_job(self, job_id: int) -> None:
        self.request("reset_job", job_id=job_id)

    def counters(self) -> dict:
        counters = self.request("counters")["counters"]
        counters["jobs"] = {int(k): v for k, v in counters.get("jobs", {}).items()}
        return counters

    def ping(self) -> None:
        self.request("ping")

    def status(self) -> dict:
        """{"pipes": P, "alive": A, "down": [a line naming each dead pipe]} (and the pipes' pids)."""
        return self.request("status")["status"]

    def shutdown(self) -> None:
        self.request("shutdown")
