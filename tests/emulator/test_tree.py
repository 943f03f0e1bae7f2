"""Aggregation trees (docs/design.md, "Aggregation trees"; docs/trees.md): every rule frame by frame on pure pipelines,
then workers under leaves under spines on a virtual network, bit for bit the star's words under loss."""

import dataclasses

import numpy as np
import pytest

from hina.codec.ops import Op
from hina.control import JobConfig, Member
from hina.emulator import Pipeline
from hina.sim.netsim import VirtualNetwork, expected, run_transfers
from hina.wire import Drop, Flags, MsgType
from hina.wire.headers import HinaHeader, pack_header

K = 4
SPINE = ("spine", 0)


def src(w):
    return (f"10.0.0.{w + 1}", 5000)


def update(worker, words, *, op=Op.ADD, slot=0, version=0, offset=0, phase=7, msg_type=MsgType.UPDATE,
           flags=0, job=1):
    words = list(words) + [0] * (K - len(words))
    return pack_header(msg_type, op, job, worker, flags, (version << 15) | slot, offset, K, phase) + \
        np.array(words, dtype=">i4").tobytes()


def result(words, **kw):
    """What a parent sends down: a RESULT (its worker_id is whichever child completed the parent's copy)."""
    return update(1, words, msg_type=MsgType.RESULT, **kw)


def payload(frame):
    return np.frombuffer(frame, dtype=">i4", offset=16).tolist()


def leaf(children=(0, 1), workers=4, member=1, parents=(SPINE,), slots=4):
    """A leaf holding workers `children` of a job of `workers`, member `member` of its parents' job."""
    p = Pipeline()
    mask = sum(1 << w for w in children)
    p.add_job(JobConfig(1, workers, K, 0, slots, tuple(Member(w, src(w)) for w in children), mask=mask,
                        parents=tuple(Member(member, s) for s in parents)))
    return p


def complete(p, children=(0, 1), **kw):
    emit = None
    for w in children:
        emit = p.update(update(w, [w + 1, 10 * (w + 1)], **kw), src(w))
    return emit


def test_a_complete_copy_goes_up_as_one_update_with_the_member_id():
    p = leaf()
    assert p.update(update(0, [1, 10], op=Op.ADD, slot=2, version=1, offset=64, phase=9), src(0)) is None
    emit = p.update(update(1, [2, 20], op=Op.ADD, slot=2, version=1, offset=64, phase=9), src(1))
    assert emit.dests == (SPINE,)
    h = HinaHeader.unpack(emit.frame)
    assert (h.msg_type, h.op, h.job_id, h.worker_id, h.flags, h.slot, h.version, h.offset, h.count, h.phase) == \
        (MsgType.UPDATE, Op.ADD, 1, 1, 0, 2, 1, 64, K, 9)
    assert payload(emit.frame) == [3, 30, 0, 0]
    assert p.counters()["jobs"][1] == {"updates": 2, "results": 0, "resends": 0, "pending": 0, "sent_up": 1,
                                       "resent_up": 0, "drops": {}}


def test_the_parents_result_is_stored_and_multicast_to_the_children():
    p = leaf()
    complete(p)
    emit = p.update(result([100, 200, 300, 400]), SPINE)
    assert emit.dests == (src(0), src(1))
    h = HinaHeader.unpack(emit.frame)
    assert (h.msg_type, h.flags, h.slot, h.offset, h.phase) == (MsgType.RESULT, 0, 0, 0, 7)  # a fresh multicast
    assert payload(emit.frame) == [100, 200, 300, 400]
    assert p.jobs[1].total[0] == 1 and p.counters()["jobs"][1]["results"] == 1
    # a child that lost it asks again: the stored total, by unicast, as on one switch
    again = p.update(update(1, [2, 20]), src(1))
    assert again.dests == (src(1),) and HinaHeader.unpack(again.frame).flags == Flags.RESEND
    assert payload(again.frame) == [100, 200, 300, 400] and p.jobs[1].resends == 1


