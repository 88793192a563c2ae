"""Replayed compute against real compute: the same points run both ways, the steady step compared.

Per engine (TensorFlow, PyTorch) and model (mlp, cnn; a zoo model by name, `--params` its model_params, is
replayed from a profile the bench takes first with `run_experiment.py profile`), one sweep of 2 and 4 one-core nodes x 10, 100
and 1000 Mbit/s links, all-reduce, with `emulation.compute: real` (dilation auto: the budgets and
dilation faithful today, within the verdict's limits) and with `emulation.compute: replay` (dilation
auto), repeated; the repeats interleave the two modes, so that drift of the machine hits both alike.
Per point it prints the steady step (emulated: the median step after the warm-up) of each mode, the
median of the repeats with their range, the ratio replay / real, and how many runs of each read `ok`.
Aim: replay within +-5 % of real. Then the verdict against the error, where the real runs read `ok` (a
reference its own verdict finds unfaithful, e.g. nodes slowing each other's compute, judges nothing): how
many replayed runs read `ok` among those more than 5 % off real compute (aim: none) and among those within
3 % (aim: at least half). A run's error is also given as a 90 % interval, from its steady steps and the
reference's resampled (the ratio of their medians): on slow links a step's time swings by a fifth from
step to step, so the median of a dozen steps moves by several per cent from run to run whatever the
compute. A run counts as more than 5 % off for sure where the whole interval is.
Writes every run's row to OUT/replay_fidelity.csv.

Run as root, with nothing else running:
  .venv/bin/python bench/replay_fidelity.py [--repeats 3] [--steps 15] [--dilation auto] [--out DIR]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from analysis.tables import steady  # noqa: E402
from machine import machine_state  # noqa: E402

SPEC = """name: {name}
topology: {{template: star, hosts: 2, switch: {{kind: ovs}}, link: {{bw: 10mbit}}, host: {{cores: 1{profile}}}}}
emulation: {{dilation: {dilation}, compute: {mode}}}
workload: {{engine: {engine}, strategy: allreduce, model: {model}, model_params: {params}, batch_per_worker: 32, epochs: 1,
           steps_per_epoch: {steps}, fixed: steps, timeout: 20m, seed: {seed}}}
checks: {{iperf: true, ping: true, duration: 1s}}
monitor: {{interval: 1s}}
sweep: {{topology.hosts: [{hosts}], topology.link.bw: [{bws}]}}
"""
COLUMNS = ["engine", "model", "mode", "repeat", "hosts", "bw", "bw_bps", "status", "dilation", "steady_step_s",
           "steady", "fidelity", "replay_cpu_bound", "replay_cpu_wait", "compute_per_step_s", "wall_time_s",
           "mem_peak_bytes", "reason", "steady_steps_ms"]
RESAMPLES, LEVEL = 2000, 0.90


def zoo(model: str) -> bool:
    return "/" in model


def engine_of(model: str) -> str | None:
    """The engine a zoo model runs on (None: a built-in model, either engine)."""
    return None if not zoo(model) else "tensorflow" if model.startswith("keras/") else "pytorch"


def profile_of(folder: Path, engine: str, model: str, args) -> Path:
    """A profile of a zoo model on one core of this machine, taken once per folder."""
    out = folder / f"profile-{engine}-{model.replace('/', '_')}.json"
    if not out.exists():
        proc = subprocess.run([sys.executable, str(REPO / "run_experiment.py"), "profile", model, "--engine", engine,
                               "--batch", "32", "--cores", "1", "--params", args.params, "--out", str(out)],
                              cwd=REPO, capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f"profiling {model} failed (exit {proc.returncode}): {proc.stderr.strip()[-600:]}")
    return out


def run_sweep(folder: Path, engine: str, model: str, mode: str, repeat: int, args) -> pd.DataFrame:
    name = f"{engine}-{model.replace('/', '_')}-{mode}-r{repeat}"
    spec = folder / f"{name}.yaml"
    profile = f", profile: {profile_of(folder, engine, model, args)}" if zoo(model) and mode == "replay" else ""
    spec.write_text(SPEC.format(name=name, mode=mode, dilation=args.dilation, engine=engine, model=model,
                                steps=args.steps, seed=repeat, hosts=args.hosts, bws=args.bws, profile=profile,
                                params=args.params if zoo(model) else "{}"))
    out = folder / name
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, str(REPO / "run_experiment.py"), "run", str(spec), "--out", str(out),
                           "--quiet", "--no-report"], cwd=REPO, capture_output=True, text=True)
    if not (out / "runs.csv").exists():
        sys.exit(f"{name} wrote no runs.csv (exit {proc.returncode}): {proc.stderr.strip()[-600:]}")
    runs = pd.read_csv(out / "runs.csv").assign(engine=engine, model=model, mode=mode, repeat=repeat)
    runs["steady_steps_ms"] = runs["run_id"].map(steady_steps_ms(out))
    print(f"  {name}: {len(runs)} points, {(runs['status'] == 'ok').sum()} ok, {time.monotonic() - t0:.0f} s",
          flush=True)
    return runs.reindex(columns=COLUMNS)


def steady_steps_ms(out: Path) -> dict:
    """run_id -> the lead task's steady step times (after its warm-up), in ms, as text: what runs.csv's
    steady_step_s is the median of."""
    path = out / "steps.csv"
    if not path.exists():
        return {}
    found = {}
    for run_id, times in steady.lead_times(pd.read_csv(path)).items():
        split = steady.split(times)
        found[run_id] = " ".join(f"{t * 1000:.2f}" for t in times[split.warmup_steps:])
    return found


def ratio_interval(replayed: str, reals: list[str], seed: int = 0) -> tuple[float, float]:
    """The LEVEL interval of the run's error as verdict_lines measures it: median(replayed) over the median
    of the real runs' medians, every run's steady steps resampled."""
    a, *bs = (np.array([float(x) for x in str(text).split()]) for text in (replayed, *reals))
    if len(a) < 2 or not bs or any(len(b) < 2 for b in bs):
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    medians = lambda x: np.median(rng.choice(x, (RESAMPLES, len(x))), axis=1)  # noqa: E731
    ratios = medians(a) / np.median([medians(b) for b in bs], axis=0)
    tail = (1 - LEVEL) / 2 * 100
    lo, hi = np.percentile(ratios, [tail, 100 - tail])
    return float(lo), float(hi)


def _spread(steps: pd.Series) -> str:
    s = steps.dropna()
    if s.empty:
        return "-"
    return f"{s.median() * 1000:.1f} [{s.min() * 1000:.1f}-{s.max() * 1000:.1f}]"


def table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per engine, model, hosts and bw: each mode's steady step (median of the repeats, range), the ratio
    replay / real of the medians, the runs of each mode that read ok, and replay's dilation."""
    ok = rows[rows["status"] == "ok"]
    out = []
    for (engine, model, hosts, bw_bps), g in ok.groupby(["engine", "model", "hosts", "bw_bps"]):
        real, rep = g[g["mode"] == "real"], g[g["mode"] == "replay"]
        ratio = rep["steady_step_s"].median() / real["steady_step_s"].median()
        out.append(dict(engine=engine, model=model, hosts=hosts, bw=g["bw"].iloc[0],
                        real_ms=_spread(real["steady_step_s"]), replay_ms=_spread(rep["steady_step_s"]),
                        ratio=round(ratio, 3), real_ok=f"{(real['fidelity'] == 'ok').sum()}/{len(real)}",
                        replay_ok=f"{(rep['fidelity'] == 'ok').sum()}/{len(rep)}",
                        real_k="/".join(sorted({f'{k:g}' for k in real['dilation']})),
                        replay_k="/".join(sorted({f'{k:g}' for k in rep['dilation']})),
                        replay_cpu_bound=round(rep["replay_cpu_bound"].median(), 3),
                        replay_cpu_wait=round(rep["replay_cpu_wait"].median(), 3)))
    return pd.DataFrame(out)


