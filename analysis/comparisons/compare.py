"""A pair of experiments: the thesis's condition and its faithful twin.

The thesis ran every virtual node on one 2-core laptop, so its time-vs-nodes curves carry CPU
sharing as well as the network. Its faithful twin runs the same file with compute "budgets"
(every node held to its own ``cores``). Per bandwidth, the 1 -> N slowdown under each is the
inverse of the report's steady speedup (speedup.summary: steady samples/s at one node over steady
samples/s at N nodes, of the same model, engine, batch per worker and fixed mode):

    shared_slowdown = 1 / speedup_shared(N),   faithful_slowdown = 1 / speedup_faithful(N)

The faithful twin keeps what the network (and the collective's fixed costs) adds; what disappears
when every node has its own cores came from sharing the CPU:

    share_cpu = 1 - (faithful_slowdown - 1) / (shared_slowdown - 1),   share_network = 1 - share_cpu

clipped to [0, 1] (a note says when and why); undefined when the shared runs did not slow down.
N is the largest node count both judged steady. Degraded runs are left out unless include_degraded.
"""
from __future__ import annotations

import html
from pathlib import Path

import numpy as np
import pandas as pd

from analysis import outputs
from analysis.tables import faithful, speedup, tables, trends
from analysis.text import mbit

COLUMNS = ["model", "engine", "batch_per_worker", "fixed", "strategy", "bw_bps", "bw", "nodes",
           "shared_samples_per_s_1", "shared_samples_per_s_n", "shared_slowdown", "faithful_samples_per_s_1",
           "faithful_samples_per_s_n", "faithful_slowdown", "share_cpu", "share_network", "note"]
FORMULA = "share_cpu = 1 - (faithful slowdown - 1) / (shared slowdown - 1)"


def _experiment(x, include_degraded: bool) -> tables.Experiment:
    exp = x if isinstance(x, tables.Experiment) else tables.load_experiment(x)
    exp.include_degraded = include_degraded
    return exp


def compute_mode(exp: tables.Experiment) -> str:
    """'shared', 'budgets', or 'mixed' for the counted ok runs of an experiment."""
    modes = set(tables.ok_runs(tables.counted_runs(exp))["compute"])
    return modes.pop() if len(modes) == 1 else "mixed" if modes else "none"


def ordered(a, b, include_degraded: bool = False) -> tuple[tables.Experiment, tables.Experiment]:
    """(shared, faithful) of two experiments (folders or loaded), whichever order they come in."""
    ea, eb = _experiment(a, include_degraded), _experiment(b, include_degraded)
    modes = {compute_mode(ea): ea, compute_mode(eb): eb}
    if set(modes) != {"shared", "budgets"}:
        raise ValueError(f"a pair needs one experiment with compute 'shared' and one with 'budgets'; "
                         f"{ea.name} has {compute_mode(ea)!r}, {eb.name} has {compute_mode(eb)!r}")
    return modes["shared"], modes["budgets"]


POINT = ["model", "engine", "batch_per_worker", "fixed", "strategy", "bw_bps"]


def speedups_by_nodes(runs: pd.DataFrame) -> dict:
    """(model, engine, batch per worker, fixed, strategy, bw_bps) -> {nodes: (speedup, baseline samples/s,
    samples/s)} of the summary's configurations with a steady speedup (N > 1; the one-node baseline is
    the summary's: the same strategy, else single, else allreduce)."""
    s = speedup.summary(runs)
    s = s[s["speedup"].notna() & (s["hosts"] > 1) & (s["strategy"] != "single")]
    out = {}
    for key, rows in s.groupby(POINT, dropna=False):
        out[key] = {int(r.hosts): (r.speedup, r.baseline_samples_per_s, r.steady_samples_per_s_mean)
                    for r in rows.itertuples()}
    return out


def cpu_share(shared_slowdown: float, faithful_slowdown: float) -> tuple[float, str]:
    """share_cpu (clipped to [0, 1], NaN when undefined) and a note when it was clipped or undefined."""
    if not shared_slowdown > 1:
        return np.nan, "the shared runs did not slow down from 1 node: nothing to attribute"
    raw = 1 - (faithful_slowdown - 1) / (shared_slowdown - 1)
    if raw < 0:
        return 0.0, (f"the faithful twin slowed down more (raw share {raw:.2f}): counted as 0, none of "
                     "the trend from CPU sharing")
    if raw > 1:
        return 1.0, (f"the faithful twin did not slow down at all (raw share {raw:.2f}): counted as 1, all of "
                     "the trend from CPU sharing")
    return float(raw), ""


def _order(key: tuple) -> tuple:
    return tuple(str(v) if isinstance(v, str) else float(v) if pd.notna(v) else -1.0 for v in key)