def test_a_duplicate_after_forwarding_sends_the_partial_up_again():
    p = leaf()
    first = complete(p)
    again = p.update(update(0, [1, 10]), src(0))  # the UPDATE up or the RESULT down was lost
    assert again.dests == (SPINE,) and again.frame == first.frame
    assert p.counters()["jobs"][1]["resent_up"] == 1 and p.jobs[1].resends == 0
    assert p.update(update(0, [1, 10], version=1, offset=16), src(0)) is None  # the other copy is untouched


def test_a_total_the_parent_resent_goes_down_flagged_as_a_resend():
    """A worker takes no round trip from an answer to a repeat; a total the parent sent as a RESEND (a leaf's
    partial sent up again) is one, for every child."""
    p = leaf()
    complete(p)
    emit = p.update(result([100, 200, 300, 400], flags=Flags.RESEND), SPINE)
    assert emit.dests == (src(0), src(1)) and HinaHeader.unpack(emit.frame).flags == Flags.RESEND


def test_a_duplicate_of_an_incomplete_copy_is_dropped_and_the_children_hear_who_is_counted():
    p = leaf()
    p.update(update(0, [1]), src(0))
    emit = p.update(update(0, [1]), src(0))
    assert p.drops == {Drop.DUPLICATE: 1} and p.jobs[1].sent_up == 0
    assert emit.dests == (src(0), src(1)) and HinaHeader.unpack(emit.frame).flags == Flags.PENDING
    assert payload(emit.frame)[0] == 0b01


def test_a_pending_from_the_parent_that_counted_this_leaf_goes_down_as_the_leafs_own():
    """The parent holds this leaf's partial and waits for another leaf: every child here is counted, so each
    hears it with the leaf's own bitmap (the parent's names leaves, not workers)."""
    p = leaf()
    complete(p)
    emit = p.update(result([1 << 1, 0, 0, 0], flags=Flags.PENDING), SPINE)
    assert emit.dests == (src(0), src(1)) and HinaHeader.unpack(emit.frame).flags == Flags.PENDING
    assert payload(emit.frame)[0] == 0b11 and p.jobs[1].total[0] == 0 and p.counters()["jobs"][1]["pending"] == 1


def test_a_pending_from_the_parent_that_lacks_this_leaf_sends_the_partial_up_again():
    p = leaf()
    first = complete(p)
    again = p.update(result([1 << 0, 0, 0, 0], flags=Flags.PENDING), SPINE)
    assert again.dests == (SPINE,) and again.frame == first.frame  # its partial was lost on the way up
    assert p.counters()["jobs"][1]["resent_up"] == 1


def test_a_result_from_anywhere_but_the_parent_is_dropped_and_counted():
    p = leaf()
    complete(p)
    for stranger in (src(0), ("spine", 1), src(7)):
        assert p.update(result([666] * K), stranger) is None
    assert p.drops == {Drop.NOT_PARENT: 3} and p.jobs[1].total[0] == 0
    assert payload(p.update(result([5] * K), SPINE).frame) == [5] * K  # the parent's still lands


def test_a_result_on_a_root_is_a_bad_message_type():
    p = Pipeline()
    p.add_job(JobConfig(1, 2, K, 0, 4, (Member(0, src(0)), Member(1, src(1)))))
    assert p.update(result([1]), src(0)) is None and p.drops == {Drop.BAD_MSG_TYPE: 1}


def test_a_refusal_from_the_parent_goes_down_whatever_the_copy_holds():
    """The spine refused the other leaf's partial; this leaf's copy never went up: relayed all the same."""
    lf = leaf()
    lf.update(update(0, [1]), src(0))
    down = lf.update(result([1], flags=Flags.STALE_RUN, offset=0x77), SPINE)
    assert down.dests == (src(0), src(1)) and HinaHeader.unpack(down.frame).flags == Flags.STALE_RUN
    assert lf.jobs[1].counter[0] == 1 and lf.drops == {Drop.STALE_RUN: 1}
    assert lf.update(result([1], flags=Flags.STALE_RUN), src(0)) is None  # still only from the parent
    assert lf.drops[Drop.NOT_PARENT] == 1


