"""The emulator's side of the control port: one JSON request in, one reply out, never raising.

The requests and their replies are described in `hina.control.client`, whose
`ControlClient` is the other side.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from hina.control.config import JobConfig, Member
from hina.control.topology import Topology

from .pipeline import Pipeline


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
