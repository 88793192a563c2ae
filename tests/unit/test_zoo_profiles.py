"""The model zoo, the profile file and the profiler on their own: names resolved or refused with the closest
ones, a profile of another format, engine or model refused naming file, line and key, and the profiler
running where only the engine is (every other dependency of the testbed's hidden)."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from spec_helpers import issues, load
from testbed.emulation.replayed_compute import from_profile
from workloads import zoo
from workloads.profiling import fileformat

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CNN = os.path.join(REPO, "profiles/cpu/cnn-b32-c1-pytorch.json")
SPEC = """
name: zoo
topology: {{hosts: 2, link: {{bw: 1gbit}}, host: {{cores: 1, profile: {profile}}}}}
emulation: {{compute: {compute}}}
workload: {{engine: {engine}, model: {model}, batch_per_worker: {batch}}}
"""


def spec(tmp_path, profile="builtin/cpu/cnn-b32-c1-pytorch", compute="replay", engine="pytorch", model="cnn", batch=32):
    return textwrap.dedent(SPEC.format(profile=profile, compute=compute, engine=engine, model=model, batch=batch))


def take(out, *args, env=None, cwd=REPO) -> dict:
    """`python -m workloads.profiling ARGS --out OUT` in a process of its own; the profile it wrote."""
    done = subprocess.run([sys.executable, "-m", "workloads.profiling", *args, "--out", str(out)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return fileformat.load(out)


def test_every_shipped_profile_reads_back_and_names_its_device():
    shipped = [os.path.join(top, f) for top, _, files in os.walk(os.path.join(REPO, "profiles")) for f in files]
    assert len(shipped) >= 20
    gpus = {"h200": "NVIDIA H200", "h100": "NVIDIA H100 80GB HBM3"}
    for path in shipped:
        doc = fileformat.load(path)
        assert doc["machine"]["device_name"] and doc["step_s"] > 0 and doc["gradient_bytes"] > 0
        folder = os.path.basename(os.path.dirname(path))
        if folder in gpus:
            assert doc["device"] == "cuda" and doc["machine"]["device_name"] == gpus[folder]
            assert doc["model"] in ("torchvision/resnet50", "timm/vit_small_patch16_224", "transformers/gpt2")


def test_a_profile_of_another_format_or_version_or_shape_is_refused(tmp_path):
    doc = fileformat.load(CNN)
    for change, said in [({"version": 2}, "format version 2"), ({"format": "other"}, "not a profile"),
                         ({"step_s": "fast"}, "profile.step_s: expected"), ({"layers": []}, "profile.layers"),
                         ({"engine": "jax"}, "profile.engine"), ({"idle": [[0.1, -0.01]]}, r"profile.idle\[0\]"),
                         ({"idle": [[0.3, 0.01], [0.1, 0.01]]}, "increasing"), ({"idle": {"0.1": 0}}, "profile.idle")]:
        path = tmp_path / "p.json"
        path.write_text(json.dumps({**doc, **change}))
        with pytest.raises(fileformat.ProfileError, match=said) as err:
            fileformat.load(path)
        assert str(path) in str(err.value)
    (tmp_path / "p.json").write_text("{truncated")
    with pytest.raises(fileformat.ProfileError, match="not JSON"):
        fileformat.load(tmp_path / "p.json")


def test_writing_a_profile_refuses_a_target_that_is_not_a_regular_file(tmp_path):
    doc = fileformat.load(CNN)
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "folder").mkdir()
    for target in ("fifo", "folder"):
        with pytest.raises(fileformat.ProfileError, match="not a regular file"):
            fileformat.write(tmp_path / target, doc)
    fileformat.write(tmp_path / "new" / "p.json", doc)
    assert fileformat.load(tmp_path / "new" / "p.json") == doc


def test_replay_order_puts_the_last_ready_gradient_first_and_shapes_count_the_gradient():
    doc = fileformat.load(CNN)
    ready = [layer["grad_ready_s"] for layer in fileformat.replay_layers(doc)]
    assert ready == sorted(ready, reverse=True)
    shapes = fileformat.param_shapes(doc)
    assert sum(1 for layer in shapes for _ in layer) == 8 and fileformat.gradient_bytes(doc) == 4 * 56_714
    host = from_profile({"real_step_s": doc["step_s"], "stand_in_step_s": 0.001, "stand_in_cpu_s": 0.001,
                         "layers": [[0.001, 0.002]] * 4}, doc["cores"], "builtin/cpu/cnn-b32-c1-pytorch")
    assert host.step_s == doc["step_s"] and host.profile == "builtin/cpu/cnn-b32-c1-pytorch"


def test_zoo_names_resolve_by_source_and_unknown_ones_name_the_closest():
    assert zoo.split("torchvision/resnet50")[0].ENGINE == "pytorch"
    assert zoo.split("keras/ResNet50")[0].ENGINE == "tensorflow"
    with pytest.raises(zoo.UnknownModel, match="sources: keras, timm, torchvision, transformers"):
        zoo.split("tfhub/resnet")
    with pytest.raises(zoo.UnknownModel, match="closest: cnn"):
        zoo.check_name("cnnn")
    assert zoo.resolve_params("timm/vit_small_patch16_224", {"image_size": 32}) == \
        {"image_size": 32, "channels": 3, "classes": 1000}
    with pytest.raises(ValueError, match="known: channels, classes, image_size"):
        zoo.resolve_params("torchvision/resnet18", {"seq_len": 4})


def test_synthetic_zoo_data_is_deterministic_and_learnable_by_a_teacher():
    p = {"image_size": 16, "channels": 3, "classes": 10}
    from workloads.zoo import tasks
    x1, y1 = tasks.image_batch(p, 0, 3, 8)
    x2, y2 = tasks.image_batch(p, 0, 3, 8)
    assert (x1 == x2).all() and (y1 == y2).all() and x1.shape == (8, 3, 16, 16) and len(set(y1)) > 1
    tokens = tasks.token_batch({"vocab_size": 50, "seq_len": 6}, 0, 1, 4)
    table = {}
    for row in tokens:                       # every next token follows from the one before it
        for a, b in zip(row, row[1:]):
            assert table.setdefault(a, b) == b


def test_validate_refuses_an_unknown_zoo_name_with_the_closest_and_its_line(tmp_path):
    (problem,) = issues(tmp_path, spec(tmp_path, compute="real", engine="tensorflow", model="keras/ResNet5")
                        .replace("profile: builtin/cpu/cnn-b32-c1-pytorch", "profile: null"))
    assert problem.line == 4 and problem.key == "workload.model" and "closest: keras/ResNet50" in problem.message


def test_validate_refuses_a_profile_of_another_engine_or_model_or_without_replay(tmp_path):
    problem = issues(tmp_path, spec(tmp_path, engine="tensorflow"))[0]
    assert problem.key == "topology.host.profile" and problem.line == 2
    assert "profiles engine pytorch, this run trains with tensorflow" in problem.message
    problem = issues(tmp_path, spec(tmp_path, model="mlp"))[0]
    assert "profiles model cnn, this run trains mlp" in problem.message and problem.line == 2
    mixed = spec(tmp_path, profile="null").replace("}}\nemulation", "}, host_overrides: {h1: {profile: builtin/cpu/"
                                                                    "cnn-b32-c1-pytorch}}}\nemulation")
    assert "h2: no profile, beside nodes that replay one" in issues(tmp_path, mixed)[0].message
    problem = issues(tmp_path, spec(tmp_path, batch=64))[0]
    assert "profiles a batch of 32, this run trains 64 a worker" in problem.message
    problem = issues(tmp_path, spec(tmp_path, compute="real"))[0]
    assert "set emulation.compute: replay" in problem.message
    problem = issues(tmp_path, spec(tmp_path, profile="nowhere.json"))[0]
    assert "nowhere.json: cannot read it" in problem.message
    assert load(tmp_path, spec(tmp_path)).profile_path("h1")[1] == CNN


def test_a_script_replays_only_from_its_profile(tmp_path):
    text = spec(tmp_path, profile="null").replace("model: cnn,", "model: cnn, script: train.py,")
    (tmp_path / "train.py").write_text("print('hi')\n")
    problem = next(p for p in issues(tmp_path, text) if p.key == "emulation.compute")
    assert "replayed from its profile" in problem.message


BLOCKER = """
import importlib.machinery
import sys


