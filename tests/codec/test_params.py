"""CodecParams: validation, JSON round trip, agreement checks; sketch sizing; the auto cost model's
arithmetic, which every worker must reproduce bit for bit."""

import dataclasses
import json
import math
import os
import re
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from hina import codec
from hina.codec import CodecParams, auto, bitmap, sketch


def test_defaults():
    p = CodecParams(length=1000, workers=4)
    assert (p.mode, p.group, p.lanes, p.dtype) == ("auto", 0, 1024, "float32")
    assert codec.MODES == ("auto", "dense", "blocks", "aligned", "sketch")
    assert p.link_gbps > 0 and p.round_us > 0


def test_round_trip_through_json():
    p = CodecParams(length=1000, workers=4, dtype="float16", mode="aligned", group=64, lanes=256,
                    cells_per_element=1.5, seeds=(7, 8, 9), link_gbps=25, round_us=12.5)
    q = CodecParams.from_config(json.loads(p.to_json()))
    assert p == q and hash(p) == hash(q)
    assert p.fingerprint() == q.fingerprint()
    assert isinstance(q.link_gbps, float) and q.seeds == (7, 8, 9)


CHANGES = dict(length=1001, workers=5, dtype="float64", mode="sketch", group=2, lanes=512, cells_per_element=1.31,
               seeds=(0, 1, 3), link_gbps=10.5, round_us=199.0)


def test_every_field_is_in_the_fingerprint():
    assert set(CHANGES) == {f.name for f in dataclasses.fields(CodecParams)}


@pytest.mark.parametrize("field", list(CHANGES))
def test_fingerprint_and_compatibility_catch_any_difference(field):
    a = CodecParams(length=1000, workers=4)
    b = dataclasses.replace(a, **{field: CHANGES[field]})
    assert a.fingerprint() != b.fingerprint()
    a.check_compatible(CodecParams(length=1000, workers=4))
    with pytest.raises(ValueError, match=f"mismatched job parameters: {field}: "):
        a.check_compatible(b)


def test_compatibility_names_every_difference():
    a = CodecParams(length=1000, workers=4)
    b = CodecParams(length=1000, workers=4, lanes=512, group=8)
    with pytest.raises(ValueError, match="group: 0 != 8; lanes: 1024 != 512"):
        a.check_compatible(b)


@pytest.mark.parametrize("kwargs,match", [
    (dict(length=0, workers=1), "length"),
    (dict(length=10, workers=0), "workers"),
    (dict(length=10, workers=33), "workers"),
    (dict(length=10, workers=2, dtype="int64"), "unsupported dtype"),
    (dict(length=10, workers=2, mode="sparse"), "mode"),
    (dict(length=10, workers=2, mode="hina"), re.escape(str(codec.MODES))),
    (dict(length=10, workers=2, lanes=0), "lanes"),
    (dict(length=10, workers=2, cells_per_element=0), "cells_per_element"),
    (dict(length=10, workers=2, cells_per_element=float("nan")), "cells_per_element"),
    (dict(length=10, workers=2, seeds=(1, 1, 2)), "seeds"),
    (dict(length=10, workers=2, seeds=(1, 2)), "seeds"),
    (dict(length=10, workers=2, group=3), "group"),
    (dict(length=10, workers=2, group=2048), "group"),
    (dict(length=10, workers=2, group=-1), "group"),
    (dict(length=10, workers=2, link_gbps=0), "link_gbps"),
    (dict(length=10, workers=2, link_gbps=float("inf")), "link_gbps"),
    (dict(length=10, workers=2, round_us=-1), "round_us"),
    (dict(length=10, workers=2, round_us=float("nan")), "round_us"),
])
def test_invalid_parameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        CodecParams(**kwargs)


@pytest.mark.parametrize("group", [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024])
def test_every_group_choice_is_accepted(group):
    assert CodecParams(length=10, workers=2, group=group).group == group


def test_unknown_config_keys_are_refused():
    with pytest.raises(ValueError, match="unknown codec parameters: colour"):
        CodecParams.from_config({"length": 1, "workers": 1, "colour": "red"})
    with pytest.raises(ValueError, match="unknown codec parameters: max_union"):  # gone with codec v2
        CodecParams.from_config({"length": 1, "workers": 1, "max_union": 0.5})


# -- sketch sizing -----------------------------------------------------------------


@pytest.mark.parametrize("lanes,union,c,rows", [
    (1, 0, 1.3, 1),  # fullest 1: ceil(13/30)
    (1, 4, 3, 11),  # fullest 4 + 6 + 1 = 11: ceil(11 * 3/3)
    (1, 4, 1.5, 6),  # ceil(11 * 15/30) = ceil(5.5)
    (1, 9, 1.3, 9),  # fullest 19: ceil(19 * 13/30) = ceil(8.23)
    (1024, 1024 * 16, 1.3, 13),  # fullest 29: ceil(12.57)
    (1024, 1024 * 100, 0.5, 22),  # fullest 131: ceil(21.83)
])
def test_rows_for_hand_values(lanes, union, c, rows):
    assert sketch.rows_for(CodecParams(length=10, workers=1, lanes=lanes, cells_per_element=c), union) == rows


@pytest.mark.parametrize("c", [0.5, 1.0, 1.3, 2.7])
def test_rows_give_c_cells_per_element_of_the_fullest_lane_and_no_more(c):
    """3R >= c * fullest > 3(R - 1), with c read as the exact decimal it is written as."""
    p = CodecParams(length=10, workers=1, lanes=1000, cells_per_element=c)
    factor = Fraction(repr(c))
    previous = 0
    for union in np.unique(np.geomspace(1, 10**7, 400).astype(np.int64)).tolist():
        rows = sketch.rows_for(p, float(union))
        n = union / 1000
        fullest = Fraction(n + 3.0 * math.sqrt(n) + 1.0)
        assert 3 * rows >= factor * fullest
        assert rows == 1 or 3 * (rows - 1) < factor * fullest
        assert rows >= previous
        previous = rows


