"""The congestion room: the window's rules (`hina.host.congestion`), the pacer on a virtual clock, and each
setting reaching the record the compiled sender runs on."""

import math

import numpy as np
import pytest

from hina.codec.ops import Op
from hina.host.congestion import CongestionWindow, Pacer
from hina.host.congestion_rules import SAMPLES
from hina.host.congestion_settings import CONTEST, CONTEST_FAIR, CongestionSettings
from hina.host.window import PhaseTransfer, RttEstimator, SlotPool
from hina.wire.headers import AT_MSG_TYPE, FRAME_OVERHEAD, HEADER_BYTES, HinaHeader, MsgType


def delay_window(limit, **settings):
    """A window on the delay rule (the fair-share rules' changes have tests of their own)."""
    return CongestionWindow(limit, CongestionSettings(fair=False, **settings))


def answer(x, frame, now):
    """The switch's RESULT to one of `x`'s UPDATEs (the same words, as a switch with one worker answers)."""
    result = bytearray(frame)
    result[AT_MSG_TYPE] = MsgType.RESULT
    return x.receive(bytes(result), now)


def offsets(frames):
    return [HinaHeader.unpack(f).offset for f in frames]


def test_the_window_halves_once_per_congestion_event_and_grows_back():
    w = delay_window(64, initial=8)
    base, late = 0.001, 0.02  # 19 ms over the least round trip
    for _ in range(8):
        w.on_result(base, base)
    assert w.chunks == 16  # slow start: one more per RESULT
    w.on_result(late, base)  # one late round trip among timely ones: the host, not a queue
    assert w.chunks == 17
    w.on_loss(sent_at=0.5, now=1.0, min_rtt=base)  # a loss without a standing queue: the link's
    assert w.chunks == 17 and w.cuts == 0
    for _ in range(SAMPLES):  # every recent round trip late: a queue stands
        w.on_result(late, base)
    assert w.chunks == 18  # grew while a timely one was still among the last SAMPLES
    w.on_result(late, base)
    assert w.chunks == 18  # no growth
    w.on_loss(sent_at=1.0, now=2.0, min_rtt=base)
    assert w.cwnd == 9 and w.cuts == 1
    w.on_loss(sent_at=1.5, now=2.1, min_rtt=base)  # sent before the cut: the same event
    assert w.cwnd == 9 and w.cuts == 1
    for _ in range(19):
        w.on_result(base, base)
    assert w.cwnd == pytest.approx(10.9, abs=0.05)  # congestion avoidance: about one more per window of RESULTs
    for _ in range(SAMPLES):
        w.on_result(late, base)
    w.on_loss(sent_at=2.2, now=3.0, min_rtt=base)
    assert w.chunks == 5 and w.cuts == 2
    for i in range(100):
        w.on_loss(sent_at=10.0 + i, now=10.5 + i, min_rtt=base)
    assert w.chunks == 2  # the floor
    for _ in range(10_000):
        w.on_result(base, base)
    assert w.chunks == 64  # never past the job's W slots


def test_a_loss_without_a_queue_is_the_link_s_and_keeps_the_window():
    w = delay_window(64, initial=32)
    w.on_result(0.0012, 0.001)  # round trips at the floor: no queue
    w.on_loss(sent_at=1.0, now=2.0, min_rtt=0.001)
    assert w.chunks == 33 and w.cuts == 0


def results_every(w, gap, rtt, min_rtt, n, now):
    """n RESULTs, one every `gap` seconds after `now`, each with round trip `rtt`; returns the last time."""
    for _ in range(n):
        now += gap
        w.on_result(rtt, min_rtt, now)
    return now


def test_a_queue_the_window_could_have_made_itself_never_contests_it():
    w = delay_window(64, initial=64)
    base = 0.001
    now = results_every(w, 1e-4, base, base, 100, 0.0)  # alone: 10,000 RESULTs a second at 1 ms
    # 64 chunks at 10,000 a second queue for up to 6.4 ms: 8 ms round trips are a queue, and our own
    now = results_every(w, 1e-4, 0.008, base, 64 * 20, now)
    assert w.queueing(w.recent_rtt, base) and not w.contested and w.contests == 0
    assert w.cwnd == 64


