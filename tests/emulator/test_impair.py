"""Impairments: seeded and reproducible; reordering never swaps packets of one flow; delay keeps order."""

import pytest

from hina.emulator.impair import Impairment, ImpairmentConfig


def run(cfg, packets, step=1e-4):
    imp = Impairment(cfg)
    out, now = [], 0.0
    for i, (flow, p) in enumerate(packets):
        now = i * step
        out += imp.apply((flow, p), flow, now)
        out += imp.due(now)
    out += imp.due(now + 10)
    return out, imp


def test_reproducible_and_roughly_at_the_asked_rates():
    cfg = ImpairmentConfig(drop=0.1, dup=0.05, reorder=0.05, seed=3)
    packets = [(i % 4, i) for i in range(20_000)]
    a, imp = run(cfg, packets)
    b, _ = run(cfg, packets)
    assert a == b
    assert 0.08 < imp.stats["dropped"] / 20_000 < 0.12
    assert 0.03 < imp.stats["duplicated"] / 20_000 < 0.07
    assert imp.stats["reordered"] > 0
    assert len(a) == 20_000 - imp.stats["dropped"] + imp.stats["duplicated"]


def test_reordering_never_swaps_one_flow():
    packets = [(i % 3, i) for i in range(5000)]
    out, imp = run(ImpairmentConfig(reorder=0.3, dup=0.1, seed=1), packets)
    assert imp.stats["reordered"] > 100
    for flow in range(3):
        seq = [p for f, p in out if f == flow]
        assert seq == sorted(seq)
    assert [p for _, p in out] != sorted(p for _, p in out)  # but across flows it does reorder


def test_held_packet_is_released_after_max_hold_without_other_traffic():
    imp = Impairment(ImpairmentConfig(reorder=1.0, max_hold=0.005))
    assert imp.apply("a", "f", 0.0) == [] and imp.next_timer() == 0.005
    assert imp.due(0.004) == [] and imp.due(0.005) == ["a"]


def test_delay_line_keeps_order_and_timing():
    imp = Impairment(ImpairmentConfig(delay=0.002))
    assert imp.apply("a", 1, 0.0) == [] and imp.apply("b", 2, 0.001) == []
    assert imp.next_timer() == 0.002
    assert imp.due(0.0025) == ["a"] and imp.due(0.01) == ["b"]


@pytest.mark.parametrize("bad", [dict(drop=1.5), dict(dup=-0.1), dict(delay=-1)])
def test_bad_probabilities_are_refused(bad):
    with pytest.raises(ValueError):
        ImpairmentConfig(**bad)
