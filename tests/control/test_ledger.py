"""The switch's slots shared by jobs: free ranges, the share policies, the answers of a full switch, the queue."""

from __future__ import annotations

import pytest

from hina.control.ledger import Full, Held, Ledger, Placement, cap, choose, free_runs


def listing(*held: Held) -> list[dict]:
    """What `Pipeline.listing` gives the ledger: each job's range and workers."""
    return [{"job_id": h.job_id, "slot_base": h.slot_base, "slots": h.slots, "workers": h.workers} for h in held]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_free_runs_are_the_gaps_between_held_ranges_within_the_space():
    held = [Held(2, 64, 32), Held(1, 0, 16), Held(3, 200, 100)]
    assert free_runs(held, 256) == [(16, 48), (96, 104)]
    assert free_runs([], 10) == [(0, 10)]
    assert free_runs([Held(1, 0, 10)], 10) == []
    assert free_runs([Held(1, 300, 10)], 256) == [(0, 256)]  # a fixed range beyond the space takes none of it


def test_each_policy_caps_a_new_job_from_the_jobs_already_there():
    others = [Held(1, 0, 8, workers=2), Held(2, 8, 8, workers=6)]
    assert cap("equal", 96, 4, others) == 32  # 96 / 3 jobs
    assert cap("workers", 96, 4, others) == 32  # 96 x 4 / (4 + 2 + 6)
    assert cap("workers", 96, 12, others) == 57  # 96 x 12 / (12 + 2 + 6), rounded down
    assert cap("request", 96, 4, others) == 96
    assert cap("equal", 96, 4, []) == 96


def test_choose_gives_the_lowest_range_that_fits_or_with_fewer_the_largest():
    held = [Held(1, 0, 16), Held(2, 40, 8)]  # free: [16, 40) and [48, 64)
    assert choose(Placement(16), 2, held, 64, "request") == (16, 16)
    assert choose(Placement(20), 2, held, 64, "request") == (16, 20)
    assert choose(Placement(30), 2, held, 64, "request") is None
    assert choose(Placement(30, 10, "fewer"), 2, held, 64, "request") == (16, 24)  # the largest run
    assert choose(Placement(30, 25, "fewer"), 2, held, 64, "request") is None  # below its least
    assert choose(Placement(30), 2, held, 64, "equal") == (16, 21)  # capped at 64 / 3


def test_a_full_switch_refuses_in_one_line_naming_the_holders_and_the_remedies():
    ledger = Ledger(96, "request")
    ledger.owners[1] = "alice"
    with pytest.raises(Full) as err:
        ledger.place(3, 4, Placement(64), listing(Held(1, 0, 64, 4), Held(2, 64, 16, 2)))
    line = str(err.value)
    assert "\n" not in line
    assert line.startswith("job 3 asks for 64 slots and the switch has 16 of its 96 free, in runs of at most 16")
    assert "job 1 [0, 64) of alice (4 workers), job 2 [64, 80) (2 workers)" in line
    assert "--when-full fewer" in line and "--when-full wait" in line and "hina switch remove" in line


def test_fewer_runs_on_what_is_free_and_wait_queues_first_come_first_served():
    clock = Clock()
    ledger = Ledger(96, "request", clock=clock)
    busy = listing(Held(1, 0, 64, 4))
    assert ledger.place(2, 2, Placement(64, 16, "fewer"), busy) == (64, 32)
    assert ledger.place(3, 2, Placement(64, when_full="wait"), busy) == 1
    assert ledger.place(4, 2, Placement(48, when_full="wait"), busy) == 2
    assert ledger.place(3, 2, Placement(64, when_full="wait"), busy) == 1  # asking again keeps its place
    assert list(ledger.waiting) == [3, 4]
    # job 1 leaves: job 4 fits too, but job 3 is first in line
    assert ledger.place(4, 2, Placement(48, when_full="wait"), []) == 2
    assert ledger.place(3, 2, Placement(64, when_full="wait"), []) == (0, 64)
    assert ledger.place(4, 2, Placement(48, when_full="wait"), listing(Held(3, 0, 64))) == 1  # 32 free: next
    assert list(ledger.waiting) == [4]


def test_a_job_passes_the_queue_only_where_the_first_in_line_still_fits_beside_it():
    clock = Clock()
    ledger = Ledger(100, "request", clock=clock)
    held = listing(Held(1, 0, 50))
    assert ledger.place(2, 2, Placement(60, when_full="wait"), held) == 1  # needs 60, 50 free
    with pytest.raises(Full, match="1 job waits ahead of it"):
        ledger.place(3, 2, Placement(10), held)  # it would leave job 2 40: refused, not let past
    assert ledger.place(4, 2, Placement(10), listing(Held(1, 0, 30))) == (30, 10)  # job 2 still fits: let past
    clock.now += 10  # job 2 stopped asking: it leaves the line
    assert ledger.place(3, 2, Placement(10), held) == (50, 10)
    assert not ledger.waiting


def test_forget_takes_a_job_off_the_books():
    ledger = Ledger(64)
    ledger.owners[5] = "bob"
    ledger.place(6, 2, Placement(64, when_full="wait"), listing(Held(5, 0, 64)))
    ledger.forget(5)
    ledger.forget(6)
    assert ledger.owners == {} and not ledger.waiting


@pytest.mark.parametrize("bad, why", [({"slots": 0}, "slots must be"), ({"slots": 8, "least": 9}, "least slots"),
                                      ({"slots": 8, "when_full": "later"}, "when_full must be"),
                                      ({"slots": 8, "extra": 1}, "unknown fields"), ([], "a placement is")])
def test_a_bad_placement_is_refused_naming_the_value(bad, why):
    with pytest.raises(ValueError, match=why):
        Placement.from_config(bad)
