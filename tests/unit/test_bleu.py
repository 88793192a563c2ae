"""BLEU on sentences with known scores, and greedy decoding with a fake model."""
import math

import numpy as np
import pytest

from workloads import data
from workloads.caption import bleu


def test_identical_is_one():
    refs = [[["a", "dog", "runs", "on", "the", "grass"]], [["two", "men", "play", "soccer"]]]
    hyps = [r[0] for r in refs]
    assert bleu.bleu_scores(refs, hyps) == pytest.approx(
        {"bleu1": 1.0, "bleu2": 1.0, "bleu3": 1.0, "bleu4": 1.0})


def test_hand_computed():
    # hyp: 5 unigrams all in ref; bigrams 3 of 4 match; brevity penalty exp(1 - 6/5)
    refs = [[["the", "cat", "sat", "on", "the", "mat"]]]
    hyps = [["the", "cat", "sat", "on", "mat"]]
    bp = math.exp(1 - 6 / 5)
    s = bleu.bleu_scores(refs, hyps)
    assert s["bleu1"] == pytest.approx(bp)
    assert s["bleu2"] == pytest.approx(bp * math.sqrt(1 * 3 / 4))
    # trigrams: "the cat sat", "cat sat on" match, "sat on mat" does not -> 2/3
    assert s["bleu3"] == pytest.approx(bp * (1 * 3 / 4 * 2 / 3) ** (1 / 3))


def test_no_overlap_is_zero():
    s = bleu.bleu_scores([[["a", "b", "c", "d"]]], [["w", "x", "y", "z"]])
    assert s == {"bleu1": 0.0, "bleu2": 0.0, "bleu3": 0.0, "bleu4": 0.0}


class FakeModel:
    """Predicts 'dog' after startseq, 'runs' after dog, then endseq."""

    def __init__(self, tok):
        self.tok = tok

    def __call__(self, inputs, training=False):
        feats, seqs = inputs
        w = self.tok.word_index
        nxt = {w[data.START]: w["dog"], w["dog"]: w["runs"]}
        out = np.zeros((len(seqs), self.tok.vocab_size), np.float32)
        for i, s in enumerate(seqs):
            out[i, nxt.get(int(s[-1]), w[data.END])] = 1.0
        return out


def caption_data():
    tok = data.Tokenizer([data.START, data.END, "dog", "runs", "cat"], max_len=6)
    ids = ["a", "b"]
    caps = {"a": [["dog", "runs"], ["a", "dog", "runs"]], "b": [["cat"]]}
    return data.CaptionData(tok, np.zeros((2, 3), np.float32), {"a": 0, "b": 1}, caps, [], ids)


def test_greedy_decode_and_evaluate():
    d = caption_data()
    hyps = bleu.greedy_decode(FakeModel(d.tokenizer), d.tokenizer, d.features)
    assert hyps == [["dog", "runs"], ["dog", "runs"]]
    s = bleu.evaluate(FakeModel(d.tokenizer), d, max_images=1)
    assert s["bleu1"] == pytest.approx(1.0) and s["bleu2"] == pytest.approx(1.0)
    s2 = bleu.evaluate(FakeModel(d.tokenizer), d)
    # corpus: hyp 'dog runs' vs refs of b ('cat'): 2 of 4 unigrams match overall
    assert s2["bleu1"] == pytest.approx(2 / 4)
