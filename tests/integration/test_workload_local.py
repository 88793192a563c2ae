"""Real multi-process TensorFlow runs of workloads/train.py on 127.0.0.1.

What the Mininet tests (test_strategies, test_sweep) do not cover: variable partitioning with
steps_per_execution under ps, and BLEU evaluation on a Flickr8k-layout folder.

Slow: every task imports TensorFlow (10-60 s on a busy 2-core box).
"""
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from workloads.train import PROBE_STEPS

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
TRAIN = ROOT / "workloads" / "train.py"
TIMEOUT = float(os.environ.get("WORKLOAD_TEST_TIMEOUT", "420"))


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return [f"127.0.0.1:{p}" for p in ports]


def job(tmp_path, **kw):
    j = {"strategy": "single", "model": "mlp", "model_params": {"width": 32},
         "batch_per_worker": 16, "epochs": 2, "steps_per_epoch": 4, "seed": 0,
         "cluster": {"worker": [], "chief": [], "ps": []},
         "allreduce": {"implementation": "auto", "bytes_per_pack": 0},
         "ps": {"partition": False, "steps_per_execution": 1}, "data": {"kind": "synthetic"}}
    j.update(kw)
    path = tmp_path / "job.json"
    path.write_text(json.dumps(j))
    return path


def run(tmp_path, job_path, tasks, servers=()):
    """Start servers then tasks; wait for tasks; kill everything; return events by role. Every task
    that ended has removed its temporary folder; only the killed servers' are left."""
    procs, outs, killed = [], {}, 0
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TMPDIR=str(temp))
    try:
        for ttype, idx in list(servers) + list(tasks):
            out = tmp_path / f"{ttype}{idx}.out"
            err = open(tmp_path / f"{ttype}{idx}.err", "w")
            p = subprocess.Popen([sys.executable, str(TRAIN), "--job", str(job_path),
                                  "--task-type", ttype, "--task-index", str(idx),
                                  "--host", f"h{idx}"],
                                 stdout=open(out, "w"), stderr=err, cwd=str(tmp_path), env=env)
            procs.append(((ttype, idx), p))
            outs[(ttype, idx)] = out
        for key, p in procs:
            if key in tasks:
                rc = p.wait(timeout=TIMEOUT)
                assert rc == 0, (key, outs[key].read_text(),
                                 (tmp_path / f"{key[0]}{key[1]}.err").read_text()[-3000:])
    finally:
        for _, p in procs:
            if p.poll() is None:
                p.kill()
                killed += 1
            p.wait(timeout=30)
    assert len(list(temp.iterdir())) == killed, list(temp.iterdir())
    return {k: [json.loads(line) for line in v.read_text().splitlines()] for k, v in outs.items()}


def check_training(events, strategy, workers, steps, asynchronous=False, per_event=1):
    """per_event: steps per `step` event (ps steps_per_execution)."""
    kinds = [e["event"] for e in events]
    assert kinds[0] == "start" and kinds[-1] == "done", kinds
    start, done = events[0], events[-1]
    assert start["strategy"] == strategy and start["workers"] == workers
    assert start["params"] > 0 and start["gradient_bytes"] == 4 * start["params"]
    assert start["global_batch"] == 16 * workers
    epochs = [e for e in events if e["event"] == "epoch"]
    assert [e["epoch"] for e in epochs] == [1, 2]
    for e in epochs:
        assert e["steps"] == steps and e["time_s"] > 0 and e["samples_per_s"] > 0
        assert np.isfinite(e["loss"]) and e["loss"] > 0
    step_events = [e for e in events if e["event"] == "step"]
    assert sorted(e["step"] for e in step_events) == list(range(per_event, 2 * steps + 1, per_event))
    assert all(isinstance(e["loss"], float) and e["time_s"] >= 0 for e in step_events)
    assert done["steps"] == 2 * steps and done["asynchronous"] is asynchronous
    assert done["training_time_s"] > 0 and done["samples_per_s"] > 0
    assert done["final_loss"] == pytest.approx(epochs[-1]["loss"])
    for e in events:
        assert {"role", "task_index", "host", "t"} <= set(e)


