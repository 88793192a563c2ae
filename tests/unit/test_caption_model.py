"""A caption model saved by a run and read back by the `caption` command (thesis figure 20)."""
import os

import numpy as np
import pytest

os.environ["TF_USE_LEGACY_KERAS"] = "1"  # before TensorFlow is imported
pytest.importorskip("tf_keras")

from PIL import Image  # noqa: E402

from testbed.cli import caption  # noqa: E402
from workloads import models  # noqa: E402
from workloads.caption import model as caption_model  # noqa: E402
from workloads.caption.bleu import greedy_decode  # noqa: E402
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


def test_a_photo_is_captioned_through_vgg16_features_and_bad_photos_or_weights_are_refused(tmp_path, capsys):
    """Figure 20 from a photo: `caption RUN_DIR --photo FILE` makes its VGG16 features (here an
    untrained VGG16, as no weights file can be downloaded) and decodes a caption from the vocabulary."""
    words = ["dog", "cat", "runs", "grass", "red"]
    p = models.resolve_params("caption", dict(PARAMS, feature_dim=4096))
    run_dir = tmp_path / "run"
    caption_model.save(run_dir / "model", models.build_model("caption", p), Tokenizer([START, END, *words],
                                                                                      p["max_len"]), p)
    photo = tmp_path / "new_photo.png"
    Image.fromarray(np.random.default_rng(1).integers(0, 255, (50, 70, 3), np.uint8)).save(photo)
    other = tmp_path / "elsewhere" / "new_photo.png"          # the same name in another folder
    other.parent.mkdir()
    Image.fromarray(np.random.default_rng(2).integers(0, 255, (40, 40, 3), np.uint8)).save(other)
    assert caption.main([str(run_dir), "--photo", str(photo), "--photo", str(other), "--random-weights"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split(": ", 1)[0] for line in lines] == [str(photo), str(other)]
    for line in lines:     # an untrained VGG16's features may end the caption at once
        said = line.split(": ", 1)[1]
        assert set(said.split()) <= set(words) or said == "(no words: the model ended the caption at once)"

    assert caption.main([str(run_dir), "--photo", str(tmp_path / "weights.h5")]) == 2     # not an image
    assert f"no .jpg/.jpeg/.png image file {tmp_path / 'weights.h5'}" in capsys.readouterr().err
    assert caption.main([str(run_dir), "--photo", str(photo), "--weights", str(tmp_path / "vgg16.h5")]) == 2
    err = capsys.readouterr().err
    assert f"VGG16 weights file {tmp_path / 'vgg16.h5'} not found" in err and "Nothing is downloaded" in err
    narrow = tmp_path / "narrow"
    q = models.resolve_params("caption", PARAMS)
    caption_model.save(narrow / "model", models.build_model("caption", q), Tokenizer([START, END, "dog"], 5), q)
    assert caption.main([str(narrow), "--photo", str(photo), "--random-weights"]) == 2
    assert "have 4096 features; the model takes 6" in capsys.readouterr().err
