"""100,000 random and mutated frames: nothing escapes the pipeline, the idle job is untouched."""

import pytest

from hina.emulator import fuzz as fuzz_harness

pytestmark = pytest.mark.slow


def test_fuzzing_the_frame_path():
    report = fuzz_harness.run(100_000, seed=2026)
    assert report.frames == 100_000
    assert not report.failures, report.failures[0]
    assert not report.victim_changed
    assert report.outputs > 0 and sum(report.drops.values()) > 50_000  # the frames did reach the pipeline
    assert {"truncated", "bad_length", "bad_checksum", "unauthorized", "unknown_job", "bad_slot",
            "bad_count", "bad_worker", "bad_op", "bad_msg_type", "no_route"} <= report.drops.keys()


def test_the_harness_notices_a_crash_and_a_touched_victim(monkeypatch):
    """The checks can fail: a pipeline that raises, or that lets anyone write the victim's slots."""
    from hina.emulator import pipeline as pl

    original = pl.Pipeline.update

    def crashing(self, data, source, length=None):
        if len(data) == 17:
            raise IndexError("boom")
        return original(self, data, source, length)

    monkeypatch.setattr(pl.Pipeline, "update", crashing)
    assert fuzz_harness.run(3000, seed=1).failures

    def no_auth(self, data, source, length=None):
        job = self.jobs.get(fuzz_harness.VICTIM)
        if job is not None:  # the worker_auth register: any source may speak for workers 0 and 1
            job.register["worker_source"][:2] = self.source_id(source)
        return original(self, data, source, length)

    monkeypatch.setattr(pl.Pipeline, "update", no_auth)
    assert fuzz_harness.run(3000, seed=1).victim_changed
