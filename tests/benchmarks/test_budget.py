"""benchmarks/budget.py's accounting, without a network: where a round's CPU seconds go, the emulator's by its
profile and the XDP switch's by its programs' run time, taken out of the kernel's softirq, where it ran."""

from __future__ import annotations

import pytest

from hina.benchmarks import budget

MB = budget.MB


def a_round(switch_profile: dict[str, float], softirq: float = 0.5) -> dict:
    """One round as hina_net reports it: 4 workers that sent 1 MB each, their profiles, the switch's, the
    monitor's split of the machine."""
    return {"seconds": 0.2, "line_rate_seconds": 0.16, "wire_bytes_per_worker": MB, "workers": [{}] * 4,
            "frames": 1200, "retransmissions": 0, "timeouts": 0, "fidelity": {"verdict": "network-bound"},
            "profile": {"codec": 0.04, "rules": 0.08, "send": 0.04, "recv": 0.04, "cpu_user": 0.2, "cpu_system": 0.1},
            "switch_profile": switch_profile,
            "cpu": {"seconds": 0.2, "roles": {"worker": {"user": 0.2, "system": 0.1}, "harness": {"user": 0.01,
                                                                                               "system": 0.01}},
                    "machine": {"user": 0.25, "system": 0.15, "irq": 0.0, "softirq": softirq}}}


def test_the_emulators_parts_are_its_profiles_and_the_kernels_softirq_stays_whole():
    row = budget.budget(a_round({"recv": 0.02, "rules": 0.04, "send": 0.03, "cpu_user": 0.1, "cpu_system": 0.02}))
    seconds = row["cpu_seconds"]
    assert [seconds[p] for p in ("switch receive", "switch rules", "switch send")] == [0.02, 0.04, 0.03]
    assert seconds["switch rest"] == pytest.approx(0.03) and seconds["kernel softirq"] == 0.5
    assert row["wire_mb"] == 4 and row["ms_per_mb"]["switch rules"] == pytest.approx(10.0)


def test_the_xdp_switchs_parts_are_its_programs_run_time_taken_out_of_the_softirq_it_ran_in():
    """Rules: the ingress program's seconds (once per frame received); send: the egress program's (once per
    copy); rest: the control process; nothing received by a process; the kernel's softirq without both."""
    row = budget.budget(a_round({"xdp_ingress_s": 0.012, "xdp_ingress_runs": 1300, "xdp_egress_s": 0.004,
                                 "xdp_egress_runs": 5000, "cpu_user": 0.001, "cpu_system": 0.0}))
    seconds = row["cpu_seconds"]
    assert seconds["switch receive"] == 0.0
    assert (seconds["switch rules"], seconds["switch send"], seconds["switch rest"]) == (0.012, 0.004, 0.001)
    assert seconds["kernel softirq"] == pytest.approx(0.5 - 0.016)
    # a softirq sampled shorter than the programs' own account (the monitor's ticks): never below zero
    assert budget.budget(a_round({"xdp_ingress_s": 0.6, "xdp_egress_s": 0.1}))["cpu_seconds"]["kernel softirq"] == 0


def test_a_table_holds_both_switches_and_rows_from_before_the_choice_read_as_the_emulators():
    emulator = budget.budget(a_round({"recv": 0.02, "rules": 0.04, "send": 0.03}))
    xdp = budget.budget(a_round({"xdp_ingress_s": 0.012, "xdp_egress_s": 0.004}))
    rows = [{**emulator, "mode": "dense", "mbps": 400.0, "variant": "offload and pacing", "first_round": emulator},
            {**xdp, "mode": "dense", "mbps": 400.0, "variant": "frame by frame, paced", "first_round": xdp,
             "switch": "xdp"}]
    result = {"config": {"workers": 4, "length": 1 << 20, "density": 0.01, "rounds": 3}, "hina": rows,
              "ceiling": []}
    table = [line for line in budget.markdown(result) if line.startswith("| 400")]
    assert [line.split(" | ")[2:4] for line in table] == [["emulator", "offload and pacing"],
                                                         ["xdp", "frame by frame, paced"]]


@pytest.mark.parametrize("argv,message", [
    (["--variants", "fast"], "budget.py: argument --variants: invalid choice: 'fast' (choose from 'frame by frame, "
                             "unpaced', 'offload and pacing', 'frame by frame, paced')"),
    (["--switches", "bmv2"], "budget.py: argument --switches: invalid choice: 'bmv2' (choose from 'emulator', 'xdp')"),
])
def test_a_bad_switch_or_data_path_is_one_line_and_status_2(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        budget.main(argv)
    assert exit_.value.code == 2 and capsys.readouterr().err.splitlines() == [message]
