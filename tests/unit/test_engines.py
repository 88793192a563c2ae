"""One check of whether a python can run an engine's tasks: this machine's venv, a remote machine's, a
cluster server's."""
from testbed.nodes import engines


def test_this_venv_runs_both_engines():
    assert engines.local_engine_problem("tensorflow") is None
    assert engines.local_engine_problem("pytorch") is None


def test_a_python_without_the_engine_is_named_with_what_it_lacks_and_what_to_install():
    problem = engines.engine_problem(engines._run_here, "/usr/bin/python3", "tensorflow")   # Debian's, no venv
    assert problem == "/usr/bin/python3 cannot import tensorflow, tf_keras: pip install tensorflow-cpu tf_keras into it"


def test_it_asks_through_whatever_runs_commands_there():
    asked = []

    def run(argv):
        asked.append(argv)
        return 1, "torch\n"
    assert engines.engine_problem(run, "/opt/py/bin/python", "pytorch") == (
        "/opt/py/bin/python cannot import torch: pip install torch (its CPU build) into it")
    assert asked[0][:2] == ["/opt/py/bin/python", "-c"] and asked[0][3:] == ["torch"]
    assert engines.engine_problem(lambda argv: (0, ""), "python3", "tensorflow") is None
