"""A rank held from two places in turn: the later join takes it over (a restarted worker's must), and the
worker it was taken from, leaving, leaves it to the one that holds it now."""

import json

from hina.control.config import JobConfig, Member
from hina.emulator import Pipeline
from hina.emulator.control_port import handle

JOB = JobConfig(job_id=1, workers=2, words=32, slot_base=0, slots=4)
A, B = Member(0, ("127.0.0.1", 40001)), Member(0, ("127.0.0.1", 40002))


def ask(pipeline: Pipeline, op: str, **fields) -> dict:
    reply, _ = handle(pipeline, json.dumps({"op": op, "seq": 7, **fields}).encode())
    assert reply["seq"] == 7
    return reply


def test_the_worker_a_rank_was_taken_from_leaves_it_to_its_holder():
    pipeline = Pipeline()
    assert "replaced" not in ask(pipeline, "join", job=JOB.to_config(), member=A.to_config())
    assert ask(pipeline, "join", job=JOB.to_config(), member=B.to_config())["replaced"] == A.to_config()
    reply = ask(pipeline, "leave", job_id=1, worker_id=0, member=A.to_config())
    assert reply == {"ok": True, "removed": False, "held_by": B.to_config(), "seq": 7}
    assert pipeline.job_config(1).members == (B,)  # still B's
    assert ask(pipeline, "leave", job_id=1, worker_id=0, member=B.to_config())["removed"] is True
    assert 1 not in pipeline.jobs  # its last member left a job a join installed


def test_a_leave_that_names_no_member_removes_the_rank_as_before():
    pipeline = Pipeline()
    ask(pipeline, "join", job=JOB.to_config(), member=A.to_config())
    ask(pipeline, "join", job=JOB.to_config(), member=Member(1, ("127.0.0.1", 40003)).to_config())
    assert ask(pipeline, "leave", job_id=1, worker_id=0) == {"ok": True, "removed": False, "seq": 7}
    assert [m.worker_id for m in pipeline.job_config(1).members] == [1]
    bad = ask(pipeline, "leave", job_id=1, worker_id=1, member={"worker_id": 1})
    assert bad == {"ok": False, "error": "leave: member {'worker_id': 1} needs an 'address' [host, port] or a 'port'",
                   "seq": 7}

