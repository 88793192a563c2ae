"""The integration tests' marks (tests/integration/conftest.py): the modules that judge behaviour are marked
`behaviour`, which `./testbed.sh test` runs beside the unit tests, and no other."""
import importlib.util
from pathlib import Path
from types import SimpleNamespace

CONFTEST = Path(__file__).resolve().parents[1] / "integration" / "conftest.py"


def integration_conftest():
    spec = importlib.util.spec_from_file_location("integration_conftest", CONFTEST)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Item(SimpleNamespace):
    def add_marker(self, mark):
        self.marks.append(mark.name)


def test_the_behaviour_modules_are_marked_and_no_other():
    conftest = integration_conftest()
    names = ["test_cluster_servers", "test_answer", "test_sweep", "test_scale", "test_replay", "test_end_to_end"]
    items = [Item(module=SimpleNamespace(__name__=f"tests.integration.{name}"), name=name, marks=[]) for name in names]
    conftest.pytest_collection_modifyitems(items)
    assert [item.name for item in items] == names
    assert {item.name for item in items if item.marks == ["behaviour"]} == set(names) - {"test_answer", "test_replay"}
    assert all(item.marks == [] for item in items if item.name in ("test_answer", "test_replay"))


def test_every_module_the_list_names_exists():
    """A renamed module would silently lose its mark, and run with the tests that measure."""
    missing = [name for name in integration_conftest().BEHAVIOUR if not (CONFTEST.parent / f"{name}.py").is_file()]
    assert not missing, missing
