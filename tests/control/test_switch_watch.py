"""`hina switch jobs --watch`: a reply the busy switch lost is said on stderr and the watch goes on; without
--watch the same loss fails the command."""

from __future__ import annotations

import argparse
import io
import json

from hina.control import switch_cli
from hina.control.client import ControlError


class FlakySwitch:
    """Answers, loses the second reply, answers again, then the user interrupts."""

    where = "10.0.0.3:20034"

    def __init__(self, args):
        self.calls = 0

    def jobs(self):
        self.calls += 1
        if self.calls == 2:
            raise ControlError("no reply from the switch's control port ('10.0.0.3', 20034) to 'jobs'")
        if self.calls == 4:
            raise KeyboardInterrupt
        return [{"job_id": 7, "slot_base": 0, "slots": 16}]

    def close(self):
        pass


def test_a_watch_outlasts_a_lost_reply_and_a_single_listing_does_not(monkeypatch):
    monkeypatch.setattr(switch_cli, "_Emulator", FlakySwitch)
    out, err = io.StringIO(), io.StringIO()
    args = argparse.Namespace(bmv2=None, switch_command="jobs", json=True, watch=0.01)
    assert switch_cli.run(args, out, err) == 0
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [[j["job_id"] for j in line["jobs"]] for line in lines] == [[7], [7]]
    assert "no reply from the switch's control port" in err.getvalue() and "asking again in 0.01 s" in err.getvalue()
    out, err = io.StringIO(), io.StringIO()
    flaky = FlakySwitch(None)
    flaky.calls = 1  # its next reply is lost
    monkeypatch.setattr(switch_cli, "_Emulator", lambda args: flaky)
    assert switch_cli.run(argparse.Namespace(bmv2=None, switch_command="jobs", json=True, watch=None), out, err) == 1
    assert out.getvalue() == "" and "hina switch: no reply" in err.getvalue()