def test_parameter_server(tmp_path):
    chief, ps, w0, w1 = free_ports(4)
    jp = job(tmp_path, strategy="ps",
             cluster={"chief": [chief], "ps": [ps], "worker": [w0, w1]},
             ps={"partition": True, "steps_per_execution": 2})
    ev = run(tmp_path, jp, [("chief", 0)], servers=[("ps", 0), ("worker", 0), ("worker", 1)])
    chief_ev = ev[("chief", 0)]
    check_training(chief_ev, "ps", 2, 4, asynchronous=True, per_event=2)
    assert chief_ev[0]["servers"] == 1
    for key, addr in [(("ps", 0), ps), (("worker", 0), w0), (("worker", 1), w1)]:
        assert ev[key] and ev[key][0]["event"] == "server" and ev[key][0]["address"] == addr
        assert [e["event"] for e in ev[key]] == ["server"]     # servers block in join(): no probe
    check_compute(chief_ev)


def check_compute(events):
    """One `compute` event (the probe's local steps, after training), just before `done`, which
    keeps the time training ended."""
    compute = [e for e in events if e["event"] == "compute"]
    assert len(compute) == 1, [e["event"] for e in events]
    c, done = compute[0], events[-1]
    assert events[-2] is c and c["steps"] == PROBE_STEPS and "error" not in c
    assert 0 < c["time_per_step_s"] < 5 and c["cpu_per_step_s"] > 0
    assert c["cpu_per_step_free_s"] is None      # no testbed quota to lift outside a run's cgroup
    # done was stamped when training ended, before the probe's timed steps ran
    assert c["t"] - done["t"] >= c["steps"] * c["time_per_step_s"]


def test_single_and_allreduce_probe_compute(tmp_path):
    single = run(tmp_path, job(tmp_path), [("single", 0)])[("single", 0)]
    check_training(single, "single", 1, 4)
    check_compute(single)
    (tmp_path / "ar").mkdir()
    w0, w1 = free_ports(2)
    jp = job(tmp_path / "ar", strategy="allreduce", cluster={"worker": [w0, w1], "chief": [], "ps": []})
    ev = run(tmp_path / "ar", jp, [("worker", 0), ("worker", 1)])
    for key in (("worker", 0), ("worker", 1)):          # both exit 0: the first to leave harms no one
        check_training(ev[key], "allreduce", 2, 4)
        check_compute(ev[key])


def write_flickr(path, images=6, dim=32):
    words = "dog cat runs sleeps grass sofa red car road birds fly sea".split()
    rng = np.random.default_rng(1)
    lines, feats = [], {}
    for i in range(images):
        feats[f"img{i}.jpg"] = rng.random(dim).astype(np.float32)
        for k in range(2):
            cap = " ".join(rng.choice(words, size=4))
            lines.append(f"img{i}.jpg#{k}\tA {cap} .")
    (path / "Flickr8k.token.txt").write_text("\n".join(lines) + "\n")
    np.savez(path / "features.npz", **feats)


def test_caption_single_with_eval(tmp_path):
    ddir = tmp_path / "flickr"
    ddir.mkdir()
    write_flickr(ddir)
    jp = job(tmp_path, model="caption", model_params={"embed_dim": 16, "units": 16},
             epochs=2, steps_per_epoch=3, eval=True,
             data={"kind": "flickr8k", "path": str(ddir), "test_fraction": 0.34})
    ev = run(tmp_path, jp, [("single", 0)])[("single", 0)]
    check_training(ev, "single", 1, 3)
    evals = [e for e in ev if e["event"] == "eval"]
    assert [e["epoch"] for e in evals] == [1, 2]
    for e in evals:
        for k in ("bleu1", "bleu2", "bleu3", "bleu4"):
            assert 0.0 <= e[k] <= 1.0
