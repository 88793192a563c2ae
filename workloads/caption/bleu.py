"""BLEU-1..4 of greedy-decoded captions on the held-out images (nltk corpus_bleu)."""
from __future__ import annotations

import warnings

import numpy as np

from workloads.data import END, START

WEIGHTS = {
    "bleu1": (1.0, 0, 0, 0),
    "bleu2": (0.5, 0.5, 0, 0),
    "bleu3": (1 / 3, 1 / 3, 1 / 3, 0),
    "bleu4": (0.25, 0.25, 0.25, 0.25),
}


def bleu_scores(references: list[list[list[str]]], hypotheses: list[list[str]]) -> dict:
    """Corpus BLEU-1..4; `references[i]` is the list of token lists for hypothesis i."""
    from nltk.translate.bleu_score import corpus_bleu

    if len(references) != len(hypotheses):
        raise ValueError("references and hypotheses differ in length")
    out = {}
    with warnings.catch_warnings():  # nltk warns when an n-gram order has no match
        warnings.simplefilter("ignore")
        for name, w in WEIGHTS.items():
            out[name] = float(corpus_bleu(references, hypotheses, weights=w)) if hypotheses else 0.0
    return out


def greedy_decode(model, tokenizer, features: np.ndarray, batch: int = 256) -> list[list[str]]:
    """Greedy captions (words, without start/end) for each feature row."""
    start, end = tokenizer.word_index[START], tokenizer.word_index[END]
    results: list[list[str]] = []
    for lo in range(0, len(features), batch):
        feats = np.asarray(features[lo:lo + batch], np.float32)
        seqs = [[start] for _ in range(len(feats))]
        done = np.zeros(len(feats), bool)
        for _ in range(tokenizer.max_len):
            padded = np.stack([tokenizer.pad(s) for s in seqs])
            probs = np.asarray(model([feats, padded], training=False))
            nxt = probs.argmax(axis=1)
            for i, w in enumerate(nxt):
                if not done[i]:
                    seqs[i].append(int(w))
                    done[i] = w == end or len(seqs[i]) > tokenizer.max_len
            if done.all():
                break
        results += [[w for w in tokenizer.decode(s) if w not in (START, END)] for s in seqs]
    return results


def evaluate(model, data, max_images: int | None = None) -> dict:
    """BLEU-1..4 of `model` on `data.test_ids` (a workloads.data.CaptionData)."""
    ids = data.test_ids[:max_images] if max_images else data.test_ids
    feats = data.features[[data.rows[i] for i in ids]]
    hyps = greedy_decode(model, data.tokenizer, feats)
    refs = [data.captions[i] for i in ids]
    return bleu_scores(refs, hyps)
