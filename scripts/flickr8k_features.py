#!/usr/bin/env python3
"""Flickr8k images -> features.npz for `data: {kind: flickr8k, path: DIR}` (workloads/data.py).

    .venv/bin/python scripts/flickr8k_features.py Flicker8k_Dataset/ \\
        --weights vgg16_weights_tf_dim_ordering_tf_kernels.h5 --out DIR/features.npz

Each image (jpg/jpeg/png, resized to 224x224) goes through VGG16 and its penultimate layer (fc2,
4096 values) is stored under the image's id (file name without extension), as in the thesis
(workloads/caption/image_features.py). Nothing is downloaded: the Keras VGG16 weights file *with* the top
layers must be on disk. `--random-weights` uses an untrained VGG16 instead (meaningless features;
for tests only).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from workloads.caption.image_features import (SUFFIXES, WEIGHTS_FILE, extract, feature_model,  # noqa: E402
                                      image_files, missing_weights, save)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("images", type=Path, help="folder of Flickr8k images (Flicker8k_Dataset)")
    ap.add_argument("--weights", type=Path, default=Path(WEIGHTS_FILE),
                    help=f"Keras VGG16 weights with the top layers (default ./{WEIGHTS_FILE})")
    ap.add_argument("--random-weights", action="store_true",
                    help="untrained VGG16: meaningless features, for tests only")
    ap.add_argument("--out", type=Path, help="output file (default IMAGES/../features.npz)")
    ap.add_argument("--batch", type=int, default=16)
    args = ap.parse_args(argv)
    if not args.random_weights and not args.weights.is_file():
        print(f"error: {missing_weights(args.weights)}", file=sys.stderr)
        return 2
    paths = image_files(args.images) if args.images.is_dir() else []
    if not paths:
        print(f"error: no {'/'.join(SUFFIXES)} images in {args.images}", file=sys.stderr)
        return 2
    model = feature_model(None if args.random_weights else str(args.weights))
    out = save(extract(model, paths, args.batch), args.out or args.images.parent / "features.npz")
    print(f"{out}: {len(paths)} images, {model.output_shape[-1]} features each")
    return 0


if __name__ == "__main__":
    sys.exit(main())
