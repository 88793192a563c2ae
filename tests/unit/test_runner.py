"""The runner's own logic, without a network: which step the compute probe is weighed against."""
from testbed.run.sweep.runner import _compute_probe


def test_the_probe_is_weighed_against_the_steady_step_else_the_mean_step():
    row = {"compute_slicing": 1.2, "compute_per_step_s": 0.02, "steady_step_s": 0.04, "time_per_step_s": 0.1}
    probe = _compute_probe(row, "h1")
    assert (probe.node, probe.compute_s, probe.step_s, probe.slicing) == ("h1", 0.02, 0.04, 1.2)
    assert _compute_probe({**row, "steady_step_s": float("nan")}, "h1").step_s == 0.1    # too few steps to judge
    assert _compute_probe({**row, "compute_slicing": None}, "h1") is None                # the quota was not lifted