def compare(shared, faithful_twin, include_degraded: bool = False) -> pd.DataFrame:
    """Per model, engine, batch, mode, strategy and bandwidth both judged at 1 node and at N > 1 nodes: the
    1 -> N slowdown (1 / the steady speedup) under each condition and the shares of the shared slowdown
    from CPU and network. shared / faithful_twin: folders or loaded experiments ('shared' and 'budgets'
    compute)."""
    sh = _experiment(shared, include_degraded)
    fa = _experiment(faithful_twin, include_degraded)
    a, b = speedups_by_nodes(tables.counted_runs(sh)), speedups_by_nodes(tables.counted_runs(fa))
    rows = []
    for key in sorted(set(a) & set(b), key=_order):
        common = sorted(set(a[key]) & set(b[key]))
        if not common:
            continue
        n = common[-1]
        (s_speed, s_one, s_n), (f_speed, f_one, f_n) = a[key][n], b[key][n]
        s_slow, f_slow = 1 / s_speed, 1 / f_speed
        cpu, note = cpu_share(s_slow, f_slow)
        point = dict(zip(POINT, key))
        rows.append(dict(point, bw=mbit(point["bw_bps"]), nodes=n, shared_samples_per_s_1=s_one,
                         shared_samples_per_s_n=s_n, shared_slowdown=s_slow, faithful_samples_per_s_1=f_one,
                         faithful_samples_per_s_n=f_n, faithful_slowdown=f_slow, share_cpu=cpu,
                         share_network=1 - cpu, note=note))
    return pd.DataFrame(rows, columns=COLUMNS)


def sentences(table: pd.DataFrame, shared: tables.Experiment, faithful_twin: tables.Experiment) -> list[str]:
    """The pair report's text: what each side emulated, then per bandwidth where the slowdown came from."""
    out = [f"{shared.name} (the thesis's condition): {faithful.setup_sentence(shared.runs)}",
           f"{faithful_twin.name} (its faithful twin): {faithful.setup_sentence(faithful_twin.runs)}",
           "The slowdown from 1 to N nodes is the inverse of the steady speedup (steady samples per second at one "
           "node over those at N), the ratio each experiment's report states."]
    if len(table) and table["fixed"].nunique() == 1:
        out[-1] += f" Both ran {tables.MODE_TEXT.get(table['fixed'].iloc[0], table['fixed'].iloc[0])}."
    if table.empty:
        return out + ["The pair has no bandwidth judged steady at 1 node and at more nodes in both experiments, "
                      "so the slowdowns cannot be compared."]
    modes = set(table["fixed"])
    for r in table.itertuples():
        mode = f", {tables.MODE_TEXT.get(r.fixed, r.fixed)}" if len(modes) > 1 else ""
        what = (f"At {r.bw} ({r.strategy}, {r.model}{mode}), {r.nodes} nodes were "
                f"{trends.speed_words(1 / r.shared_slowdown, 'one')} in steady throughput with the nodes sharing "
                f"the machine and {trends.speed_words(1 / r.faithful_slowdown)} with every node held to its own "
                "cores")
        if np.isfinite(r.share_cpu):
            what += (f": about {r.share_cpu:.0%} of the shared slowdown came from sharing the CPU and "
                     f"{r.share_network:.0%} from the network ({FORMULA})")
        out.append(what + (f"; {r.note}." if r.note else "."))
    shares = table["share_cpu"].dropna()
    if len(shares) > 1:
        out.append(f"Over {len(shares)} bandwidths, CPU sharing explains {shares.min():.0%} to {shares.max():.0%} "
                   f"(median {shares.median():.0%}) of the thesis condition's slowdown with more nodes; the rest "
                   "is what the network adds, which the faithful twin keeps.")
    return out


def write_pair_report(a, b, out_dir, include_degraded: bool = False) -> Path:
    """Write out_dir/compare.csv and out_dir/compare.html for two experiments (either order)."""
    shared, faithful_twin = ordered(a, b, include_degraded)
    table = compare(shared, faithful_twin, include_degraded)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    outputs.write_text(out_dir / "compare.csv", tables.csv_text(table))
    e = html.escape
    page = [f"<!doctype html><html><head><meta charset='utf-8'><title>{e(shared.name)} vs "
            f"{e(faithful_twin.name)}</title></head><body>",
            f"<h1>{e(shared.name)} (shared) vs {e(faithful_twin.name)} (budgets)</h1><ul>",
            *(f"<li>{e(x)}</li>" for x in sentences(table, shared, faithful_twin)), "</ul>",
            table.to_html(index=False, float_format=lambda v: f"{v:.3g}", na_rep=""), "</body></html>"]
    path = out_dir / "compare.html"
    outputs.write_text(path, "\n".join(page))
    return path
