"""A worker's view of its job on the switch: which job, how big the packets, which slots."""

from __future__ import annotations

import dataclasses
from typing import Any

from hina.control.config import JobConfig
from hina.wire.headers import max_words

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
        self.switch_config(workers=1)  # the switch's own checks: job_id, K, slot range

    def switch_config(self, workers: int, members=()) -> JobConfig:
        """The matching job configuration for the switch's control plane."""
        return JobConfig(self.job_id, workers, self.words, self.slot_base, self.slots, tuple(members))

    def to_config(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> JobSpec:
        return cls(**cfg)