def verdict_lines(rows: pd.DataFrame) -> list[str]:
    """Each replayed run's error against the median real run of its configuration, with its interval, and
    what the verdict read, where the real runs read `ok` (a reference whose own verdict reads `degraded`
    judges nothing: its configurations are counted apart)."""
    ok = rows[rows["status"] == "ok"]
    judged, unjudged = [], 0
    for _, g in ok.groupby(["engine", "model", "hosts", "bw_bps"]):
        real = g[g["mode"] == "real"]
        replayed = g[g["mode"] == "replay"]
        if real.empty or (real["fidelity"] != "ok").any():
            unjudged += len(replayed)
            continue
        median = real["steady_step_s"].median()
        for _, run in replayed.iterrows():
            lo, hi = ratio_interval(run["steady_steps_ms"], real["steady_steps_ms"].to_list())
            sure = lo > 1.05 or hi < 0.95
            judged.append((abs(run["steady_step_s"] / median - 1), run["fidelity"] == "ok", run["replay_cpu_bound"],
                           lo, hi, sure, f"{run['engine']} {run['model']} {run['bw']}"))
    far = [j for j in judged if j[0] > 0.05]
    sure = [j for j in far if j[5]]
    near = [j for j in judged if j[0] <= 0.03]
    return [f"{len(judged)} replayed runs against a reference that reads ok ({unjudged} more against one that "
            f"does not): {len(far)} more than 5 % off real compute, {sum(j[1] for j in far)} of them read ok (aim: "
            f"none); {len(sure)} of them off by more than 5 % over their whole {LEVEL:.0%} interval, "
            f"{sum(j[1] for j in sure)} of those read ok; {len(near)} within 3 %, {sum(j[1] for j in near)} of "
            f"them read ok (aim: at least half)"] + \
        [f"  error {e:.3f}  ratio interval {lo:.3f}-{hi:.3f}  bound {b:.3f}  {'ok' if o else 'degraded'}  {what}"
         for e, o, b, lo, hi, _, what in sorted(judged)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--engines", default="tensorflow,pytorch")
    ap.add_argument("--models", default="mlp,cnn", help="built-in models, or zoo models by name")
    ap.add_argument("--params", default="{}", help="a zoo model's model_params (YAML flow map)")
    ap.add_argument("--hosts", default="2, 4")
    ap.add_argument("--bws", default="10mbit, 100mbit, 1gbit")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", type=int, default=15, help="steps per run (the first is the warm-up)")
    ap.add_argument("--dilation", default="auto", help="both modes' emulation.dilation (a number: the same K for both, "
                    "so that the comparison leaves out what the time dilation itself changes)")
    ap.add_argument("--out", help="keep the results folders here (default: a temporary one)")
    args = ap.parse_args()
    print(machine_state())
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.out) if args.out else Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        rows = []
        for repeat in range(args.repeats):
            for engine in args.engines.split(","):
                for model in args.models.split(","):
                    if engine_of(model) not in (None, engine):
                        continue
                    for mode in ("real", "replay"):
                        rows.append(run_sweep(folder, engine, model, mode, repeat, args))
        rows = pd.concat(rows, ignore_index=True)
        rows.to_csv(folder / "replay_fidelity.csv", index=False)
        print(f"{len(rows)} runs in {(time.monotonic() - t0) / 60:.1f} min; rows in {folder / 'replay_fidelity.csv'}")
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        print(table(rows).to_string(index=False))
    print("\n".join(verdict_lines(rows)))
    print(machine_state())


if __name__ == "__main__":
    main()
