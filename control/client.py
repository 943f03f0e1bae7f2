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
    {"op": "status"}                                     -> {"status": {"pipes": P, "alive": A, "down": [...],
                                                         "uptime_s", "lease_s", "token": bool, "jobs": J,
                                                         "leases": {job_id: seconds left, or null: pinned}}}
    {"op": "jobs"}                                       -> {"jobs": [{job_id, workers, words, slot_base, slots,
                                                         members, counters, state, idle_s, frame_s, refused_s,
                                                         age_s, origin, pinned, lease_left_s}, ...]}
                                                         (`Pipeline.listing`, summed over the pipes)
    {"op": "ping"}                                       fails naming any pipe that is down
    {"op": "shutdown"}

A switch with a token (`hina.control.auth`) refuses the requests that change
it (add_job, join, remove_job, reset_job, configure, shutdown) unless they
carry "ts" and "mac", which `ControlClient` adds when it has the token
(`token=`, `token_file=`, or $HINA_TOKEN).

`handle` is the server side, pure; `ControlClient` the client side.
"""

from __future__ import annotations

import itertools
import json
import socket
import time
from pathlib import Path
from typing import Any

from . import auth
from .config import JobConfig, Member

IP_RECVERR = getattr(socket, "IP_RECVERR", 11)  # Linux: ICMP errors reach an unconnected UDP socket


class ControlError(RuntimeError):
    """The switch refused a control request; the message says why."""


class ControlClient:
    """Talk to a running emulator's control port.

    token: the switch's shared secret (`hina.control.auth`); by default the first line of `token_file`
    if given, else $HINA_TOKEN, else none.  With a token every request is signed (a switch without
    one ignores the signature).
    """

    def __init__(self, address: tuple[str, int], *, timeout: float = 2.0, retries: int = 3,
                 token: bytes | str | None = None, token_file: str | Path | None = None):
        self.address = address
        self.timeout = timeout
        self.retries = retries
        self.token = token.encode() if isinstance(token, str) else token
        if self.token is None:
            self.token = auth.read_token(token_file)  # a TokenError (a ValueError) names a bad file
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sock.bind(("127.0.0.1" if address[0].startswith("127.") else "0.0.0.0", 0))
        try:  # a closed port answers with ICMP port unreachable: say so at once, not after every retry
            self._sock.setsockopt(socket.IPPROTO_IP, IP_RECVERR, 1)
        except OSError:
            pass
        self._seq = itertools.count(1)
        self.replaced: Member | None = None  # what the last join took its rank from (`join`)

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> ControlClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def request(self, op: str, **fields: Any) -> dict:
        seq = next(self._seq)
        msg = {"op": op, "seq": seq, **fields}
        if self.token:
            msg = auth.sign(msg, self.token)  # retries send these same bytes: the switch applies it once
        data = json.dumps(msg).encode()
        where = f"{self.address[0]}:{self.address[1]}"
        for _ in range(self.retries):
            try:
                self._sock.sendto(data, self.address)
            except OSError as exc:
                raise ControlError(f"{op}: cannot reach the control port {where}: {exc.strerror or exc}") from None
            deadline = time.monotonic() + self.timeout
            while (left := deadline - time.monotonic()) > 0:
                self._sock.settimeout(left)
                try:
                    raw, _ = self._sock.recvfrom(1 << 20)
                except TimeoutError:
                    break
                except ConnectionRefusedError:
                    if self._refused_here():
                        raise ControlError(f"{op} refused: nothing listens on the control port {where}") from None
                    continue
                except OSError as exc:  # another ICMP error (host or network unreachable, ...)
                    raise ControlError(f"{op}: cannot reach the control port {where}: {exc.strerror or exc}") from None
                try:
                    reply = json.loads(raw)
                except ValueError:
                    continue  # not a reply of ours
                if not isinstance(reply, dict):
                    continue
                if reply.get("seq") != seq:
                    continue  # a late reply to an earlier retry
                if not reply.get("ok"):
                    raise ControlError(f"{op} refused by the switch: {reply.get('error')}")
                return reply
        raise ControlError(f"no reply from the switch's control port {self.address} to {op!r}")

    def _refused_here(self) -> bool:
        """Whether the ICMP error just reported was about our switch's address (drains the error queue)."""
        try:
            _, _, _, offender = self._sock.recvmsg(1, 1024, socket.MSG_ERRQUEUE | socket.MSG_DONTWAIT)
        except (OSError, AttributeError):
            return True  # no queue to look at: the one address we send to
        try:
            return offender[1] == self.address[1] and offender[0] == socket.gethostbyname(self.address[0])
        except (OSError, IndexError, TypeError):
            return True

    def add_job(self, job: JobConfig) -> None:
        self.request("add_job", job=job.to_config())

    def join(self, job: JobConfig, member: Member) -> int:
        """Authorize `member` for `job` (installing it if the switch lacks it); return the switch's
        pipes, which a worker's loss detection needs (`Worker(pipes=...)`).  `replaced` is then the
        member this one took the rank from, where it was held from another address (a restarted
        worker, or a second worker given the same rank), else None."""
        reply = self.request("join", job=job.to_config(), member=member.to_config())
        self.replaced = Member.from_config(reply["replaced"]) if reply.get("replaced") else None
        return reply.get("pipes", 1)

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
        """{"pipes": P, "alive": A, "down": [a line naming each dead pipe], "uptime_s", "lease_s", "token",
        "jobs", "leases": {job_id: seconds left or None (pinned)}} (and the pipes' pids)."""
        status = self.request("status")["status"]
        if "leases" in status:
            status["leases"] = {int(k): v for k, v in status["leases"].items()}
        return status

    def jobs(self) -> list[dict]:
        """Every job on the switch: its shape, members, counters, state (idle, active, refusing), seconds
        since a member was last heard (idle_s), its lease (lease_left_s; None: pinned), where it came from."""
        return self.request("jobs")["jobs"]

    def shutdown(self) -> None:
        self.request("shutdown")
