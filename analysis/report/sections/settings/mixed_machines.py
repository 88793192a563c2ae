"""Mixed machines (runs of nodes of different speeds, or with workload.balance): each balancing setting against
plain synchronous training, the asynchronous parameter server and one machine by the answer's yardstick, what
balancing bought on each link, what the slowest node cost, and each worker's steady step split into compute,
waiting and the wire (analysis/tables/mixed.py)."""
from __future__ import annotations

import html

import pandas as pd

from analysis.report.markup import table_html
from analysis.tables import mixed, tables

TITLE = "Mixed machines"


def section_tables(exp: tables.Experiment) -> dict[str, pd.DataFrame]:
    """mixed_balance, mixed_slowest and mixed_workers, when a run mixed node speeds or balanced."""
    return mixed.section(exp)


def parts(exp: tables.Experiment, t: dict) -> list[str]:
    if "mixed_balance" not in t:
        return []
    e = html.escape
    _, words = mixed.bought(exp, mixed.mixed_runs(exp))
    cost = t["mixed_slowest"]
    lines = list(words) or ["No balancing setting to compare with no balancing on the same link."]
    for _, r in cost.iterrows():
        if r["balance"] == mixed.PLAIN:
            lines.append(f"At {r['bw']} without balancing ({r['run_id']}), {r['slowest']} set the pace: the workers "
                         f"waited {r['waiting_share']:.0%} of each steady step; all as fast as {r['fastest']}, the "
                         f"same nodes would reach {r['if_all_fastest_samples_per_s']:,.0f} samples/s "
                         f"(measured {float(r['steady_samples_per_s']):,.0f}).")
    return [f"<h2>{TITLE}</h2><p>Each balancing setting (workload.balance) against plain synchronous training, the "
            "asynchronous parameter server and one machine on each link, as the answer compares (its yardstick; "
            "factors above 1: faster, with the spread of the repeats), what balancing bought, what the slowest node "
            "cost, and each worker's steady step: its compute at its own batch, the wire (the theory's bytes at the "
            "link's rate) and the rest, waiting for the others.</p><ul>"
            + "".join(f"<li>{e(x)}</li>" for x in lines) + "</ul>",
            table_html("mixed_balance", t["mixed_balance"]), table_html("mixed_workers", t["mixed_workers"])]
