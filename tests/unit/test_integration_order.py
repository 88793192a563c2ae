"""The integration tests' order and marks (tests/integration/conftest.py): the modules that judge behaviour are
marked `behaviour`, and of them those that need the images `./testbed.sh test` builds meanwhile run last, so
that the others need not wait for the builds."""
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


def test_behaviour_modules_are_marked_and_those_that_need_images_run_last():
    conftest = integration_conftest()
    names = ["test_cluster_servers", "test_answer", "test_sweep", "test_worker_image", "test_scale", "test_up_exec",
             "test_replay", "test_user_script", "test_end_to_end"]
    items = [Item(module=SimpleNamespace(__name__=f"tests.integration.{name}"), name=name, marks=[]) for name in names]
    conftest.pytest_collection_modifyitems(items)
    order = [item.name for item in items]
    assert set(order[-4:]) == set(conftest.IMAGES) and set(conftest.IMAGES) <= set(conftest.BEHAVIOUR)
    assert order[:-4] == ["test_answer", "test_sweep", "test_scale", "test_replay", "test_end_to_end"]  # kept in order
    marked = {item.name for item in items if item.marks == ["behaviour"]}
    assert marked == set(names) - {"test_answer", "test_replay"}
    assert all(item.marks == [] for item in items if item.name in ("test_answer", "test_replay"))


def test_every_module_the_lists_name_exists():
    """A renamed module would silently lose its mark or its place."""
    conftest = integration_conftest()
    missing = [name for name in (*conftest.BEHAVIOUR, *conftest.IMAGES) if not (CONFTEST.parent / f"{name}.py").is_file()]
    assert not missing, missing
