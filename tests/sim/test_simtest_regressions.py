"""Every scenario the simulation campaign (benchmarks/simtest.py) found failing with the sender as it was when they
were drawn, kept whole in simtest_regressions.json (the scenario itself, so that a change to the drawing cannot
lose one), each named for what it found and holding the measurements and the reading of its replay (`found`).

Each must stay exact (no wrong sum, no refusal where the sum is promised).  Each must also keep its bound, which
none did with the sender they were found with; since its timers were fit to the path and the switch answers a
repeat with PENDING, all but those in `STILL_OVER` do.  Those are expected to fail (strict), so the change that
brings one within its bound says so.  The names' first words are the findings:

- initial-rto: a round waited for the sender's first timeout of 0.1 s (no RTT sample yet) after a frame of its
  first window was lost (to a lossy link, a switch queue, a restart), then 0.2 s more if lost again;
- gave-up: a worker raised AggregationTimeout where its sum was promised, its backed-off timeout past its deadline;
- resent-partials: each worker's resend of a chunk made its leaf send the partial up again, once per worker, and
  the slower uplinks' queues overflowed, the losses feeding more resends;
- rto-floor: lost frames waited for timeouts of at least 20 ms, backed off, on paths whose loaded round trip is
  tens or hundreds of microseconds;
- probe-floor: a round's tail, with nothing sent behind it to show a loss, waited for tail probes of at least 2 ms.

The rest of a name says what the scenario had (a restart, a kill, jobs at once, a straggler, loss, reordering, a
spread start) and its seed, which `python benchmarks/simtest.py --replay SEED` replays while the drawing stays as
it was.  Two were made by hand, not drawn (staggered-128): 128 workers at 100 Gbit/s in racks of 4 under one
50 Gbit/s uplink each, 32-packet ports, 100 chunks of DeepLight's words, starting at once and over 20 us."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from hina.benchmarks import simtest
from hina.sim import ns3sim

CASES = json.loads((Path(__file__).parent / "simtest_regressions.json").read_text())
missing = ns3sim.available()
pytestmark = [pytest.mark.slow, pytest.mark.skipif(missing is not None, reason=str(missing))]


@functools.cache
def replayed(name: str) -> dict:
    record, _ = simtest.run(simtest.Scenario.from_dict(CASES[name]["scenario"]))
    return record


def test_every_case_is_a_scenario_with_its_seed_and_what_it_found():
    assert CASES
    for name, case in CASES.items():
        assert name.endswith(f"-{case['seed']}") and case["scenario"]["seed"] == case["seed"]
        assert "Reading:" in case["found"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_kept_scenario_stays_exact(name):
    record = replayed(name)
    assert not record["inexact"] and record["exact"], record["what"]


# Over their bound still with the sender as it is (marked "still_over" in the JSON): the heaviest loss on the
# slowest, most oversubscribed fabrics,
# where every worker's repeat makes its leaf send the partial up again (resent-partials), and tails whose loss
# waits for a probe on paths of tens of microseconds (probe-floor, rto-floor).  Strict: the change that brings
# one within its bound says so.  Every other kept case keeps its bound.
STILL_OVER = {name for name, case in CASES.items() if case.get("still_over")}
OVER = pytest.mark.xfail(strict=True, reason="over its bound with the sender as it is: see STILL_OVER")


@pytest.mark.parametrize("name", [pytest.param(n, marks=OVER) if n in STILL_OVER else n for n in sorted(CASES)])
def test_a_kept_scenario_keeps_its_bound(name):
    record = replayed(name)
    assert not record["over_bound"], record["what"]
