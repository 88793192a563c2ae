"""The import graph of the project: no cycle between modules or between packages, every import
counted (function-level, under TYPE_CHECKING, relative), and the layering the design asks for:
the spec depends on nothing at run time, analysis is a leaf (testbed -> analysis -> workloads)."""
import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROOTS = ("testbed", "analysis", "workloads")
PACKAGES = ("testbed.spec", "testbed.readers", "testbed.run", "testbed.net", "testbed.nodes", "testbed.cluster",
            "testbed.cli", "testbed.emulation", "analysis", "workloads")   # any other testbed.X module is a group of its own


def project_modules(repo: Path = REPO) -> dict[str, Path]:
    """Dotted name -> file, for every module of the project's packages and the top-level shim."""
    found = {}
    for root in ROOTS:
        for path in sorted((repo / root).rglob("*.py")):
            parts = path.relative_to(repo).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    if (repo / "run_experiment.py").exists():
        found["run_experiment"] = repo / "run_experiment.py"
    return found


def imported(name: str, source: str, is_package: bool, known) -> set[str]:
    """The project modules that `source` (module `name`) imports anywhere in its body."""
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            candidates = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = name.split(".") if is_package else name.split(".")[:-1]
                package = package[:len(package) - node.level + 1]
                base = ".".join(package + ([base] if base else []))
            candidates = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for candidate in candidates:
            while candidate and candidate not in known:
                candidate = candidate.rpartition(".")[0]
            if candidate and candidate != name:
                out.add(candidate)
    return out


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the project modules it imports; a package importing its own children is no edge
    (that is how a package exposes them, not a dependency back)."""
    graph = {}
    for name, path in modules.items():
        targets = imported(name, path.read_text(), path.name == "__init__.py", modules)
        graph[name] = {t for t in targets if not t.startswith(name + ".")}
    return graph


def group(module: str) -> str:
    return next((p for p in PACKAGES if module == p or module.startswith(p + ".")), module)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (a -> ... -> a) per strongly connected component of more than one node."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(_loop(graph, component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _loop(graph, component: set[str]) -> list[str]:
    """A shortest path from the component's first node back to itself, inside the component."""
    start = min(component)
    paths, seen = [[start]], {start}
    while paths:
        path = paths.pop(0)
        for w in sorted(graph[path[-1]] & component):
            if w == start:
                return path + [start]
            if w not in seen:
                seen.add(w)
                paths.append(path + [w])
    raise AssertionError("a strongly connected component always has a loop")


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for module, targets in graph.items():
        out.setdefault(group(module), set()).update(group(t) for t in targets if group(t) != group(module))
    return out


@pytest.fixture(scope="module")
def graph():
    return import_graph(project_modules())


# ---- the reader and the cycle finder themselves ------------------------------------------------

def test_every_kind_of_import_is_read(tmp_path):
    (tmp_path / "testbed" / "spec").mkdir(parents=True)
    (tmp_path / "testbed" / "run").mkdir()
    files = {
        "testbed/__init__.py": "",
        "testbed/units.py": "",
        "testbed/spec/__init__.py": "from . import models\n",
        "testbed/spec/models.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                   "    from testbed.run.faults import Applier\n"),
        "testbed/spec/keys.py": "def f():\n    from ..units import parse\n    import testbed.run\n",
        "testbed/run/__init__.py": "",
        "testbed/run/faults.py": "from testbed.spec.models import X\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).write_text(text)
    g = import_graph(project_modules(tmp_path))
    assert g["testbed.spec"] == set(), "a package importing its children is no edge"
    assert g["testbed.spec.models"] == {"testbed.run.faults"}, "TYPE_CHECKING imports count"
    assert g["testbed.spec.keys"] == {"testbed.units", "testbed.run"}, "function-level and relative imports count"
    assert cycles(g) == [["testbed.run.faults", "testbed.spec.models", "testbed.run.faults"]]
    assert cycles(package_graph(g)) == [["testbed.run", "testbed.spec", "testbed.run"]]


# ---- the project -------------------------------------------------------------------------------

def test_no_cycle_between_modules(graph):
    found = cycles(graph)
    assert not found, "import cycles between modules:\n" + "\n".join(" -> ".join(c) for c in found)


def test_no_cycle_between_packages(graph):
    found = cycles(package_graph(graph))
    assert not found, "import cycles between packages:\n" + "\n".join(" -> ".join(c) for c in found)


def _offending(graph, importer: str, forbidden: tuple[str, ...]) -> list[str]:
    return sorted(f"{m} imports {t}" for m, targets in graph.items() if group(m) == importer
                  for t in targets if any(t == f or t.startswith(f + ".") for f in forbidden))


# pure leaves: units, the caps, task placement, the readers of the files a spec names, the model zoo's names,
# the profile file, the communication and balancing methods' declarations (standard library at import)
SPEC_MAY_IMPORT = ("testbed.spec", "testbed.units", "testbed.limits", "testbed.roles", "testbed.readers",
                   "workloads.zoo", "workloads.profiling.fileformat", "workloads.communication",
                   "workloads.balance")
# the readers of the graph and trace files: the units and the caps, nothing of the spec or the run side
READERS_MAY_IMPORT = ("testbed.readers", "testbed.units", "testbed.limits")


def test_the_spec_is_the_bottom(graph):
    """The spec imports only itself and the pure leaves: no run-time package (nodes, run, net, cluster, cli,
    emulation, shaping, cleanup, ...), so the experiment file is read and checked without any of them."""
    assert "testbed.spec.faults.grammar" in graph and "testbed.spec.kinds" in graph, "the fault grammar and kind table are the spec's"
    found = sorted(f"{m} imports {t}" for m, targets in graph.items() if group(m) == "testbed.spec"
                   for t in targets if not any(t == a or t.startswith(a + ".") for a in SPEC_MAY_IMPORT))
    assert found == []


def test_the_readers_import_only_units_and_limits(graph):
    """The file readers sit below the spec: they import the units and the caps only (no spec, no run side)."""
    assert "testbed.readers.graphfile" in graph and "testbed.readers.traces" in graph
    found = sorted(f"{m} imports {t}" for m, targets in graph.items() if group(m) == "testbed.readers"
                   for t in targets if not any(t == a or t.startswith(a + ".") for a in READERS_MAY_IMPORT))
    assert found == []


def test_analysis_is_a_leaf(graph):
    assert _offending(graph, "analysis", ("testbed", "run_experiment")) == []


def test_every_test_module_name_is_unique():
    """tests/unit and tests/integration are not packages: pytest over the whole tree (`./testbed.sh test -k NAME`)
    stops at two test modules of one name."""
    names = [p.name for p in (REPO / "tests").rglob("test_*.py")]
    assert sorted({n for n in names if names.count(n) > 1}) == []


def test_a_run_without_its_report_loads_no_matplotlib():
    """`run` loads the sweep, its points, the expectations and the answer's lines without matplotlib (half
    a second of every run's start); the figures load it when a report is drawn."""
    script = (f"import sys; sys.path.insert(0, {str(REPO)!r}); "
              "import testbed.cli.run, testbed.run.sweep.sweep, testbed.run.sweep.runner, analysis.tables.glance; "
              "print('matplotlib' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout == "False\n"