def test_a_standing_queue_more_than_the_window_could_hold_is_contested_until_it_drains():
    """8 chunks at 10,000 RESULTs a second can queue 0.8 ms; a 50 ms queue that stands while the RESULTs
    slow to 2,500 a second is another flow's (a TCP flow filling a drop-tail queue and taking the link).
    The delay rule would never grow again; after CONTEST windows of it the window grows as Reno's,
    cuts by 30% on a loss (CUBIC's), and the first round trip near the least hands it back to the
    delay rule."""
    w = delay_window(64, initial=8)
    w.ssthresh = 8  # congestion avoidance: one chunk more per window of RESULTs
    base = 0.001
    now = results_every(w, 1e-4, base, base, 200, 0.0)  # alone, measured over 4 round trips, twice
    assert w.delivery_rate == pytest.approx(10_000, rel=0.03)
    now = results_every(w, 4e-4, 0.05, base, SAMPLES, now)  # every recent one late
    held = w.cwnd
    now = results_every(w, 4e-4, 0.05, base, 400, now)  # 160 ms: the slower rate is not measured yet
    assert not w.contested and w.cwnd == held  # the delay rule: no growth while a queue stands
    now = results_every(w, 4e-4, 0.05, base, 1000, now)  # two more 200 ms measurements
    assert w.recent_rate == pytest.approx(2_500, rel=0.03)
    assert w.contested and w.contests == 1
    assert w.cwnd > held + 1  # contested: it grows although the queue stands
    before = w.cwnd
    w.on_loss(sent_at=now - 0.05, now=now, min_rtt=base)
    assert w.cwnd == pytest.approx(0.7 * before) and w.cuts == 1
    now = results_every(w, 4e-4, base, base, SAMPLES, now)  # the queue drained
    assert not w.contested
    now = results_every(w, 4e-4, 0.05, base, SAMPLES, now)
    held = w.cwnd
    results_every(w, 4e-4, 0.05, base, 10, now)
    assert w.cwnd == held and w.contests == 1  # a queue again: the delay rule holds until it stands again


def test_waiting_for_the_job_s_slowest_worker_at_full_pace_is_never_contested():
    """A worker whose round trips hold a 50 ms wait for a peer's UPDATE, its RESULTs still coming at
    the job's full pace: nothing takes the link, so the queue is the job's own."""
    w = delay_window(64, initial=8)
    base = 0.001
    now = results_every(w, 1e-4, base, base, 200, 0.0)
    results_every(w, 1e-4, 0.05, base, 5000, now)
    assert not w.contested and w.contests == 0 and w.recent_rate == pytest.approx(10_000, rel=0.03)


def test_without_a_delivery_rate_nothing_is_contested():
    w = delay_window(64, initial=8)
    results_every(w, 0.0, 0.05, 0.001, 1000, 0.0)  # every RESULT at one instant: no rate measured
    assert not w.contested and w.cwnd == 8


def test_the_window_limits_chunks_in_flight():
    w = delay_window(8, initial=2)
    x = PhaseTransfer(job_id=4, worker_id=1, words=3, pool=SlotPool(10, 8), rtt=RttEstimator(), tag=9, op=Op.OR,
                      payload=np.arange(60, dtype=np.int32), name="index", now=0.0, deadline=1.0, window=w)
    first = x.start(0.0)
    assert offsets(first) == [0, 3]
    assert offsets(answer(x, first[0], 0.01)) == [6, 9]  # window 3 after one RESULT: 2 new in flight


@pytest.mark.parametrize("fair", [False, True])
def test_a_timeout_cuts_the_window_only_under_the_delay_rule(fair):
    """A timer that fires with a queue standing is a loss to the delay rule (halved); the fair-share
    rules keep the window (a late peer fires timers too), and RACK's losses still cut it."""
    w = CongestionWindow(64, CongestionSettings(initial=32, fair=fair))
    for _ in range(3):
        w.on_result(0.05, min_rtt=0.01, now=1.0)  # round trips 40 ms over the least: a queue stands
    w.on_timeout(sent_at=0.9, now=1.0, min_rtt=0.01)
    assert (w.cwnd, w.cuts) == ((32, 0) if fair else (16, 1))
    w.on_loss(sent_at=0.95, now=1.1, min_rtt=0.01)
    # a RACK loss: the fair-share window's first cut (halved: not contested); the delay rule's cut at 1.0
    # already covers a chunk sent before it
    assert w.cuts == 1 and w.cwnd == 16