class Hidden:
    NAMES = ("mininet", "pydantic", "pandas", "yaml", "paramiko", "docker", "rich", "matplotlib", "psutil", "testbed",
             "tensorflow")

    def find_spec(self, name, path=None, target=None):   # found (optional-import probes pass), never loaded
        if name.split(".")[0] in self.NAMES:
            return importlib.machinery.ModuleSpec(name, self)

    def create_module(self, spec):
        raise ModuleNotFoundError(f"{spec.name} is hidden: the profiler must not need it")

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, Hidden())
"""


def test_the_profiler_runs_with_the_engine_alone(tmp_path):
    (tmp_path / "sitecustomize.py").write_text(BLOCKER)
    out = tmp_path / "cnn.json"
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}:{REPO}"}
    hidden = subprocess.run([sys.executable, "-c", "import mininet"], env=env, capture_output=True, text=True)
    assert "hidden" in hidden.stderr
    doc = take(out, "cnn", "--engine", "pytorch", "--batch", "8", "--cores", "1", "--warmup", "1", "--steps", "3",
               "--idle-repeats", "1", env=env, cwd=tmp_path)
    assert doc["model"] == "cnn" and doc["batch"] == 8 and len(doc["layers"]) == 4 and doc["cores"] == 1
    assert doc["step_s"] > 0 and doc["versions"]["torch"] and doc["machine"]["cpu_model"]
    assert [p["shape"] for p in doc["layers"][0]["params"]] == [[16, 1, 3, 3], [16]]
    assert sorted(i for bucket in doc["buckets"] for i in bucket) == [0, 0, 1, 1, 2, 2, 3, 3]
    # a step timed after each pause: what it took beyond a step in a row (never less than none)
    assert [gap for gap, _ in doc["idle"]] == [0.03, 0.1, 0.3, 1.0] and all(extra >= 0 for _, extra in doc["idle"])
    assert fileformat.idle_points(doc) == tuple(map(tuple, doc["idle"]))


@pytest.mark.timing          # times itself: run with the CPUs to itself (testbed.sh test)
def test_a_profile_taken_with_half_a_core_stands_for_a_machine_of_half_the_speed(tmp_path):
    """--cores 0.5 runs the step on one CPU and doubles every time it measured: the machine it stands for."""
    doc = take(tmp_path / "half.json", "mlp", "--engine", "pytorch", "--batch", "512", "--cores", "0.5", "--warmup", "2",
               "--steps", "12", "--idle-repeats", "0")
    assert doc["idle"] == [] and doc["cores"] == 0.5 and doc["machine"]["cpus_used"] == 1 and doc["machine"]["time_scale"] == 2
    # the step's parts were scaled with it: they still add up to the step (as medians, within a few per cent;
    # a step of a few ms, not a fraction of one, so that a busy machine's jitter does not decide it)
    parts = doc["forward_s"] + doc["backward_s"] + doc["optimizer_s"]
    assert parts == pytest.approx(doc["step_s"], rel=0.25)


def test_a_file_naming_a_zoo_model_asks_for_its_pinned_package_only(monkeypatch, tmp_path):
    from testbed import zoo_packages
    monkeypatch.setattr(zoo_packages, "UNLOADABLE", tmp_path / "none.json")
    monkeypatch.setattr(zoo_packages.importlib.util, "find_spec", lambda name: None)     # nothing installed
    assert zoo_packages.wanted("workload: {model: transformers/gpt2}") == [zoo_packages.pins()["transformers"]]
    assert zoo_packages.wanted("model: keras/ResNet50\nprofile: builtin/h200/resnet50-b32\npath: a/b") == []
    assert zoo_packages.wanted("model: timm/vit_small_patch16_224") == [zoo_packages.pins()["timm"]]


def test_a_tensorflow_profile_times_keras_fit_step_and_each_layer(tmp_path):
    doc = take(tmp_path / "mlp-tf.json", "mlp", "--engine", "tensorflow", "--batch", "16", "--cores", "1", "--warmup",
               "2", "--steps", "4")
    assert doc["engine"] == "tensorflow" and [layer["name"] for layer in doc["layers"]] == ["dense0", "dense1", "out"]
    assert [p["shape"] for p in doc["layers"][0]["params"]] == [[784, 256], [256]]
    assert doc["gradient_bytes"] == 4 * 269_322 and doc["step_s"] > 0


def test_a_zoo_package_that_installs_but_does_not_load_is_removed_again(monkeypatch, tmp_path):
    from testbed import zoo_packages
    monkeypatch.setattr(zoo_packages, "UNLOADABLE", tmp_path / "zoo-unloadable.json")
    calls, present = [], set()
    monkeypatch.setattr(zoo_packages.importlib.util, "find_spec", lambda name: name in present or None)

    def pip(*args):
        calls.append(args)
        if args[0] == "install":
            present.update({"timm", "torchvision"})      # timm brings torchvision
        else:
            present.difference_update(args[2:])
        return subprocess.CompletedProcess(args, 0, "", "")
    monkeypatch.setattr(zoo_packages, "_pip", pip)
    monkeypatch.setattr(zoo_packages, "_loads", lambda name: False)
    said = []
    assert zoo_packages.install(["timm==1.0.31"], said.append) == ["torchvision", "timm"]
    assert calls == [("install", "timm==1.0.31"), ("uninstall", "-y", "torchvision", "timm")]
    assert "did not load beside this venv's torch: removed again" in said[-1]
    assert zoo_packages.wanted("model: timm/resnet18") == []           # not tried again beside this torch
