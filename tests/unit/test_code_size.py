"""The code stays legible at a glance: a package folder holds at most a dozen modules directly (a
folder that grows past that has found a sub-role), no module runs over 600 lines and no function
over 100."""
import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ROOTS = ("testbed", "analysis", "workloads")
MAX_MODULES, MAX_MODULE_LINES, MAX_FUNCTION_LINES = 12, 600, 100


def sources() -> list[Path]:
    return sorted(p for root in ROOTS for p in (REPO / root).rglob("*.py") if "__pycache__" not in p.parts)


def test_no_package_folder_holds_more_than_a_dozen_modules():
    folders = {p.parent for p in sources() if (p.parent / "__init__.py").exists()}
    crowded = {str(f.relative_to(REPO)): n for f in folders
               if (n := len([p for p in f.glob("*.py") if p.name != "__init__.py"])) > MAX_MODULES}
    assert not crowded, f"split these by role: {crowded}"


def test_no_module_or_function_is_too_long_to_read():
    long_modules, long_functions = [], []
    for path in sources():
        text = path.read_text()
        name = str(path.relative_to(REPO))
        if len(text.splitlines()) > MAX_MODULE_LINES:
            long_modules.append(f"{name}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long_functions.append(f"{name}:{node.lineno} {node.name}: {length} lines")
    assert not long_modules and not long_functions, "\n".join(long_modules + long_functions)
