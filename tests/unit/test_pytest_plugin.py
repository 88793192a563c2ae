"""The pytest plugin's configuration (marker, options), its refusals and skips, and its registration with
and without `pip install -e .`. No network is brought up: every fixture run here stops at a bad spec, a
missing spec or a missing root."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from testbed import pytest_plugin
from testbed.pytest_plugin import NetworkRequest, RequestError, request_of

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[2]
STAR = {"name": "plugin-star", "topology": {"template": "star", "hosts": 2, "link": {"bw": "10mbit"}}}

# The inner sessions name the plugin as a user's conftest would (harmless when it is installed as well).
INNER_CONFTEST = """
pytest_plugins = ["testbed.pytest_plugin"]
"""


# ---- the configuration, as plain data ----------------------------------------------------------

def test_a_marker_path_is_read_from_the_rootdir_and_its_set_and_checks_kept(tmp_path):
    (tmp_path / "nets").mkdir()
    (tmp_path / "nets" / "star.yaml").write_text("name: s\n")
    asked = request_of(("nets/star.yaml",), {"set": ["topology.link.bw=20mbit"], "checks": True},
                       rootdir=tmp_path, invocation_dir=tmp_path / "elsewhere", test="t::x")
    assert asked == NetworkRequest(tmp_path / "nets" / "star.yaml", ("topology.link.bw=20mbit",), True,
                                   "@pytest.mark.testbed_network on t::x")


def test_a_marker_dict_and_a_single_set_string_and_the_command_lines_sets_after_it(tmp_path):
    asked = request_of((STAR,), {"set": "topology.hosts=3"}, option="ignored.yaml",
                       option_sets=["topology.link.bw=5mbit"], rootdir=tmp_path)
    assert asked.source is STAR and asked.checks is None
    assert asked.overrides == ("topology.hosts=3", "topology.link.bw=5mbit")


def test_without_a_marker_the_option_names_the_spec_relative_to_where_pytest_ran(tmp_path):
    (tmp_path / "mine.yaml").write_text("name: m\n")
    asked = request_of((), None, option="mine.yaml", option_sets=("checks.iperf=false",),
                       rootdir=tmp_path / "root", invocation_dir=tmp_path)
    assert asked == NetworkRequest(tmp_path / "mine.yaml", ("checks.iperf=false",), None, "--testbed-spec")


@pytest.mark.parametrize("args, kwargs, option, message", [
    ((), None, None, "names no spec: mark it @pytest.mark.testbed_network('path/to/file.yaml' or a dict) or run "
                     "pytest with --testbed-spec FILE"),
    (("missing.yaml",), {}, None, "no experiment file {root}/missing.yaml (a relative path is read from the "
                                  "rootdir {root})"),
    ((), None, "gone.yaml", "--testbed-spec: no experiment file {here}/gone.yaml (a relative path is read "
                            "from {here})"),
    ((STAR,), {"set": ["topology.hosts"]}, None, "set= is a list of KEY.PATH=VALUE strings"),
    ((STAR,), {"set": 3}, None, "set= is a list of KEY.PATH=VALUE strings"),
    ((STAR,), {"checks": "yes"}, None, "checks= is True, False or None (got 'yes')"),
    ((STAR,), {"sets": []}, None, "with one spec (unknown: sets)"),
    ((STAR, STAR), {}, None, "with one spec (got 2)"),
    ((42,), {}, None, "the spec is a path to an experiment file or a dict (got 42)"),
])
def test_what_the_fixture_cannot_read_is_refused_saying_how_to_write_it(tmp_path, args, kwargs, option, message):
    with pytest.raises(RequestError) as err:
        request_of(args, kwargs, option, rootdir=tmp_path / "r", invocation_dir=tmp_path / "h", test="t::x")
    assert message.format(root=tmp_path / "r", here=tmp_path / "h") in str(err.value)


def test_root_is_what_is_missing_and_the_reason_names_the_privileges(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    reason = pytest_plugin.root_missing()
    assert reason.startswith("testbed_network needs root") and "CAP_NET_ADMIN" in reason and "sudo" in reason
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert pytest_plugin.root_missing() is None


# ---- the fixture in a pytest session of its own --------------------------------------------------

def _session(pytester, body: str, *args: str):
    pytester.makeconftest(INNER_CONFTEST)
    pytester.makepyfile(test_mine=textwrap.dedent(body))
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", "-rs", *args)


def test_a_bad_dict_spec_is_a_test_error_naming_its_line_and_key(pytester):
    result = _session(pytester, """
        import pytest
        @pytest.mark.testbed_network({"name": "x", "topology": {"hosts": 2, "link": {"bw": 10}}})
        def test_it(testbed_network):
            raise AssertionError("never reached")
        """)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*@pytest.mark.testbed_network on test_mine.py::test_it: the spec is not valid:*",
                                 "*<dict>:5: topology.link.bw: bandwidth needs a unit, e.g. 10mbit*"])
    assert "never reached" not in result.stdout.str()


def test_a_bad_file_given_on_the_command_line_is_a_test_error_naming_file_line_and_key(pytester):
    spec = pytester.path / "net.yaml"
    spec.write_text("name: x\ntopology:\n  hosts: 2\n  link: {bw: 10mbps}\n")
    result = _session(pytester, """
        def test_it(testbed_network):
            pass
        """, "--testbed-spec", "net.yaml")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*{spec}:4: topology.link.bw: *BYTES per second*"])


def test_a_good_spec_without_root_is_skipped_saying_why(pytester, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    result = _session(pytester, f"""
        import pytest
        @pytest.mark.testbed_network({STAR!r}, set=["topology.link.bw=20mbit"])
        def test_it(testbed_network):
            raise AssertionError("never reached")
        """)
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*SKIPPED*testbed_network needs root*CAP_NET_ADMIN*"])


def test_no_spec_at_all_is_a_test_error_saying_how_to_name_one(pytester):
    result = _session(pytester, """
        def test_it(testbed_network):
            pass
        """)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*test_mine.py::test_it uses testbed_network but names no spec*--testbed-spec*"])


# ---- registration: installed (the entry point) or not (this repository's conftest) ---------------

def _fake_installation(folder: Path) -> Path:
    """What `pip install -e .` leaves for importlib.metadata: the distribution with its pytest11 entry point
    (pyproject.toml's), here without touching the venv."""
    info = folder / "dltestbed-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: dltestbed\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[pytest11]\ntestbed.pytest_plugin = testbed.pytest_plugin\n")
    return folder


