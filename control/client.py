"""The emulator's control interface: JSON requests over UDP on loopback.

Requests are one JSON object per datagram with an "op" and a "seq" echoed
back; every reply has "ok" and either the result or an "error" string:

    {"op": "add_job", "job": {JobConfig.to_config()}}   install or replace a job, slots empty
    {"op": "join", "job": {...}, "member": {"worker_id": 0, "address": [host, port]}}
                                                         authorize one worker (installs the job if absent,
                                                         else checks its shape; slots are kept)
                                                         -> {"pipes": P, "job": {the job as installed}}
    {"op": "join", ..., "place": {"slots": W, "least": M, "when_full": "refuse"|"fewer"|"wait"}}
                                                         the switch chooses the job's slot range (the job's
                                                         own slot_base and slots are ignored; `ledger`):
                                                         -> {"pipes": P, "job": {...}}, or with "wait" while
                                                         no range is free {"queued": position}
    {"op": "leave", "job_id": 1, "worker_id": 0}         a member is done; the last one's leaving removes a
                                                         job that joins installed -> {"removed": bool}; with
                                                         "member": {...} (the one that joined) a rank another
                                                         member holds now stays -> {"removed": false,
                                                         "held_by": {that member}}
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
                                                         age_s, origin, pinned, lease_left_s, owner}, ...]}
                                                         (`Pipeline.listing`, summed over the pipes)
    {"op": "ping"}                                       fails naming any pipe that is down
    {"op": "shutdown"}

A switch with a token (`hina.control.auth`) refuses the requests that change
it (add_job, join, leave, remove_job, reset_job, configure, shutdown) unless
they carry "ts" and "mac", which `ControlClient` adds when it has the token
(`token=`, `token_file=`, or $HINA_TOKEN); a tenant's token also names its
owner, and a job is then changed only by its owner or the operator.

`handle` is the server side, pure; `ControlClient` the client side.
"""

from __future__ import annotations

import itertools
import json
import math
import socket
import threading
import time
from pathlib import Path
from typing import Any

from . import auth
from .config import JobConfig, Member
from .ledger import WAIT_POLL, Placement

IP_RECVERR = getattr(socket, "IP_RECVERR", 11)  # Linux: ICMP errors reach an unconnected UDP socket


class ControlError(RuntimeError):
    """The switch refused a control request; the message says why."""


class NoReply(ControlError):
    """Nothing answered the request, every try: no control port there (a data port drops it unanswered)."""


class SwitchFull(ControlError):
    """A join the switch could not give slots to now (when_full "refuse" or "fewer"); the message names the
    jobs that hold them and the remedies."""


class ControlClient:
    """Talk to a running emulator's control port.

    token: the switch's shared secret (`hina.control.auth`); by default the first line of `token_file`
    if given, else $HINA_TOKEN, else none.  With a token every request is signed (a switch without
    one ignores the signature).  owner: the tenant the token is (a token file's `OWNER SECRET` says so).
    """

    def __init__(self, address: tuple[str, int], *, timeout: float = 2.0, retries: int = 3,
                 token: bytes | str | None = None, token_file: str | Path | None = None, owner: str | None = None):
        self.address = address
        self.timeout = timeout
        self.retries = retries
        self.token = token.encode() if isinstance(token, str) else token
        self.owner = owner
        if self.token is None:
            found = auth.read_credentials(token_file)  # a TokenError (a ValueError) names a bad file
            if found is not None:
                self.owner, self.token = owner or found[0], found[1]
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sock.bind(("127.0.0.1" if address[0].startswith("127.") else "0.0.0.0", 0))
        try:  # a closed port answers with ICMP port unreachable: say so at once, not after every retry
            self._sock.setsockopt(socket.IPPROTO_IP, IP_RECVERR, 1)
        except OSError:
            pass
        self._seq = itertools.count(1)
        # one request at a time: threads sharing a client would otherwise take each other's replies off its socket
        self._lock = threading.Lock()
        self.replaced: Member | None = None  # what the last join took its rank from (`join`)
        self.granted: JobConfig | None = None  # the job as the switch holds it, after the last join
        # the least round trip of a request answered at its first try: the path to the switch, as a worker's
        # first timers start from it (`Worker(path_rtt=...)`); inf before any
        self.round_trip = math.inf

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> ControlClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def request(self, op: str, **fields: Any) -> dict:
        """Send one request and return its reply (retried `retries` times, `timeout` seconds each); a
        ControlError says why not.  Safe from several threads: they take turns."""
        with self._lock:
            return self._request(op, fields)

    def _request(self, op: str, fields: dict[str, Any]) -> dict:
        seq = next(self._seq)
        msg = {"op": op, "seq": seq, **fields}
        if self.token:
            msg = auth.sign(msg, self.token, owner=self.owner)  # retries send these same bytes: applied once
        data = json.dumps(msg).encode()
        where = f"{self.address[0]}:{self.address[1]}"
        for attempt in range(self.retries):
            sent = time.monotonic()
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
                if attempt == 0:
                    self.round_trip = min(self.round_trip, time.monotonic() - sent)
                if not reply.get("ok"):
                    kind = SwitchFull if reply.get("full") else ControlError
                    raise kind(f"{op} refused by the switch: {reply.get('error')}")
                return reply
        raise NoReply(f"no reply from the switch's control port {where} to {op!r} ({self.retries} "
                      f"{'try' if self.retries == 1 else 'tries'}, {self.timeout:g} s each)")

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

    def join(self, job: JobConfig, member: Member, *, place: Placement | None = None, deadline: float = 600.0,
             waiting=None) -> int:
        """Authorize `member` for `job` (installing it if the switch lacks it); return the switch's
        pipes, which a worker's loss detection needs (`Worker(pipes=...)`).  `replaced` is then the
        member this one took the rank from, where it was held from another address (a restarted
        worker, or a second worker given the same rank), else None; `granted` the job as the switch
        holds it (its slot range).

        place: let the switch choose the slot range (`hina.control.ledger`; `job`'s own range is
        ignored).  With when_full "wait" the join is asked again every WAIT_POLL seconds while the job
        waits in line, calling `waiting(position)` when its position changes, for up to `deadline`
        seconds (then a ControlError)."""
        fields = {"job": job.to_config(), "member": member.to_config()}
        if place is not None:
            fields["place"] = place.to_config()
        give_up = time.monotonic() + deadline
        position = None
        while True:
            reply = self.request("join", **fields)
            if "queued" not in reply:
                break
            if reply["queued"] != position:
                position = reply["queued"]
                if waiting is not None:
                    waiting(position)
            if time.monotonic() > give_up:
                raise ControlError(f"join: job {job.job_id} waited {deadline:g} s for slots and is still number "
                                   f"{position} in line")
            time.sleep(WAIT_POLL)
        self.replaced = Member.from_config(reply["replaced"]) if reply.get("replaced") else None
        self.granted = JobConfig.from_config(reply["job"]) if reply.get("job") else job
        return reply.get("pipes", 1)

    def leave(self, job_id: int, worker_id: int, *, member: Member | None = None) -> bool:
        """Say that member `worker_id` of job `job_id` is done: the last member's leaving removes a job that
        joins installed, freeing its slots.  Whether the job is gone.  With `member` (the one that joined), a
        rank that another member took over since is left alone: it is that one's now."""
        fields = {"member": member.to_config()} if member is not None else {}
        return bool(self.request("leave", job_id=job_id, worker_id=worker_id, **fields).get("removed"))

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
