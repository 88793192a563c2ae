"""The real Docker engine and the project's worker image: started, built (or reused), run."""
import pytest

from testbed.nodes import docker_engine, image
from testbed.nodes.docker_engine import DockerUnavailable

pytestmark = pytest.mark.integration

TEST_LABELS = {image.LABEL: "1", f"{image.LABEL}.role": "image-test"}


@pytest.fixture(scope="module")
def cli(root):
    docker_engine.ensure_dockerd(print)
    client = docker_engine.client()
    yield client
    client.close()


def _ours(cli) -> set[str]:
    """Containers this module's code creates: build containers and the test's own."""
    found = set()
    for role in ("build", "image-test"):
        found |= {c.name for c in cli.containers.list(all=True, filters={"label": f"{image.LABEL}.role={role}"})}
    return found


def _run(cli, tag: str, command: list[str]) -> str:
    return cli.containers.run(tag, command, remove=True, network_mode="none", labels=TEST_LABELS,
                              stderr=True).decode()


def test_docker_engine_answers(root):
    docker_engine.ensure_dockerd()  # starts it when it is not running; a no-op when it is
    assert docker_engine.docker_installed() and docker_engine.dockerd_running()
    assert docker_engine.client().ping()


def test_worker_image_builds_and_runs_tensorflow_iperf3_ping(cli):
    before = _ours(cli)
    lines = []
    tag = image.ensure_image(None, progress=lines.append)  # minutes the first time, then reused
    assert tag == image.default_image() and image.image_present(tag)
    labels = cli.images.get(tag).labels
    assert labels[image.LABEL] == "1" and labels[f"{image.LABEL}.role"] == "worker"

    out = _run(cli, tag, [image.IMAGE_PYTHON, "-c", "import tensorflow, tf_keras; print(tensorflow.__version__)"])
    assert out.strip().splitlines()[-1] == "2.20.0"
    assert "iperf 3." in _run(cli, tag, ["iperf3", "--version"])
    assert "iputils" in _run(cli, tag, ["ping", "-V"])

    assert not _ours(cli) - before, "a build or test container was left behind"
    assert not list(image.CACHE_DIR.glob("build-tmp-*")) and not list(image.CACHE_DIR.glob("rootfs-tmp-*"))


def test_reuse_is_quick_and_build_leaves_nothing_in_the_image(cli):
    tag = image.build_image()  # present: returns at once
    config = cli.images.get(tag).attrs["Config"]
    assert not config.get("Volumes") and not config.get("Entrypoint")
    assert f"PATH={image.VENV}/bin:" in " ".join(config["Env"])
    assert _run(cli, tag, ["sh", "-c", "ls -A /tmp /root; echo done"]).split() == [
        "/root:", ".bashrc", ".profile", "/tmp:", "done"]


def test_bad_or_missing_images_are_refused_with_advice(cli):
    with pytest.raises(ValueError, match="lowercase"):
        image.ensure_image("My/Worker:1")
    with pytest.raises(DockerUnavailable, match="not present.*never pulls.*docker load"):
        image.ensure_image("dltestbed-no-such-image:1")
    with pytest.raises(DockerUnavailable, match="not present"):
        image.build_image(base="dltestbed-no-such-base:1")
