"""What the control plane tells the switch about a job.

A job owns a range of slots, has N workers and one multicast group: its
members.  A member is a worker_id and the *source* its UPDATEs must come
from, which is also where its RESULTs go: a UDP address (host, port) in
loopback mode, an ingress port number on raw interfaces (Mininet, BMv2).
Anything that does not match is dropped by the data plane.
"""

from __future__ import annotations

import dataclasses
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
        known = {"job_id", "workers", "words", "slot_base", "slots", "members"}
        unknown = set(cfg) - known
        if unknown:
            raise ValueError(f"unknown job fields: {', '.join(sorted(unknown))}")
        return cls(int(cfg["job_id"]), int(cfg["workers"]), int(cfg["words"]), int(cfg.get("slot_base", 0)),
                   int(cfg["slots"]), tuple(Member.from_config(m) for m in cfg.get("members", ())))
