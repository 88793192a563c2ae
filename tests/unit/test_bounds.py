"""Every bound the run holds a setting to is checked at `validate`, with the file's line and key, before
anything starts: for each, the run-time check that would refuse the value, and the same value refused by
the spec."""
import pytest

from spec_helpers import issues
from testbed.emulation import budgets
from testbed.roles import assign_tasks
from testbed.spec.rules import capabilities
from testbed.spec.load import load_spec_text

PS = "workload: {strategy: ps, port: 65535, ps: {servers: 1, placement: {chief: [h1], ps: [h1], worker: [h1, h2]}}}\n"


def runtime_quota(text):
    with pytest.raises(ValueError, match="under the 0.001 core a CPU quota can hold"):
        budgets.quota(0.0005)


def runtime_rate(text):
    assert "cannot be shaped" in capabilities.rate_problem(10_000 // 2)


def runtime_ports(text):
    w = load_spec_text(text.replace("65535", "50000"), "exp.yaml").workload
    assert max(t.port for t in assign_tasks(w, ["h1", "h2"])) == 50002      # 3 tasks on h1: port + 2


@pytest.mark.parametrize("runtime, text, key, words", [
    (runtime_quota, "topology: {host: {cores: 0.0001}}\n", "topology.host.cores", "greater than or equal to 0.001"),
    (runtime_quota, "topology: {host: {cores: 0.01}}\nemulation: {dilation: 20}\n", "topology.host.cores",
     "under the 0.001 core a CPU quota can hold"),
    (runtime_rate, "topology: {link: {bw: 10kbit}}\nemulation: {dilation: 2}\n", "emulation.dilation",
     "under the 8000 bit/s tc paces"),
    (runtime_ports, "topology: {hosts: 2}\n" + PS, "workload.port", "past 65535"),
    (None, "topology: {hosts: 120}\nchecks: {pairs: all}\n", "checks.pairs", "more than 10,000"),
    (None, "topology: {hosts: 3}\nworkload: {strategy: auto}\nfaults:\n  - {at: step 2, action: kill, task: ps 0}\n",
     "faults[0].task", "may run all-reduce, which has no ps task"),
])
def test_a_value_the_run_would_refuse_is_refused_by_validate(tmp_path, runtime, text, key, words):
    text = "name: b\n" + text
    if runtime is not None:
        runtime(text)
    found = [i for i in issues(tmp_path, text) if i.key == key]
    assert found and words in found[0].message and found[0].line > 1, issues(tmp_path, text)
