"""`caption RUN_DIR --features FILE.npz [--image ID ...]` or `caption RUN_DIR --photo IMAGE ...
[--weights VGG16.h5]`: captions for images from the model a caption run saved (the thesis's figure
20), by greedy decoding (workloads/caption/model.py). No root, no network: it reads the run
folder's model/ and the features file, or makes the photos' features with the user's VGG16 weights
file (workloads/caption/image_features.py)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from testbed.cli.common import Command, main_of
from workloads.caption.image_features import SUFFIXES, WEIGHTS_FILE, missing_weights, photo_problem


def add_arguments(p) -> None:
    p.add_argument("run_dir", type=Path, help="a caption run's folder (RESULTS/runs/RUN_ID), with model/ in it")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--features", help="an .npz of image id -> feature vector, as the caption data's "
                        "features file (the same extractor: the thesis's VGG16 fc2, 4096 values)")
    source.add_argument("--photo", action="append", type=Path, metavar="IMAGE",
                        help="a .jpg/.jpeg/.png to caption (repeatable): its features are made with VGG16 "
                        "and --weights, as the caption data's were")
    p.add_argument("--image", action="append", default=None, metavar="ID",
                   help="with --features: caption this image of the file (repeatable; default: every image)")
    p.add_argument("--weights", type=Path, default=Path(WEIGHTS_FILE),
                   help=f"with --photo: the Keras VGG16 weights with the top layers (default ./{WEIGHTS_FILE})")
    p.add_argument("--random-weights", action="store_true",
                   help="with --photo: an untrained VGG16 (meaningless features; for tests only)")


def _refusal(args) -> str | None:
    """Why the command cannot start, before TensorFlow is imported; None when it can."""
    folder = args.run_dir / "model"
    if not (folder / "weights.npz").is_file():
        why = ("it is not a run folder (RESULTS/runs/RUN_ID)" if not (args.run_dir / "result.json").is_file() else
               "its run saved no model: only model caption saves one, when its lead task runs on this "
               "machine (a netns host), and only once training ended")
        return f"no trained caption model in {folder}: {why}"
    if args.features is not None:
        return None if Path(args.features).is_file() else f"no features file {args.features}"
    if args.image:
        return "--image picks images of a --features file; with --photo, name the photos themselves"
    for photo in args.photo:
        if not photo.is_file() or photo.suffix.lower() not in SUFFIXES:
            return f"no {'/'.join(SUFFIXES)} image file {photo}"
        if problem := photo_problem(photo):
            return problem
    if not args.random_weights and not args.weights.is_file():
        return missing_weights(args.weights)
    return None


def run(args) -> int:
    refusal = _refusal(args)
    if refusal:
        print(f"error: {refusal}", file=sys.stderr)
        return 2
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from workloads.caption import model as caption_model
    folder = args.run_dir / "model"
    try:
        if args.features is not None:
            captions = caption_model.caption_images(folder, args.features, args.image)
        else:
            from workloads.caption import image_features
            model = image_features.feature_model(None if args.random_weights else str(args.weights))
            feats = image_features.extract(model, args.photo, key=str)     # by path: two photos may share a name
            captions = caption_model.caption_features(folder, feats, [str(p) for p in args.photo],
                                                      "the photos' VGG16 features")
    except (KeyError, ValueError) as err:
        print(f"error: {err.args[0]}", file=sys.stderr)
        return 2
    for image, words in captions.items():
        print(f"{image}: {words or '(no words: the model ended the caption at once)'}")
    return 0


COMMAND = Command("caption", "captions for new images from the model a caption run saved (greedy decoding)",
                  add_arguments, run)


def main(argv=None) -> int:
    return main_of(COMMAND, argv)
