"""A trained caption model kept in a run folder, and captions for new images from it.

The chief of a caption run saves, after training, into the folder the testbed names
(job["save_model"], the run folder's model/): `weights.npz` (the model's weights in layer order),
`tokenizer.json` (the vocabulary, index order, and the longest caption) and `params.json` (the
model's parameters: build_model("caption", params) makes the same model again). Figure 20 of the
thesis: `run_experiment.py caption RUN_DIR --features FILE.npz` (or `--photo IMAGE --weights
VGG16.h5`) prints each image's caption by greedy decoding."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from workloads import models
from workloads.data import Tokenizer, load_features

WEIGHTS, TOKENIZER, PARAMS = "weights.npz", "tokenizer.json", "params.json"


def save(folder: str | Path, model, tokenizer: Tokenizer, params: dict) -> Path:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    weights = model.get_weights()
    np.savez(folder / WEIGHTS, **{f"w{i:03d}": w for i, w in enumerate(weights)})
    (folder / TOKENIZER).write_text(json.dumps({"words": tokenizer.index_word[1:], "max_len": tokenizer.max_len}))
    (folder / PARAMS).write_text(json.dumps(params, sort_keys=True))
    return folder


def load(folder: str | Path):
    """(model, tokenizer) from a folder `save` wrote."""
    folder = Path(folder)
    params = json.loads((folder / PARAMS).read_text())
    words = json.loads((folder / TOKENIZER).read_text())
    model = models.build_model("caption", params)
    with np.load(folder / WEIGHTS) as z:
        model.set_weights([z[k] for k in sorted(z.files)])
    return model, Tokenizer(words["words"], int(words["max_len"]))


def caption_images(folder: str | Path, features_file: str, images: list[str] | None = None) -> dict[str, str]:
    """Image id -> greedy caption, for the images of `features_file` (an .npz of id -> vector, as the
    caption data's features; all of them, or those named)."""
    return caption_features(folder, load_features(features_file), images, features_file)


def caption_features(folder: str | Path, feats: dict[str, np.ndarray], images: list[str] | None = None,
                     source: str = "the features") -> dict[str, str]:
    """Image id -> greedy caption, for the feature vectors `feats` (all of them, or the ids named);
    `source` names where they came from in an error."""
    from workloads.caption.bleu import greedy_decode

    model, tokenizer = load(folder)
    wanted = images or sorted(feats)
    missing = [i for i in wanted if i not in feats]
    if missing:
        raise KeyError(f"{source} has no features for {', '.join(missing)}")
    dim = model.inputs[0].shape[-1]
    wrong = [i for i in wanted if feats[i].shape[0] != dim]
    if wrong:
        raise ValueError(f"{source}: {', '.join(wrong)} have {feats[wrong[0]].shape[0]} features; "
                         f"the model takes {dim} (the image features it was trained on)")
    captions = greedy_decode(model, tokenizer, np.stack([feats[i] for i in wanted]))
    return {i: " ".join(words) for i, words in zip(wanted, captions)}
