"""`caption RUN_DIR --features FILE.npz [--image ID ...]`: captions for images from the model a
caption run saved (the thesis's figure 20), by greedy decoding (workloads/caption_model.py). No
root, no network: it reads the run folder's model/ and the features file."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from testbed.cli.common import Command, main_of


def add_arguments(p) -> None:
    p.add_argument("run_dir", type=Path, help="a caption run's folder (RESULTS/runs/RUN_ID), with model/ in it")
    p.add_argument("--features", required=True, help="an .npz of image id -> feature vector, as the caption "
                   "data's features file (the same extractor: the thesis's VGG16 fc2, 4096 values)")
    p.add_argument("--image", action="append", default=None, metavar="ID",
                   help="caption this image of the file (repeatable; default: every image in it)")


def run(args) -> int:
    folder = args.run_dir / "model"
    if not (folder / "weights.npz").is_file():
        why = ("it is not a run folder (RESULTS/runs/RUN_ID)" if not (args.run_dir / "result.json").is_file() else
               "its run saved no model: only model caption saves one, when its lead task runs on this "
               "machine (a netns host), and only once training ended")
        print(f"error: no trained caption model in {folder}: {why}", file=sys.stderr)
        return 2
    if not Path(args.features).is_file():
        print(f"error: no features file {args.features}", file=sys.stderr)
        return 2
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from workloads import caption_model
    try:
        captions = caption_model.caption_images(folder, args.features, args.image)
    except (KeyError, ValueError) as err:
        print(f"error: {err.args[0]}", file=sys.stderr)
        return 2
    for image, words in captions.items():
        print(f"{image}: {words}")
    return 0


COMMAND = Command("caption", "captions for new images from the model a caption run saved (greedy decoding)",
                  add_arguments, run)


def main(argv=None) -> int:
    return main_of(COMMAND, argv)
