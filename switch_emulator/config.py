"""What the control plane tells the switch about a job.

A job owns a range of slots, has N workers and one multicast group: its
members.  A member is a worker_id and the *source* its UPDATEs must come
from, which is also where its RESULTs go: a UDP address (host, port) in
loopback mode, an ingress port number on raw interfaces (Mininet, BMv2).
Anything that does not match is dropped by the data plane.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Hashable

from .headers import HEADER_BYTES, MAX_SLOTS, MAX_WORKERS, WORD_BYTES

MAX_FRAME_BYTES = 65507  # the largest UDP payload over IPv4


@dataclasses.dataclass(frozen=True)
class Member:
    worker_id: int
    source: Hashable  # (host, port) for UDP, an int port for raw interfaces

    def to_config(self) -> dict[str, Any]:
        if isinstance(self.source, tuple):
            return {"worker_id": self.worker_id, "address": list(self.source)}
        return {"worker_id": self.worker_id, "port": self.source}

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> "Member":
        if not isinstance(cfg, dict) or "worker_id" not in cfg:
            raise ValueError(f"a member is {{\"worker_id\": N, \"address\": [host, port]}} or "
                             f"{{\"worker_id\": N, \"port\": P}}, got {json.dumps(cfg)}")
        if "address" in cfg:
            host, port = cfg["address"]
            return cls(int(cfg["worker_id"]), (str(host), int(port)))
        if "port" in cfg:
            return cls(int(cfg["worker_id"]), int(cfg["port"]))
        raise ValueError(f"member {cfg!r} needs an 'address' [host, port] or a 'port'")


@dataclasses.dataclass(frozen=True)
class JobConfig:
    """job_id; workers N; words K per packet; slots [slot_base, slot_base + slots); members."""

    job_id: int
    workers: int
    words: int
    slot_base: int
    slots: int
    members: tuple[Member, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "members", tuple(self.members))
        if not 0 <= self.job_id < 1 << 16:
            raise ValueError(f"job_id must fit 16 bits, got {self.job_id}")
        if not 1 <= self.workers <= MAX_WORKERS:
            raise ValueError(f"job {self.job_id}: workers must be 1..{MAX_WORKERS}, got {self.workers}")
        if not 1 <= self.words or HEADER_BYTES + WORD_BYTES * self.words > MAX_FRAME_BYTES:
            raise ValueError(f"job {self.job_id}: words per packet must be 1..{(MAX_FRAME_BYTES - HEADER_BYTES) // 4}, "
                             f"got {self.words}")
        if self.slots < 1 or self.slot_base < 0 or self.slot_base + self.slots > MAX_SLOTS:
            raise ValueError(f"job {self.job_id}: slots [{self.slot_base}, {self.slot_base + self.slots}) "
                             f"must lie within [0, {MAX_SLOTS})")
        ids = [m.worker_id for m in self.members]
        if len(set(ids)) != len(ids):
            raise ValueError(f"job {self.job_id}: a worker_id appears twice among the members")
        if any(not 0 <= i < self.workers for i in ids):
            raise ValueError(f"job {self.job_id}: member worker_ids must be 0..{self.workers - 1}, got {sorted(ids)}")

    @property
    def full_mask(self) -> int:
        return (1 << self.workers) - 1

    @property
    def frame_bytes(self) -> int:
        return HEADER_BYTES + WORD_BYTES * self.words

    def overlaps(self, other: "JobConfig") -> bool:
        return self.slot_base < other.slot_base + other.slots and other.slot_base < self.slot_base + self.slots

    def to_config(self) -> dict[str, Any]:
        return {"job_id": self.job_id, "workers": self.workers, "words": self.words,
                "slot_base": self.slot_base, "slots": self.slots,
                "members": [m.to_config() for m in self.members]}

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> "JobConfig":
        """From {"job_id", "workers", "words", "slots", optional "slot_base" (0) and "members"}."""
        if not isinstance(cfg, dict):
            raise ValueError(f"a job is a JSON object with job_id, workers, words, slots, got {json.dumps(cfg)}")
        known = {"job_id", "workers", "words", "slot_base", "slots", "members"}
        unknown = set(cfg) - known
        if unknown:
            raise ValueError(f"unknown job fields: {', '.join(sorted(unknown))} (a job has {', '.join(sorted(known))})")
        who = f"job {cfg['job_id']}" if "job_id" in cfg else "a job"
        missing = [k for k in ("job_id", "workers", "words", "slots") if k not in cfg]
        if missing:
            raise ValueError(f"{who} lacks {', '.join(repr(k) for k in missing)}")
        fields = {}
        for k in ("job_id", "workers", "words", "slot_base", "slots"):
            v = cfg.get(k, 0)
            if isinstance(v, bool) or not isinstance(v, int):
                raise ValueError(f"{who}: {k} must be an integer, got {json.dumps(v)}")
            fields[k] = v
        members = cfg.get("members", [])
        if not isinstance(members, list):
            raise ValueError(f"{who}: members must be a list, got {json.dumps(members)}")
        return cls(**fields, members=tuple(Member.from_config(m) for m in members))