# -- the auto cost model's arithmetic -----------------------------------------------------


def test_exp2_neg_matches_the_library_power():
    """The fixed polynomial agrees with 2**-(x/2**16) to 1e-15 relative over the terms' range (the
    sum of up to 32 workers' capped terms, < 2**26) wherever the result is a normal float64."""
    rng = np.random.default_rng(0)
    xs = np.concatenate([np.arange(0, 70_000), rng.integers(0, 2**26, size=20_000),
                         (np.arange(1, 1023) * 65536 + np.array([[-1], [0], [1]])).ravel()])
    worst = 0.0
    for x in xs.tolist():
        if x < 0:
            continue
        exact = 2.0 ** -(x / 65536)
        got = auto._exp2_neg(x)
        if exact >= 2.0**-1021:
            worst = max(worst, abs(got - exact) / exact)
        else:
            assert 0.0 <= got <= 2.0**-1020
    assert worst <= 1e-15
    assert auto._exp2_neg(0) == 1.0 and auto._exp2_neg(65536) == 0.5 and auto._exp2_neg(65536 * 10) == 2.0**-10


@pytest.mark.parametrize("length", [1, 100, 10_007, 300_000])
@pytest.mark.parametrize("density", [0.0, 0.001, 0.05, 0.5, 1.0])
def test_one_workers_estimate_recovers_its_own_group_counts(length, density):
    rng = np.random.default_rng(length)
    own = bitmap.from_positions(np.flatnonzero(rng.random(length) < density), length)
    counts = bitmap.group_counts(own)
    est = auto.Estimate.from_aggregates(length, bitmap.count(own), auto.union_terms(counts, length))
    for k, group in enumerate(bitmap.GROUP_SIZES):
        m = -(-length // group)
        assert abs(est.occupied[k] - counts[k] / m) <= 1e-5  # terms are rounded to 2**-16 in log2
        if counts[k] == m:
            assert est.occupied[k] > 1 - 1e-9
    assert bitmap.count(own) <= est.union <= bitmap.count(own) + 1e-5 * length


def test_estimate_of_independent_workers_is_the_union_of_chances():
    """Two workers with fractions a and b of non-empty elements: 1 - (1 - a)(1 - b)."""
    length = 100_000
    rng = np.random.default_rng(1)
    terms, fractions = [], []
    for density in (0.1, 0.3):
        own = bitmap.from_positions(np.flatnonzero(rng.random(length) < density), length)
        terms.append(auto.union_terms(bitmap.group_counts(own), length))
        fractions.append(bitmap.count(own) / length)
    est = auto.Estimate.from_aggregates(length, 0, terms[0] + terms[1])
    expected = 1 - (1 - fractions[0]) * (1 - fractions[1])
    assert est.occupied[0] == pytest.approx(expected, rel=1e-4)


PLAN_CASES = [(mode, group, length, nnz, seed)
              for mode in codec.MODES for group in (0, 1, 64)
              for length, nnz, seed in [(1, 1, 0), (5000, 40, 1), (1_000_003, 900, 2), (2_000_000, 400_000, 3)]]


def plans_for(cases):
    out = []
    for mode, group, length, nnz, seed in cases:
        rng = np.random.default_rng(seed)
        p = CodecParams(length=length, workers=8, mode=mode, group=group)
        terms = sum(auto.union_terms(bitmap.group_counts(
            bitmap.from_positions(rng.choice(length, min(nnz, length), replace=False), length)), length)
            for _ in range(3))
        plan = auto.choose(p, auto.Estimate.from_aggregates(length, nnz, terms))
        out.append((plan.encoding, plan.group, sorted((k, v.hex()) for k, v in plan.seconds.items())))
    return out


def test_choose_gives_the_same_plan_for_the_same_inputs():
    rng = np.random.default_rng(5)
    terms = rng.integers(0, 2**22, size=11).astype(np.int32)
    for mode in codec.MODES:
        p = CodecParams(length=123_457, workers=8, mode=mode)
        first = auto.choose(p, auto.Estimate.from_aggregates(123_457, 1000, terms))
        again = auto.choose(p, auto.Estimate.from_aggregates(123_457, 1000, terms.copy()))
        assert first == again
        assert first.seconds[first.encoding] == min(first.seconds.values())
        assert first.encoding == mode if mode != "auto" else set(first.seconds) == set(auto.ENCODINGS)


def test_plans_are_identical_in_a_fresh_process():
    """Another interpreter (other hash seed, other import order) computes the very same plans and
    costs, to the last bit."""
    script = "from test_params import plans_for, PLAN_CASES\nprint(repr(plans_for(PLAN_CASES)))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).parent,  # `-c` imports from the working directory
                          env={**os.environ, "PYTHONHASHSEED": "12345"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == repr(plans_for(PLAN_CASES))


@pytest.mark.parametrize("mode", codec.MODES)
@pytest.mark.parametrize("group", [0, 1, 8, 1024])
def test_choose_respects_mode_and_group(mode, group):
    p = CodecParams(length=50_000, workers=4, mode=mode, group=group)
    for occupied in (0.0, 0.001, 0.1, 0.9):
        est = auto.Estimate(50_000, int(occupied * 50_000), tuple([occupied] * 11))
        plan = auto.choose(p, est)
        if mode != "auto":
            assert plan.encoding == mode and set(plan.seconds) == {mode}
        if plan.encoding in ("aligned", "sketch"):
            assert plan.group == group if group else plan.group in bitmap.GROUP_SIZES
