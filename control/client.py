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
from typing import Any

from .config import JobConfig, Member


class ControlError(RuntimeError):
    """The switch refused a control request; the message says why."""


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

    def __enter__(self) -> ControlClient:
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
                except TimeoutError:
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
