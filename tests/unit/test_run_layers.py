"""testbed/run/ is split by role into sub-packages, layered like the project's packages (test_imports.py):
no cycle between them, and the leaves beneath them (results.py, phases.py) import none of them."""
from test_imports import cycles, import_graph, project_modules

RUN = "testbed.run"
ROLES = ("point", "bringup", "training", "faults", "live", "sweep")
LEAVES = (f"{RUN}.results", f"{RUN}.phases")


def part(module: str) -> str | None:
    """The sub-package a module of testbed.run belongs to, or the module itself for one directly under it."""
    if not module.startswith(RUN + "."):
        return None
    return next((f"{RUN}.{r}" for r in ROLES if module == f"{RUN}.{r}" or module.startswith(f"{RUN}.{r}.")), module)


def run_graph() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for module, targets in import_graph(project_modules()).items():
        if part(module):
            out.setdefault(part(module), set()).update(part(t) for t in targets if part(t) and part(t) != part(module))
    return out


def test_the_roles_are_sub_packages_and_the_rest_are_the_leaves():
    graph = run_graph()
    assert set(graph) == {f"{RUN}.{r}" for r in ROLES} | set(LEAVES)


def test_no_cycle_between_the_sub_packages():
    found = cycles(run_graph())
    assert not found, "import cycles inside testbed.run:\n" + "\n".join(" -> ".join(c) for c in found)


def test_the_leaves_import_no_sub_package():
    graph = run_graph()
    assert {leaf: graph[leaf] for leaf in LEAVES} == {leaf: set() for leaf in LEAVES}
