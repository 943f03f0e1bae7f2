"""A worker's view of its job on the switch: which job, how big the packets, which slots."""

from __future__ import annotations

import dataclasses
from typing import Any

from hina.control.config import JobConfig
from hina.control.ledger import DEFAULT_WHEN_FULL, Placement
from hina.wire.headers import max_words

DEFAULT_WORDS = max_words(9000)  # K: one jumbo frame per packet
DEFAULT_SLOTS = 64  # W: packets in flight per worker


@dataclasses.dataclass(frozen=True)
class JobSpec:
    """job_id, words per packet K, and the slot range [slot_base, slot_base + slots) every worker uses.

    slot_base None: where a switch's control port takes the join, the switch chooses the range
    (`placement`; `hina.control.ledger`), giving `slots` or, with when_full "fewer", at least `least`;
    with when_full "wait" the join waits in line.  Without a control port it is 0."""

    job_id: int = 1
    words: int = DEFAULT_WORDS
    slot_base: int | None = None
    slots: int = DEFAULT_SLOTS
    least: int | None = None
    when_full: str = DEFAULT_WHEN_FULL

    def __post_init__(self) -> None:
        self.switch_config(workers=1)  # the switch's own checks: job_id, K, slot range
        Placement(self.slots, self.least, self.when_full)  # and the placement's

    @property
    def first_slot(self) -> int:
        """The range's first slot: the chosen one, else 0 (no switch chose one)."""
        return 0 if self.slot_base is None else self.slot_base

    def placement(self) -> Placement | None:
        """What a join asks of the switch when it chooses the range (None: the range is fixed)."""
        return Placement(self.slots, self.least, self.when_full) if self.slot_base is None else None

    def granted(self, cfg: JobConfig | None) -> JobSpec:
        """This job on the range the switch holds it at (its join's reply); itself without one."""
        return self if cfg is None else dataclasses.replace(self, slot_base=cfg.slot_base, slots=cfg.slots,
                                                            least=None)

    def switch_config(self, workers: int, members=()) -> JobConfig:
        """The matching job configuration for the switch's control plane."""
        return JobConfig(self.job_id, workers, self.words, self.first_slot, self.slots, tuple(members))

    def to_config(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> JobSpec:
        return cls(**cfg)
