"""The caption model's BLEU on the held-out images (caption runs with evaluation only), against the thesis's
figure 14; its figure is bleu.png."""
from __future__ import annotations

import pandas as pd

from analysis.tables import tables, trends
from analysis.text import THESIS_FIG14, plural


def section_tables(exp: tables.Experiment) -> dict[str, pd.DataFrame]:
    bleu = tables.bleu_summary(tables.counted_runs(exp), exp.evals)
    return {"bleu": bleu} if len(bleu) else {}


def sentences(t: dict[str, pd.DataFrame]) -> list[str]:
    """Best BLEU-1 per node count, against the thesis's figure 14."""
    return [f"With {plural(b.hosts, 'node')} the best BLEU-1 on the held-out images is {b.value:.3f}, "
            f"after epoch {b.epoch} of {b.last_epoch} (thesis fig. 14: {THESIS_FIG14[1]:g} after epoch "
            f"{THESIS_FIG14[0]} of 20, on the full Flickr8k)." for b in trends.best_bleu(t.get("bleu", pd.DataFrame()))]
