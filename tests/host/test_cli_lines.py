"""What `hina`'s command line says, in-process (no fleet of processes): a refusal in one line naming the
file and exit status 2, every flag's default said once and right, every count with its noun's number."""

import numpy as np
import pytest

from hina.host.cli import main


@pytest.mark.parametrize("array,message", [
    (np.float32(3.0), "a 0-d array (a scalar); a gradient has at least one dimension"),
    (np.zeros(0, np.float32), "an empty array (shape (0,)); a gradient has at least one element"),
    (np.zeros((0, 4), np.float32), "an empty array (shape (0, 4)); a gradient has at least one element"),
    (np.ones(5, np.int64), "dtype int64 is not a gradient's (float16, float32, float64 or int32)"),
    (np.ones(5, np.complex64), "dtype complex64 is not a gradient's (float16, float32, float64 or int32)"),
])
def test_roundtrip_refuses_an_array_the_codec_cannot_take_in_one_line(tmp_path, capsys, array, message):
    """Each worker's file alike (same shape, same dtype): the codec's own checks would be next."""
    bad = tmp_path / "bad.npy"
    np.save(bad, array)
    assert main(["roundtrip", str(bad), str(bad)]) == 2
    err = capsys.readouterr().err
    assert err == f"hina roundtrip: {bad}: {message}\n"


def _subcommands():
    import argparse

    from hina.host.cli import build_parser

    def walk(parser):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    yield sub
                    yield from walk(sub)
    return list(walk(build_parser()))


def test_every_flags_help_says_its_default_once_and_never_none():
    """`hina worker --help` once said "(default: refuse) (default: refuse)" and "(default: 1) (default: None)"."""
    import argparse

    checked = 0
    for parser in _subcommands():
        formatter = parser._get_formatter()
        for action in parser._actions:
            if not action.option_strings or isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
                continue
            text = formatter._expand_help(action) if action.help else ""
            where = (parser.prog, action.option_strings[0], text)
            assert text.count("default") <= 1, where
            assert "(default: None)" not in text and "(default: False)" not in text, where
            if action.default not in (None, False) and not action.required:
                assert "default" in text, where
            checked += 1
    assert checked > 60
    worker = next(p for p in _subcommands() if p.prog == "hina worker")
    rendered = " ".join(worker.format_help().split())
    assert "up to --deadline) (default: refuse)" in rendered and "(default: 1) (default" not in rendered


def _summary(**counts) -> dict:
    s = {"exact": True, "mode": "auto", "encoding": "dense", "group": 0, "workers": 1, "length": 1, "density": 1.0,
         "bytes_per_worker": 20, "dense_bytes_per_worker": 4, "seconds": 0.5, "first_seconds": 0.5,
         "round_seconds": [0.5], "phase_seconds": {"dense": 0.5}, "goodput_gbps": 1e-9, "retransmissions": 1,
         "fast_retransmissions": 0, "probes": 1, "timeouts": 1, "switch_drops": 1, "switch_drop_reasons": {"stale": 1},
         "impairments": {"impair_in": {}, "impair_out": {}}, "errors": []}
    s.update(counts)
    return s


def test_the_demos_summary_says_one_of_each_in_the_singular():
    from hina.host.demo import format_summary

    text = format_summary(_summary())
    assert "1 worker, 1 element at" in text, text
    assert "retransmissions:  1 (all workers; 0 overtaken, 1 tail probe, 1 timeout)" in text, text
    many = format_summary(_summary(workers=2, length=3, probes=2, timeouts=0, retransmissions=2))
    assert "2 workers, 3 elements at" in many and "2 tail probes, 0 timeouts)" in many, many


def test_the_demos_log_says_one_retransmission():
    from hina.host.demo import DemoConfig, _run_rounds

    class Conn:  # a worker that finished its one round with one resend
        def send(self, message):
            pass

        def poll(self, timeout):
            return True

        def recv(self):
            return "done", [{"seconds": 0.25, "retransmissions": 1}]

    lines = []
    _run_rounds(DemoConfig(workers=1, length=100), [Conn()], lines.append)
    assert lines == ["worker 0: 0.250 s, 1 retransmission"]


def test_roundtrip_says_one_element(tmp_path, capsys):
    a, b = tmp_path / "a.npy", tmp_path / "b.npy"
    np.save(a, np.ones(1, np.float32))
    np.save(b, np.ones(2, np.float32))
    assert main(["roundtrip", str(a), str(b)]) == 2
    assert f"{a} (1,) (1 element), {b} (2,) (2 elements)" in capsys.readouterr().err


def test_a_full_switch_says_one_slot_and_one_job_in_the_singular():
    from hina.control.ledger import Full, Ledger, Placement

    ledger = Ledger(space=2, policy="request")
    held = [{"job_id": 1, "slot_base": 0, "slots": 1, "workers": 1}]
    assert ledger.place(2, 1, Placement(1, when_full="wait"), held + [{"job_id": 3, "slot_base": 1, "slots": 1,
                                                                        "workers": 2}]) == 1
    with pytest.raises(Full) as refused:
        ledger.place(4, 1, Placement(1), held + [{"job_id": 3, "slot_base": 1, "slots": 1, "workers": 2}])
    text = str(refused.value)
    assert "job 4 asks for 1 slot and the switch has 0 of its 2 free" in text, text
    assert "; 1 job waits ahead of it;" in text and "job 1 [0, 1) (1 worker), job 3 [1, 2) (2 workers)" in text, text


def test_the_demos_drop_line_shows_the_drops_asked_for_beside_the_switchs_own():
    """`--drop 0.05` once printed "switch drops: 477 {'duplicate': 477}": none of the drops asked for."""
    from hina.host.demo import format_summary

    asked = _summary(switch_drops=477, switch_drop_reasons={"duplicate": 477},
                     impairments={"impair_in": {"dropped": 250}, "impair_out": {"dropped": 231, "duplicated": 1}})
    line = next(x for x in format_summary(asked).splitlines() if x.startswith("switch drops:"))
    assert line == ("switch drops:     481 by the impairment (250 in, 231 out), 477 of its own (duplicate 477); "
                    "1 frame duplicated"), line
    clean = _summary(switch_drops=0, switch_drop_reasons={})
    assert "switch drops:     none" in format_summary(clean)
    old = _summary(switch_drops=2, switch_drop_reasons={"duplicate": 2})
    del old["impairments"]  # a summary from before the impairments were recorded
    assert "switch drops:     2 of its own (duplicate 2)" in format_summary(old)
