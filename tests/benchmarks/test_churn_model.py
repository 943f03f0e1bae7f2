"""benchmarks/churn_model.py and tenants.py's pieces: jobs arriving at and leaving one switch on the virtual
clock, through the emulator's control port code; every round exact, every slot given back."""

from __future__ import annotations

import json

import pytest

from hina.benchmarks import churn_model, tenants


@pytest.mark.parametrize("policy", ["equal", "request"])
def test_a_churn_of_jobs_leaks_no_slot_and_every_round_is_exact(tmp_path, policy):
    out = tmp_path / "churn.json"
    # 0.1 virtual hours at 1% loss: late duplicate RESULTs after a round, every answer of a full switch
    assert churn_model.main(["--hours", "0.1", "--policy", policy, "--drop", "0.01", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    c = result["counts"]
    assert result["problems"] == [] and result["leaked"] == 0 and result["exact"]
    assert c["granted"] + c["refused"] == c["arrived"] and c["left"] == c["granted"]
    assert c["rounds"] == c["exact_rounds"] > 100
    assert c["fewer"] > 0 and c["refused"] > 0  # the switch was full, and answered as each job asked
    if policy == "request":  # first come, first served: jobs waited in line too
        assert c["waited"] > 0
    assert 0 < result["most_held"] <= result["space"]
    assert all(s["held"] <= result["space"] for s in result["samples"])


def test_jains_index_is_one_for_equal_shares_and_one_over_n_for_one_taker():
    assert tenants.jain([2.0, 2.0, 2.0]) == pytest.approx(1.0)
    assert tenants.jain([1.0, 0.0, 0.0, 0.0]) == pytest.approx(0.25)
    assert tenants.jain([1.0, 3.0]) == pytest.approx(16 / 20)