@pytest.mark.parametrize("how", ["incomplete", "offset", "phase", "empty"])
def test_a_result_for_a_copy_that_did_not_send_it_up_is_stale(how):
    """A late RESULT (the copy moved on, or never went up) is never written into the copy."""
    p = leaf()
    if how != "empty":
        (p.update(update(0, [1]), src(0)) if how == "incomplete" else complete(p))
    late = result([9] * K, offset=K if how == "offset" else 0, phase=8 if how == "phase" else 7)
    assert p.update(late, SPINE) is None
    assert p.drops == {Drop.STALE: 1} and not p.jobs[1].total.any()


def test_a_second_result_for_a_copy_holding_the_total_is_a_duplicate():
    p = leaf()
    complete(p)
    p.update(result([5] * K), SPINE)
    assert p.update(result([5] * K, flags=Flags.RESEND), SPINE) is None  # answers a partial sent up again
    assert p.drops == {Drop.DUPLICATE: 1} and p.jobs[1].results == 1


def test_slots_spread_over_parents_by_slot_number():
    p = leaf(parents=(("spine", 0), ("spine", 1)), slots=4)
    for slot in range(4):
        emit = complete(p, slot=slot)
        assert emit.dests == (("spine", slot % 2),)
    assert p.update(result([1] * K, slot=1), ("spine", 0)) is None and p.drops == {Drop.NOT_PARENT: 1}
    assert p.update(result([1] * K, slot=1), ("spine", 1)).dests == (src(0), src(1))


def test_copy_reuse_on_a_leaf_starts_without_the_old_total():
    p = leaf()
    for use in range(4):
        version, offset = use % 2, use * 4 * K
        up = complete(p, version=version, offset=offset)
        assert up.dests == (SPINE,)
        assert p.update(update(0, [1, 10], version=version, offset=offset), src(0)).dests == (SPINE,)  # no total
        assert p.update(result([use] * K, version=version, offset=offset), SPINE).dests == (src(0), src(1))


def spine(leaves=2):
    p = Pipeline()
    p.add_job(JobConfig(1, leaves, K, 0, 4, tuple(Member(i, ("leaf", i)) for i in range(leaves))))
    return p


def test_two_tiers_return_the_star_sum():
    leaves = [leaf(children=(0, 1), member=0), leaf(children=(2, 3), member=1)]
    top = spine()
    ups = [complete(lf, children=ch) for lf, ch in zip(leaves, ((0, 1), (2, 3)))]
    assert top.update(ups[0].frame, ("leaf", 0)) is None
    down = top.update(ups[1].frame, ("leaf", 1))
    assert down.dests == (("leaf", 0), ("leaf", 1))
    outs = [lf.update(down.frame, SPINE) for lf in leaves]
    assert [o.dests for o in outs] == [(src(0), src(1)), (src(2), src(3))]
    assert payload(outs[0].frame) == payload(outs[1].frame) == [10, 100, 0, 0]  # 1+2+3+4, 10+20+30+40


def test_stale_run_on_the_spine_reaches_every_worker_under_the_leaf():
    """A restarted job: the leaves were emptied (the workers joined), the spine still holds the earlier
    run's copy (another run salt in the offset): the spine refuses the partial, the leaf multicasts the
    refusal down, and each worker of the copy gets STALE_RUN, never a sum."""
    lf, top = leaf(member=0), spine()
    top.update(update(1, [5], offset=0x1234), ("leaf", 1))  # the earlier run's partial from the other leaf
    up = complete(lf)  # the new run: salt 0
    refusal = top.update(up.frame, ("leaf", 0))
    assert refusal.dests == (("leaf", 0), ("leaf", 1)) and HinaHeader.unpack(refusal.frame).flags == Flags.STALE_RUN
    down = lf.update(refusal.frame, SPINE)
    assert down.dests == (src(0), src(1))
    h = HinaHeader.unpack(down.frame)
    assert (h.msg_type, h.flags, h.offset) == (MsgType.RESULT, Flags.STALE_RUN, 0)
    assert payload(down.frame) == [3, 30, 0, 0]  # the leaf's own partial, echoed, not stored as a total
    assert not lf.jobs[1].total.any() and lf.drops == {Drop.STALE_RUN: 1} and top.drops == {Drop.STALE_RUN: 1}


