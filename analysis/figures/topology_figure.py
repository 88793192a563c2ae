"""Topology picture from runs/<run_id>/topology.json (no networkx).

Shape: {"hosts": [{"name", "ip", "role"}], "switches": [{"name"}], "links": [{"a", "b", "bw"}]};
``bw`` may be a tc-style string ("10mbit") or bits/s. Layout is deterministic: switches in a
row, each host in a row below the switch it is linked to.
"""
from __future__ import annotations

import json
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from analysis.figures.plotstyle import RC, FigureSkipped, legend, palette_for, role_kind, save
from analysis.text import mbit

def find_topology(exp_dir: Path) -> Path | None:
    """The runs/<run_id>/topology.json with the most hosts (ties: first run id)."""
    best, most = None, -1
    for p in sorted(Path(exp_dir).glob("runs/*/topology.json")):
        try:
            n = len(json.loads(p.read_text()).get("hosts", []))
        except (OSError, ValueError):
            continue
        if n > most:
            best, most = p, n
    return best


def layout(topo: dict) -> pd.DataFrame:
    """Deterministic positions: switches in a row at y=1, hosts in a row below their switch."""
    sw = [s["name"] for s in topo.get("switches", [])]
    attach = {}
    for link in topo.get("links", []):
        a, b = link["a"], link["b"]
        if b in sw and a not in sw:
            attach.setdefault(a, b)
        elif a in sw and b not in sw:
            attach.setdefault(b, a)
    under = {s: [] for s in sw}
    loose = []
    for h in topo.get("hosts", []):
        (under[attach[h["name"]]] if h["name"] in attach else loose).append(h)
    rows, x = [], 0.0
    for s in sw:
        hosts = under[s]
        width = max(len(hosts), 1)
        centre = x + (width - 1) / 2
        rows.append({"name": s, "kind": "switch", "role": "switch", "ip": "", "x": centre,
                     "y": 1.0, "switch": ""})
        for i, h in enumerate(hosts):
            rows.append({"name": h["name"], "kind": "host", "role": h.get("role", ""),
                         "ip": h.get("ip", ""), "x": x + i, "y": 0.0, "switch": s})
        x += width + 0.8
    for i, h in enumerate(loose):
        rows.append({"name": h["name"], "kind": "host", "role": h.get("role", ""),
                     "ip": h.get("ip", ""), "x": x + i, "y": 0.0, "switch": ""})
    return pd.DataFrame(rows, columns=["name", "kind", "role", "ip", "x", "y", "switch"])


def _bw_label(bw) -> str:
    if bw is None or (isinstance(bw, float) and np.isnan(bw)):
        return ""
    return mbit(bw) if isinstance(bw, (int, float)) else str(bw)


def topology(exp, outdir: Path):
    """Hosts (coloured by role), switches and links labelled with their bandwidth."""
    path = find_topology(exp.path)
    if path is None:
        raise FigureSkipped("no runs/<run_id>/topology.json in the experiment folder")
    topo = json.loads(path.read_text())
    nodes = layout(topo)
    pos = {r["name"]: (r["x"], r["y"]) for _, r in nodes.iterrows()}
    n_hosts = int((nodes["kind"] == "host").sum())
    small = n_hosts <= 16
    pal = palette_for(exp)
    with plt.rc_context(RC):
        fig, ax = plt.subplots(figsize=(min(40, max(7, 1.6 * n_hosts + 2)), 5))
        links = []
        for link in topo.get("links", []):
            a, b = link["a"], link["b"]
            if a not in pos or b not in pos:
                continue
            (xa, ya), (xb, yb) = pos[a], pos[b]
            rad = 0.25 if ya == yb and abs(xa - xb) > 2 else 0.0
            ax.annotate("", (xb, yb), (xa, ya), arrowprops=dict(
                arrowstyle="-", color="#555555", lw=1.5, connectionstyle=f"arc3,rad={rad}"))
            label = _bw_label(link.get("bw"))
            links.append({"a": a, "b": b, "bw": link.get("bw"), "label": label})
            if label and small:
                f = 0.5 if ya == yb else (0.3 if ya < yb else 0.7)  # nearer the host
                ax.text(xa + f * (xb - xa), ya + f * (yb - ya) + (0.12 if ya == yb else 0),
                        label,
                        fontsize=10, ha="center", va="center",
                        bbox=dict(boxstyle="round,pad=0.15", fc="white", ec="none"))
        for _, r in nodes.iterrows():
            c = pal.colour("role", role_kind(r["role"]) if r["kind"] == "host" else "switch")
            marker = "s" if r["kind"] == "switch" else "o"
            ax.scatter([r["x"]], [r["y"]], s=900 if small else 300, marker=marker, color=c,
                       zorder=3, edgecolors="black")
            ax.text(r["x"], r["y"], r["name"], ha="center", va="center", fontsize=10,
                    color="white", zorder=4, fontweight="bold")
            if r["kind"] == "host" and small:
                ax.text(r["x"], r["y"] - 0.2, f"{r['role']}\n{r['ip']}", ha="center",
                        va="top", fontsize=10)
        for role in dict.fromkeys(role_kind(x) for x in nodes["role"]):
            ax.scatter([], [], color=pal.colour("role", role), edgecolors="black",
                       marker="s" if role == "switch" else "o", s=80, label=role)
        ax.set_xlim(nodes["x"].min() - 0.8, nodes["x"].max() + 0.8)
        ax.set_ylim(-0.75, 1.4)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.grid(False)
        ax.set_title(f"Topology of run {path.parent.name}")
        legend(ax, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="role")
        out = save(fig, outdir / "topology.png")
    nodes.attrs["links"] = links
    nodes.attrs["source"] = str(path)
    return out, nodes