# -- each setting reaches the record the compiled sender runs on ----------------------------------------
@pytest.mark.parametrize("settings,want", [
    (CongestionSettings(), {"fair": True, "cwnd": 16, "minimum": 2, "queue_delay": 5e-3, "contest": CONTEST_FAIR}),
    (CongestionSettings(fair=False), {"fair": False, "contest": CONTEST}),
    (CongestionSettings(initial=5, minimum=3), {"cwnd": 5, "ssthresh": 64, "minimum": 3, "limit": 64}),
    (CongestionSettings(initial=500, minimum=100), {"cwnd": 64, "minimum": 64}),  # never past W
    (CongestionSettings(queue_delay=0.002, contest=math.inf), {"queue_delay": 0.002, "contest": math.inf}),
])
def test_each_window_setting_is_in_the_window_s_record(settings, want):
    w = CongestionWindow(64, settings)
    assert {name: w.state[name][0] for name in want} == want
    assert w.settings is settings


@pytest.mark.parametrize("mbps,gain,quantum", [(100.0, 1.25, 1.5e-3), (40.0, 1.0, 0.0), (None, 2.0, 1e-3)])
def test_the_pacer_s_settings_are_in_the_window_s_record(mbps, gain, quantum):
    w = CongestionWindow(64, CongestionSettings(pace_mbps=mbps, pace_gain=gain, pace_quantum=quantum))
    pacer = w.state["pacer"][0]  # what the compiled sender reads: the window's own record, not a copy
    assert (pacer["mbps"], pacer["gain"], pacer["quantum"]) == (mbps or 0.0, gain, quantum)
    assert pacer["per_byte"] == (8 / (mbps * 1e6 * gain) if mbps else 0.0)
    assert w.pacer.rate_mbps == mbps and w.pacer.gain == gain and w.pacer.quantum == quantum
    w.pacer.sent(1.0, 1000)  # through the Python object: the window's record moves
    assert pacer["until"] == (1.0 + 1000 * pacer["per_byte"] if mbps else -math.inf)


def test_a_pacer_alone_holds_new_chunks_a_quantum_ahead_of_the_link():
    p = Pacer(CongestionSettings(pace_mbps=80.0, pace_gain=1.0, pace_quantum=1e-3))  # 10 bytes a microsecond
    assert p.release_at() == -math.inf  # nothing sent: at once
    for _ in range(3):
        p.sent(0.0, 5000)  # 0.5 ms each
    assert p.until == pytest.approx(1.5e-3) and p.release_at() == pytest.approx(0.5e-3)
    p.sent(2.0, 5000)  # after an idle gap: from now, not from when the link last went idle
    assert p.until == pytest.approx(2.0005)
    assert Pacer(CongestionSettings()).release_at() == -math.inf and Pacer(CongestionSettings()).rate_mbps is None


@pytest.mark.parametrize("pace", [None, 100.0])
def test_the_pacer_lets_new_chunks_out_at_the_links_rate(pace):
    words = 2239
    settings = CongestionSettings(fair=False, initial=64, pace_mbps=pace)
    x = PhaseTransfer(job_id=1, worker_id=0, words=words, pool=SlotPool(0, 64), rtt=RttEstimator(), tag=1,
                      op=Op.ADD, payload=np.zeros(words * 64, np.int32), name="dense", now=0.0, deadline=5.0,
                      window=CongestionWindow(64, settings))
    first = x.start(0.0)
    dues = [float(x._fl[slot]["due"]) for slot in range(len(first))]
    if pace is None:
        assert len(first) == 64 and x.next_timer() > 0.05  # a window at once, nothing to wait for
        assert len(set(dues)) == 1  # every timer the same: the estimate's timeout
        return
    # each chunk's timer waits, past the estimate's timeout, for the chunks ahead of it to cross the link up and
    # back down at the pacer's rate
    # at 100 Mbit/s (times the pacer's gain) a 9 kB frame takes about 0.6 ms: a quantum's worth goes at once
    per_frame = 8 * (HEADER_BYTES + 4 * words + FRAME_OVERHEAD) / (pace * 1e6 * settings.pace_gain)
    assert dues == pytest.approx([dues[0] + 2 * k * per_frame for k in range(len(first))])
    assert len(first) == int(settings.pace_quantum / per_frame) + 1
    at = x.next_timer()
    assert at == pytest.approx(len(first) * per_frame - settings.pace_quantum)
    assert x.poll(at - 1e-6) == []  # not before its time
    more = x.poll(at)
    assert len(more) == 1 and x.next_timer() == pytest.approx(at + per_frame)


