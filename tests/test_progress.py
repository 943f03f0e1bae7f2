"""hina.progress: a bar redrawn in place on a terminal, one plain line per step elsewhere, and the time left
estimated from the steps done so far."""

from __future__ import annotations

import io

import pytest

from hina.progress import Progress, clock_text, estimate_left


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_clock_text():
    assert [clock_text(s) for s in (0, 45.4, 65, 3599, 3720, -3)] == ["0s", "45s", "1m05s", "59m59s", "1h02m", "0s"]


def test_the_estimate_is_the_mean_step_times_the_steps_left_less_the_time_the_current_one_has_run():
    assert estimate_left(elapsed=0, done=0, total=10) is None  # nothing done: no estimate
    assert estimate_left(elapsed=60, done=2, total=10) == pytest.approx(240)  # 30 s a step, 8 to go
    assert estimate_left(elapsed=60, done=2, total=10, since_last=10) == pytest.approx(230)
    # a step running longer than the mean: never below the steps after it
    assert estimate_left(elapsed=60, done=2, total=10, since_last=100) == pytest.approx(210)
    assert estimate_left(elapsed=60, done=10, total=10) == 0
    assert estimate_left(elapsed=60, done=12, total=10) == 0  # overshoot (a timed run's last round)


def test_not_on_a_terminal_one_plain_line_per_step_with_done_total_and_time_left():
    clock, out = Clock(), io.StringIO()
    with Progress(4, "campaign", stream=out, clock=clock) as bar:
        assert not bar.tty  # a StringIO is no terminal
        bar.start("calibrate-star-8w")
        clock.t += 120
        bar.done("calibrate-star-8w: ok in 2m00s")
        bar.start("compare-faithful")
        clock.t += 60
        bar.print("a line of the step's own")
        bar.done()
    lines = out.getvalue().splitlines()
    assert lines == [
        "[0/4] campaign: calibrate-star-8w; 0s so far, time left unknown yet",
        "calibrate-star-8w: ok in 2m00s [1/4; 2m00s so far, about 6m00s left]",
        "[1/4] campaign: compare-faithful; 2m00s so far, about 6m00s left",
        "a line of the step's own",
        "[2/4] campaign: finished in 3m00s",
    ]
    assert "\r" not in out.getvalue() and "\x1b" not in out.getvalue()  # nothing redrawn in a log


def test_on_a_terminal_the_bar_is_redrawn_in_place_and_messages_go_above_it():
    clock, out = Clock(), Tty()
    with Progress(10, "compare", stream=out, clock=clock, tick=0, width=200) as bar:
        assert bar.tty
        bar.start("lstm on loopback")
        clock.t += 30
        bar.done()
        bar.start("lstm on Mininet at 100 Mbit/s")
        clock.t += 5
        bar.print("  mininet 0.1G dense   1.449 s")
        drawn = out.getvalue()
    text = out.getvalue()
    # every draw returns to the line's start and erases it: one line, redrawn, no newline between draws
    draws = [d for d in drawn.split("\r\x1b[K") if d]
    assert draws[-1] == ("compare [##..................] 1/10, 35s so far, about 4m25s left: "
                         "lstm on Mininet at 100 Mbit/s")
    assert "compare [....................] 0/10, 0s so far, time left unknown yet: lstm on loopback" in draws
    assert draws[-2] == "  mininet 0.1G dense   1.449 s\n"  # the message, then the bar again below it
    assert drawn.count("\n") == 1  # the message's newline only
    assert text.endswith("\r\x1b[K[1/10] compare: finished in 35s\n")  # the bar erased, a last line


def test_the_bar_fits_the_terminal_and_counts_units():
    clock, out = Clock(), Tty()
    bar = Progress(60, "soak", unit="s", stream=out, clock=clock, tick=0, width=60, label="round 1")
    clock.t += 12.4
    bar.done("round 1: exact", n=12.4, label="round 2")
    assert len(bar.bar()) < 60 and bar.bar().endswith("...")
    assert bar.counts() == "12/60 s"
    assert bar.left() == pytest.approx(47.6)
    bar.close()
    assert out.getvalue().splitlines()[0] == "round 1: exact"


def test_a_ticking_bar_redraws_while_a_step_runs():
    import time

    out = Tty()
    with Progress(2, "x", stream=out, tick=0.01, width=100) as bar:
        bar.start("waiting")
        time.sleep(0.2)
        redraws = out.getvalue().count("\r\x1b[K")
    assert redraws > 5


def test_over_wraps_an_iterable_a_step_per_item():
    out = io.StringIO()
    seen = list(Progress.over([3, 1, 2], "items", label=lambda x: f"item {x}", stream=out))
    assert seen == [3, 1, 2]
    lines = out.getvalue().splitlines()
    assert [line.split(";")[0] for line in lines[:3]] == ["[0/3] items: item 3", "[1/3] items: item 1",
                                                          "[2/3] items: item 2"]
    assert lines[-1].startswith("[3/3] items: finished in")