def test_stale_run_on_the_leaf_is_refused_there():
    lf = leaf()
    lf.update(update(0, [1], offset=0x1234), src(0))
    fresh = update(1, [1], offset=0)
    emit = lf.update(fresh, src(1))
    assert emit.dests == (src(0), src(1)) and HinaHeader.unpack(emit.frame).flags == Flags.STALE_RUN
    assert lf.jobs[1].sent_up == 0


def test_a_joining_worker_keeps_the_leafs_share_and_is_held_to_its_mask():
    lf = leaf(children=(0, 1))
    cfg = JobConfig(1, 4, K, 0, 4)  # what a worker asks for: the whole job
    lf.join(cfg, Member(1, ("10.9.9.9", 1)))
    assert lf.job_config(1).mask == 0b11 and lf.job_config(1).parents == (Member(1, SPINE),)
    with pytest.raises(ValueError, match="not children of this switch"):
        lf.join(cfg, Member(2, src(2)))
    # the leftovers of an earlier run: a complete copy (2 arrivals = this leaf's children) is emptied
    lf.join(cfg, Member(1, src(1)))
    complete(lf)
    lf.join(cfg, Member(0, src(0)))
    assert lf.jobs[1].counter[0] == 0 and lf.jobs[1].bitmap[0] == 0


def test_tree_job_config_round_trips_and_is_checked():
    cfg = JobConfig(3, 8, K, 0, 4, (Member(4, 1), Member(5, 2)), mask=0x30,
                    parents=(Member(1, 9), Member(1, ("10.0.0.9", 7))))
    assert JobConfig.from_config(cfg.to_config()) == cfg
    assert cfg.children == 2 and cfg.parent_of(5) == Member(1, ("10.0.0.9", 7))
    assert JobConfig(3, 8, K, 0, 4).to_config().keys() == {"job_id", "workers", "words", "slot_base", "slots",
                                                           "members"}
    for bad, match in [(dict(mask=0), "mask"), (dict(mask=0x100), "mask"),
                       (dict(parents=(Member(0, 1), Member(1, 2))), "one member id"),
                       (dict(parents=tuple(Member(0, p) for p in range(9))), "at most 8")]:
        with pytest.raises(ValueError, match=match):
            dataclasses.replace(JobConfig(3, 8, K, 0, 4), **bad)
    with pytest.raises(ValueError, match="parents must be a list"):
        JobConfig.from_config({**cfg.to_config(), "parents": {"worker_id": 0, "port": 1}})


# -- workers, leaves and spines on a virtual network ------------------------------------------------


