"""A caption model saved by a run and read back by the `caption` command (thesis figure 20)."""
import os

import numpy as np
import pytest

os.environ["TF_USE_LEGACY_KERAS"] = "1"  # before TensorFlow is imported
pytest.importorskip("tf_keras")

from workloads import caption_model, models  # noqa: E402
from workloads.bleu import greedy_decode  # noqa: E402
from workloads.data import END, START, Tokenizer  # noqa: E402

PARAMS = {"vocab_size": 8, "embed_dim": 8, "units": 8, "feature_dim": 6, "max_len": 5}


def test_saved_model_reads_back_with_its_weights_and_captions_as_the_original(tmp_path):
    p = models.resolve_params("caption", PARAMS)
    model = models.build_model("caption", p)
    tokenizer = Tokenizer([START, END, "dog", "cat", "runs", "grass", "red"], p["max_len"])
    folder = caption_model.save(tmp_path / "model", model, tokenizer, p)
    again, tok = caption_model.load(folder)
    assert all(np.array_equal(a, b) for a, b in zip(model.get_weights(), again.get_weights()))
    assert tok.index_word == tokenizer.index_word and tok.max_len == tokenizer.max_len
    feats = np.random.default_rng(0).random((3, 6), dtype=np.float32)
    np.savez(tmp_path / "features.npz", a=feats[0], b=feats[1], c=feats[2])
    said = caption_model.caption_images(folder, str(tmp_path / "features.npz"), ["c", "a"])
    expected = greedy_decode(model, tokenizer, feats[[2, 0]])
    assert said == {"c": " ".join(expected[0]), "a": " ".join(expected[1])}


def test_wrong_features_are_refused_naming_what_is_wrong(tmp_path):
    p = models.resolve_params("caption", PARAMS)
    folder = caption_model.save(tmp_path / "model", models.build_model("caption", p),
                                Tokenizer([START, END, "dog"], p["max_len"]), p)
    np.savez(tmp_path / "f.npz", a=np.zeros(6, np.float32), wide=np.zeros(9, np.float32))
    with pytest.raises(KeyError, match="has no features for nope"):
        caption_model.caption_images(folder, str(tmp_path / "f.npz"), ["nope"])
    with pytest.raises(ValueError, match="wide have 9 features; the model takes 6"):
        caption_model.caption_images(folder, str(tmp_path / "f.npz"))