def test_pyproject_registers_the_plugin_under_its_module_name():
    import tomllib
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"] == {"testbed.pytest_plugin": "testbed.pytest_plugin"}


@pytest.mark.parametrize("installed", [False, True], ids=["not installed", "installed"])
def test_this_repositorys_tests_get_the_fixture_once_whether_installed_or_not(tmp_path, installed):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "PYTEST_DISABLE_PLUGIN_AUTOLOAD")}
    env["PYTHONPATH"] = str(_fake_installation(tmp_path)) if installed else ""
    if not installed and _entry_points(env):
        pytest.skip("this venv has the plugin installed already (pip install -e .): the other case runs")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--fixtures",
                           "tests/unit/test_units.py"], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert proc.stdout.count("testbed_network -- testbed/pytest_plugin.py") == 1, proc.stdout[-2000:]
    assert _entry_points(env) is installed


def _entry_points(env: dict) -> bool:
    """Whether a python of this environment sees the plugin's entry point (what pytest autoloads)."""
    names = subprocess.run([sys.executable, "-c", "import importlib.metadata as m; "
                            "print([e.name for e in m.entry_points(group='pytest11')])"],
                           env=env, cwd="/", capture_output=True, text=True, timeout=60).stdout
    return "'testbed.pytest_plugin'" in names


@pytest.mark.parametrize("how", ["-p", "conftest", "installed only", "-p no:"])
def test_a_users_session_gets_it_once_however_it_is_named_once_installed(tmp_path, how):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "PYTEST_DISABLE_PLUGIN_AUTOLOAD")}
    env["PYTHONPATH"] = os.pathsep.join([str(_fake_installation(tmp_path / "site")), str(REPO)])
    project = tmp_path / "project"
    project.mkdir()
    (project / "pytest.ini").write_text("[pytest]\n")
    (project / "test_mine.py").write_text("def test_it(testbed_network):\n    pass\n")
    if how == "conftest":
        (project / "conftest.py").write_text('pytest_plugins = ["testbed.pytest_plugin"]\n')
    args = {"-p": ["-p", "testbed.pytest_plugin"], "-p no:": ["-p", "no:testbed.pytest_plugin"]}.get(how, [])
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args], cwd=project,
                          env=env, capture_output=True, text=True, timeout=120)
    said = proc.stdout + proc.stderr
    assert "already registered" not in said, said[-2000:]
    if how == "-p no:":
        assert "fixture 'testbed_network' not found" in said, said[-2000:]
    else:
        assert "uses testbed_network but names no spec" in said and "1 error" in said, said[-2000:]