class TreeNetwork(VirtualNetwork):
    """`VirtualNetwork` with a tree of pipelines: worker w under leaf w // per_leaf, every leaf under
    every spine.  Every hop (worker-leaf, leaf-spine, both ways) loses, duplicates and delays packets
    as the star's one hop does; `uplink_frames` counts the frames that crossed leaf-spine links."""

    def __init__(self, leaves, spines, per_leaf, rng, **kw):
        super().__init__(leaves[0], rng, **kw)
        self.leaves, self.spines, self.per_leaf = leaves, spines, per_leaf
        self.uplink_frames = 0

    def _at_switch(self, worker, frame):
        self._at(("leaf", worker // self.per_leaf), frame, ("w", worker))

    def _at(self, node, frame, source):
        kind, i = node
        emit = (self.leaves if kind == "leaf" else self.spines)[i].update(frame, source)
        if emit is None:
            return
        for dest in emit.dests:
            if dest[0] == "w":
                self._schedule(("down", dest), lambda d=dest, f=emit.frame: self.on_result(d[1], f))
            else:  # between a leaf and a spine
                self.uplink_frames += 1
                self._schedule((node, dest), lambda d=dest, f=emit.frame, n=node: self._at(d, f, n))


def tree(workers, per_leaf, spines, *, words, slot_base, slots, job_id=5, leaf_aggregates=True):
    """The pipelines of a leaf/spine tree for one job: slot s rooted at spine s mod `spines`."""
    n_leaves = -(-workers // per_leaf)
    leaves = []
    for i in range(n_leaves):
        children = range(i * per_leaf, min(workers, (i + 1) * per_leaf))
        p = Pipeline()
        p.add_job(JobConfig(job_id, workers, words, slot_base, slots, tuple(Member(w, ("w", w)) for w in children),
                            mask=sum(1 << w for w in children),
                            parents=tuple(Member(i, ("spine", s)) for s in range(spines))))
        leaves.append(p)
    tops = []
    for _s in range(spines):
        p = Pipeline()
        p.add_job(JobConfig(job_id, n_leaves, words, slot_base, slots,
                            tuple(Member(i, ("leaf", i)) for i in range(n_leaves))))
        tops.append(p)
    return leaves, tops


@pytest.mark.parametrize("op", list(Op), ids=[o.name for o in Op])
@pytest.mark.parametrize("shape", [(4, 2, 1), (8, 2, 2), (7, 3, 1)], ids=["2leaf-1spine", "4leaf-2spine",
                                                                        "uneven"])
@pytest.mark.parametrize("drop", [0.0, 0.05])
def test_tree_is_bit_identical_to_the_star_under_loss(op, shape, drop):
    workers, per_leaf, spines = shape
    rng = np.random.default_rng(workers * 100 + per_leaf * 10 + spines + int(op) + int(drop * 100))
    payloads = [rng.integers(-(2**31), 2**31, size=300).astype(np.int32) for _ in range(workers)]
    kw = dict(job_id=5, words=K, slot_base=2, slots=6, drop=drop, dup=drop, rounds=3)
    star = Pipeline()
    star.add_job(JobConfig(5, workers, K, 2, 6, tuple(Member(w, ("w", w)) for w in range(workers))))
    star_results, _, _ = run_transfers(star, payloads, op, rng=np.random.default_rng(1), **kw)
    leaves, spines_ = tree(workers, per_leaf, spines, words=K, slot_base=2, slots=6)
    net = TreeNetwork(leaves, spines_, per_leaf, np.random.default_rng(2), drop=drop, dup=drop)
    tree_results, net, _ = run_transfers(leaves[0], payloads, op, rng=None, net=net, **kw)
    want = expected(op, payloads)
    for w in range(workers):
        for r in range(3):
            assert np.array_equal(tree_results[w][r], want), f"worker {w} round {r}"
            assert tree_results[w][r].tobytes() == star_results[w][r].tobytes()
    chunks = 3 * -(-300 // K)
    ups = sum(lf.jobs[5].sent_up for lf in leaves)
    assert ups == chunks * len(leaves)  # each leaf sent each chunk's copy up once ...
    totals = sum(lf.jobs[5].results for lf in leaves)
    assert totals == chunks * len(leaves)  # ... and took each total in once
    if spines > 1:  # every spine rooted its share of the slots
        assert all(sp.jobs[5].results > 0 for sp in spines_)
    if drop == 0:
        assert net.uplink_frames == 2 * chunks * len(leaves)
        assert sum(lf.jobs[5].resent_up for lf in leaves) == 0
    else:  # losses were recovered on the uplinks by partials sent up again
        assert sum(lf.jobs[5].resent_up for lf in leaves) > 0
    for p in leaves + spines_:
        assert p.drops.keys() <= {Drop.DUPLICATE, Drop.STALE}


class SpineOnlyNetwork(VirtualNetwork):
    """The same wires with plain leaves: every worker's UPDATE and every RESULT to a worker crosses the
    leaf's uplink (the spine holds the whole job, each worker a member of it)."""

    def __init__(self, spine, rng, **kw):
        super().__init__(spine, rng, **kw)
        self.uplink_frames = 0

    def _at_switch(self, worker, frame):
        self.uplink_frames += 1  # forwarded up by the plain leaf
        emit = self.pipeline.update(frame, ("w", worker))
        if emit is not None:
            self.uplink_frames += len(emit.dests)  # each down to its leaf, then to the worker
            for dest in emit.dests:
                self._schedule(("down", dest), lambda d=dest, f=emit.frame: self.on_result(d[1], f))


@pytest.mark.parametrize("per_leaf", [2, 4])
def test_leaf_aggregation_divides_the_uplink_frames_by_the_hosts_per_leaf(per_leaf):
    """2 leaves of `per_leaf` workers under one spine, no loss: each uplink carries one partial up and one
    total down per chunk with leaf aggregation; with plain leaves every worker's UPDATE and RESULT."""
    workers = 2 * per_leaf
    rng = np.random.default_rng(per_leaf)
    payloads = [rng.integers(-(2**31), 2**31, size=256).astype(np.int32) for _ in range(workers)]
    kw = dict(job_id=5, words=K, slot_base=0, slots=4, rounds=1)
    leaves, spines = tree(workers, per_leaf, 1, words=K, slot_base=0, slots=4)
    agg = TreeNetwork(leaves, spines, per_leaf, np.random.default_rng(0))
    run_transfers(leaves[0], payloads, Op.ADD, rng=None, net=agg, **kw)
    spine = Pipeline()
    spine.add_job(JobConfig(5, workers, K, 0, 4, tuple(Member(w, ("w", w)) for w in range(workers))))
    plain = SpineOnlyNetwork(spine, np.random.default_rng(0))
    run_transfers(spine, payloads, Op.ADD, rng=None, net=plain, **kw)
    chunks = 256 // K
    assert agg.uplink_frames == 2 * 2 * chunks  # 2 leaves, one up and one down per chunk
    assert plain.uplink_frames == 2 * workers * chunks
    assert plain.uplink_frames == per_leaf * agg.uplink_frames


class CutNetwork(TreeNetwork):
    """`TreeNetwork` whose leaf `leaf` loses everything on its uplinks, both ways, from `start` to `end`."""

    def __init__(self, *args, leaf, start, end, **kw):
        super().__init__(*args, **kw)
        self.cut, self.start, self.end = ("leaf", leaf), start, end
        self.cut_frames = 0

    def _schedule(self, flow, deliver, size=0):
        if self.start <= self.now < self.end and self.cut in flow and any(f[0] == "spine" for f in flow
                                                                          if isinstance(f, tuple)):
            self.cut_frames += 1
            self.sent += 1
            return
        super()._schedule(flow, deliver, size)


@pytest.mark.parametrize("op", list(Op), ids=[o.name for o in Op])
def test_a_leaf_uplink_down_for_a_second_costs_time_not_exactness(op):
    """Leaf 0's uplinks to both spines are cut for 1 s of virtual time mid-round: its workers time out,
    resend, the leaf sends its partials up again once the link is back, and every round is exact within
    the deadline."""
    workers, per_leaf, spines = 8, 4, 2
    rng = np.random.default_rng(int(op))
    payloads = [rng.integers(-(2**31), 2**31, size=400).astype(np.int32) for _ in range(workers)]
    leaves, tops = tree(workers, per_leaf, spines, words=K, slot_base=0, slots=6)
    net = CutNetwork(leaves, tops, per_leaf, np.random.default_rng(3), leaf=0, start=0.002, end=1.002)
    results, net, _ = run_transfers(leaves[0], payloads, op, job_id=5, words=K, slot_base=0, slots=6, rng=None,
                                    net=net, rounds=2, deadline=5.0)
    want = expected(op, payloads)
    assert all(np.array_equal(results[w][r], want) for w in range(workers) for r in range(2))
    assert net.cut_frames > 0 and net.now > 1.0  # the cut was real and the run outlived it
    # the whole job waited: leaf 1's workers timed out too and its partials went up again, which the
    # spines, still lacking leaf 0's, dropped as duplicates
    assert leaves[0].jobs[5].resent_up > 0 and leaves[1].jobs[5].resent_up > 0
    assert sum(t.jobs[5].dropped[Drop.DUPLICATE] for t in tops) > 0
