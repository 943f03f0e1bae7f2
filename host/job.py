"""A worker's view of its job on the switch: which job, how big the packets, which slots."""

from __future__ import annotations

import dataclasses
from typing import Any

from switch_emulator.config import JobConfig
from switch_emulator.headers import MAX_SLOTS, max_words

DEFAULT_WORDS = max_words(9000)  # K: one jumbo frame per packet
DEFAULT_SLOTS = 64  # W: packets in flight per worker


@dataclasses.dataclass(frozen=True)
class JobSpec:
    """job_id, words per packet K, and the slot range [slot_base, slot_base + slots) every worker uses."""

    job_id: int = 1
    words: int = DEFAULT_WORDS
    slot_base: int = 0
    slots: int = DEFAULT_SLOTS

    def __post_init__(self) -> None:
        if not 0 <= self.job_id < 1 << 16:
            raise ValueError(f"job_id must fit 16 bits, got {self.job_id}")
        if self.words < 1:
            raise ValueError(f"words per packet must be positive, got {self.words}")
        if self.slots < 1 or self.slot_base < 0 or self.slot_base + self.slots > MAX_SLOTS:
            raise ValueError(f"slots [{self.slot_base}, {self.slot_base + self.slots}) must lie within [0, {MAX_SLOTS})")

    def switch_config(self, workers: int, members=()) -> JobConfig:
        """The matching job configuration for the switch's control plane."""
        return JobConfig(self.job_id, workers, self.words, self.slot_base, self.slots, tuple(members))

    def to_config(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> "JobSpec":
        return cls(**cfg)