def paced_run(settings, *, chunks=300, words=2239, rtt=1e-3):
    """A transfer of `chunks` chunks on a virtual clock, every UPDATE answered `rtt` after it left; returns
    each new frame's (time, bytes on the wire) and the transfer."""
    x = PhaseTransfer(job_id=1, worker_id=0, words=words, pool=SlotPool(0, 64), rtt=RttEstimator(), tag=1,
                      op=Op.ADD, payload=np.zeros(words * chunks, np.int32), name="dense", now=0.0, deadline=5.0,
                      window=CongestionWindow(64, settings))
    sent, answers = [], []

    def went(frames, now):
        sent.extend((now, len(f) + FRAME_OVERHEAD) for f in frames)
        answers.extend((now + rtt, f) for f in frames)

    went(x.start(0.0), 0.0)
    while not x.done:
        answers.sort(key=lambda a: a[0])
        now = min(answers[0][0] if answers else math.inf, x.next_timer())
        if answers and answers[0][0] == now:
            went(answer(x, answers.pop(0)[1], now), now)
        else:
            went(x.poll(now), now)
    return sent, x


@pytest.mark.parametrize("mbps,gain", [(100.0, 1.25), (400.0, 1.0)])
def test_a_paced_transfer_s_frames_leave_no_faster_than_the_rate(mbps, gain):
    """On a virtual clock, with answers coming back 1 ms after each frame (the window is never the bound):
    over any stretch of time the frames sent carry at most the paced rate's bytes, a quantum's worth and
    one frame more; and over the whole transfer the pacer holds them to that rate, no slower."""
    settings = CongestionSettings(pace_mbps=mbps, pace_gain=gain)
    sent, x = paced_run(settings)
    assert x.stats["retransmissions"] == 0 and len(sent) == x.chunks
    times = np.array([t for t, _ in sent])
    sizes = np.array([n for _, n in sent], float)
    rate = mbps * 1e6 * gain / 8  # bytes a second
    ends = np.cumsum(sizes)
    for i in range(len(sent)):  # frames i..j, all sent within [times[i], times[j]]
        carried = ends[i:] - (ends[i - 1] if i else 0.0)
        assert np.all(carried <= rate * (times[i:] - times[i] + settings.pace_quantum) + sizes[i:] + 1e-6), i
    # the link busy at that rate: a quantum's worth at once, then the rest as the link takes it
    assert ends[-1] - sizes[-1] == pytest.approx(rate * (times[-1] + settings.pace_quantum), rel=0.01)


def test_unpaced_the_same_transfer_goes_a_window_at_a_time():
    sent, _ = paced_run(CongestionSettings(initial=64))
    times = np.array([t for t, _ in sent])
    assert np.count_nonzero(times == 0.0) == 64  # the first window at once


def test_the_sender_s_kernels_are_stamped_with_the_congestion_rules_they_compile_in():
    """numba checks a cached kernel against its own file alone, and the sender's kernels compile the window's
    and the pacer's rules in: so the sender's stamp names congestion_rules.py, and an edit there clears the
    sender's cache the next time a transfer starts (`window.warm`), instead of running the old rules."""
    from hina import kernels

    facts = kernels.fingerprint("sender")
    assert {"sendplane.py", "congestion_rules.py", "wire/headers.py"} <= set(facts)
