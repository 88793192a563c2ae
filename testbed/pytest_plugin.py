"""The testbed's pytest plugin: a live network as a fixture, for tests of your own.

    @pytest.mark.testbed_network("topologies/smoke.yaml", set=["topology.link.bw=20mbit"])
    def test_ping(testbed_network):
        assert testbed_network.exec("h2", ["ping", "-c1", testbed_network.ip("h1")]).returncode == 0

`pip install -e .` registers it (the pytest11 entry point `testbed.pytest_plugin`, named as the module);
without that, `-p testbed.pytest_plugin` on pytest's command line, or `pytest_plugins =
["testbed.pytest_plugin"]` in a conftest.py at your rootdir (either stays harmless once it is installed:
the name is the same). `-p no:testbed.pytest_plugin` turns it off. The fixture `testbed_network` brings the spec's first run point up
(testbed.api.network) for one test and tears it down after, whatever happened. The spec is the
marker's (a path relative to the rootdir, or a dict), else `--testbed-spec FILE`'s; `set=` and
`--testbed-set` are `--set` overrides, `checks=` runs the spec's checks first (default: when the spec
has a `checks:` section). A bad spec is a test error naming its file, line and key; without root the
test is skipped, saying why."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

MARKER = "testbed_network"
MARKER_HELP = (f"{MARKER}(spec, set=[KEY.PATH=VALUE, ...], checks=None): the experiment file (relative to the "
               "rootdir) or dict the testbed_network fixture brings up; set: --set overrides; checks: run the "
               "spec's checks first (default: when it has a checks section)")
NEEDS_ROOT = ("testbed_network needs root: Mininet, Open vSwitch and tc create network namespaces, veth pairs, "
              "bridges and qdiscs (CAP_SYS_ADMIN and CAP_NET_ADMIN); run pytest as root, e.g. "
              "sudo .venv/bin/python -m pytest ...")


class RequestError(ValueError):
    """The marker or the options do not say which network to bring up, or not in a form the fixture reads."""


@dataclass(frozen=True)
class NetworkRequest:
    """What the fixture brings up: a spec (an absolute path or a dict), its --set overrides, whether to
    run its checks (None: when it has a checks section), and where it was asked for (for messages)."""
    source: Path | dict
    overrides: tuple[str, ...] = ()
    checks: bool | None = None
    origin: str = ""


def pytest_addoption(parser) -> None:
    group = parser.getgroup("dltestbed", "the testbed's network fixture (testbed_network)")
    group.addoption("--testbed-spec", metavar="FILE", default=None,
                    help="the experiment file testbed_network brings up for tests without a testbed_network marker")
    group.addoption("--testbed-set", metavar="KEY.PATH=VALUE", action="append", default=[],
                    help="override a value of testbed_network's spec (after the marker's set=), repeatable")


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)


def _overrides(value: Any, origin: str) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not all(isinstance(i, str) and "=" in i for i in items):
        raise RequestError(f"{origin}: set= is a list of KEY.PATH=VALUE strings, e.g. "
                           f"set=['topology.link.bw=20mbit'] (got {value!r})")
    return tuple(items)


def _source(spec: Any, base: Path, origin: str, where: str) -> Path | dict:
    if isinstance(spec, dict):
        return spec
    if not isinstance(spec, (str, os.PathLike)) or not str(spec):
        raise RequestError(f"{origin}: the spec is a path to an experiment file or a dict (got {spec!r})")
    path = Path(spec).expanduser()
    path = path if path.is_absolute() else base / path
    if not path.is_file():
        raise RequestError(f"{origin}: no experiment file {path} ({where})")
    return path


def request_of(args: tuple = (), kwargs: dict | None = None, option: str | None = None,
               option_sets: list[str] | tuple = (), rootdir: Path = Path("."), invocation_dir: Path = Path("."),
               test: str = "the test") -> NetworkRequest:
    """The network a test asks for: its marker's arguments (args, kwargs; None when it has no marker),
    else --testbed-spec (`option`); --testbed-set comes after the marker's set=. RequestError when
    neither names a spec, or the marker's arguments are not what it takes."""
    if kwargs is not None:
        origin = f"@pytest.mark.{MARKER} on {test}"
        unknown = set(kwargs) - {"set", "checks"}
        if len(args) != 1 or unknown:
            raise RequestError(f"{origin}: write {MARKER}(spec, set=[...], checks=None) with one spec"
                               + (f" (unknown: {', '.join(sorted(unknown))})" if unknown else f" (got {len(args)})"))
        checks = kwargs.get("checks")
        if checks is not None and not isinstance(checks, bool):
            raise RequestError(f"{origin}: checks= is True, False or None (got {checks!r})")
        source = _source(args[0], rootdir, origin, f"a relative path is read from the rootdir {rootdir}")
        sets = _overrides(kwargs.get("set", ()), origin)
    elif option:
        origin = "--testbed-spec"
        source = _source(option, invocation_dir, origin, f"a relative path is read from {invocation_dir}")
        checks, sets = None, ()
    else:
        raise RequestError(f"{test} uses testbed_network but names no spec: mark it @pytest.mark.{MARKER}("
                           "'path/to/file.yaml' or a dict) or run pytest with --testbed-spec FILE")
    return NetworkRequest(source, sets + _overrides(list(option_sets), "--testbed-set"), checks, origin)


def root_missing() -> str | None:
    """Why this process cannot bring a network up (None: it can)."""
    return None if os.geteuid() == 0 else NEEDS_ROOT


def requested(request) -> NetworkRequest:
    """The NetworkRequest of a pytest fixture request (its test's closest marker, then the options)."""
    marker = request.node.get_closest_marker(MARKER)
    config = request.config
    return request_of(marker.args if marker else (), dict(marker.kwargs) if marker else None,
                      config.getoption("testbed_spec"), config.getoption("testbed_set") or (),
                      Path(config.rootpath), Path(config.invocation_params.dir), request.node.nodeid)


@pytest.fixture
def testbed_network(request):
    """A live network (testbed.run.live.live_network.LiveNetwork) for this test: exec, popen, ip, hosts,
    links, set_link, link_down, link_up, fault. Torn down after the test, whatever happened."""
    from testbed import api
    from testbed.spec import SpecError
    problem = None          # said outside the except blocks: the message alone, no chained traceback
    try:
        asked = requested(request)
        exp = api.load(asked.source, asked.overrides)
    except RequestError as err:
        problem = str(err)
    except SpecError as err:
        problem = f"{asked.origin}: the spec is not valid:\n{err}"
    if problem:
        pytest.fail(problem, pytrace=False)
    missing = root_missing()
    if missing:
        pytest.skip(missing)
    try:
        with api.network(exp, checks=asked.checks, progress=True) as net:
            yield net
    except SpecError as err:        # a preflight refusal: this machine cannot run the spec
        problem = f"{asked.origin}: refused before anything started:\n{err}"
    if problem:
        pytest.fail(problem, pytrace=False)
