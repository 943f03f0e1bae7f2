"""Several jobs through one Mininet switch at once (root + Mininet; BMv2 where installed): each job placed on
slots of its own, every job's sum exact while the others run, under loss."""

import pytest

try:
    from hina.mininet import hina_net
    from hina.mininet.shared_switch import SharedSwitchExperiment
except ImportError:  # Mininet (Debian package) absent: the `mininet` marker skips every test here
    hina_net = None

pytestmark = [pytest.mark.mininet, pytest.mark.slow]


@pytest.mark.parametrize("switch", ["emulator", pytest.param("bmv2", marks=pytest.mark.bmv2)])
def test_two_jobs_at_once_each_exact_on_its_own_slots(switch, request):
    """Two jobs of three workers on the same three hosts (each host a rank of each, at UDP ports of their own):
    BMv2 gets each job through the controller at run time, on the lowest free range; both modes exact for
    both jobs, at once, under 1% loss."""
    if switch == "bmv2":
        request.getfixturevalue("p4_build")
    cfg = hina_net.ExperimentConfig(workers=6, ranks_per_host=2, switch=switch, modes=("auto", "dense"), bw=100.0,
                                    loss=1.0, length=40_000, density=0.02, slots=16, ping=False, deadline=30.0,
                                    mtu=172 if switch == "bmv2" else 9000)
    results = SharedSwitchExperiment(cfg, jobs=2, log=lambda m: None, run_id="tss").run()
    for run in results["runs"]:
        assert run["exact"], run["rounds"]
        assert [(j["job_id"], j["slot_base"], j["slots"]) for j in run["jobs"]] == [(1, 0, 16), (2, 16, 16)]
        for rnd in run["rounds"]:
            assert [j["exact"] for j in rnd["jobs"]] == [True, True]
