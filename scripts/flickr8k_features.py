#!/usr/bin/env python3
"""Flickr8k images -> features.npz for `data: {kind: flickr8k, path: DIR}` (workloads/data.py).

    .venv/bin/python scripts/flickr8k_features.py Flicker8k_Dataset/ \\
        --weights vgg16_weights_tf_dim_ordering_tf_kernels.h5 --out DIR/features.npz

Each image (jpg/jpeg/png, resized to 224x224) goes through VGG16 and its penultimate layer (fc2,
4096 values) is stored under the image's id (file name without extension), as in the thesis.
Nothing is downloaded: the Keras VGG16 weights file *with* the top layers must be on disk.
`--random-weights` uses an untrained VGG16 instead (meaningless features; for tests only).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

SIZE = (224, 224)
SUFFIXES = (".jpg", ".jpeg", ".png")
WEIGHTS_FILE = "vgg16_weights_tf_dim_ordering_tf_kernels.h5"


def image_files(folder: Path) -> list[Path]:
    """The images of a folder (not recursive), sorted by name."""
    return sorted(p for p in Path(folder).iterdir() if p.suffix.lower() in SUFFIXES)


def load_images(paths: list[Path]) -> np.ndarray:
    """(n, 224, 224, 3) float32 RGB, VGG16-preprocessed (BGR, ImageNet means subtracted)."""
    from PIL import Image
    from tf_keras.applications.vgg16 import preprocess_input

    arrays = []
    for p in paths:
        with Image.open(p) as img:
            arrays.append(np.asarray(img.convert("RGB").resize(SIZE, Image.NEAREST), np.float32))
    return preprocess_input(np.stack(arrays))


def feature_model(weights: str | None):
    """VGG16 up to fc2 (4096 outputs); weights: a local .h5 path, or None for random weights."""
    import tf_keras as keras

    vgg = keras.applications.VGG16(weights=weights, include_top=True)
    return keras.Model(vgg.inputs, vgg.get_layer("fc2").output)


def extract(model, paths: list[Path], batch: int = 16) -> dict[str, np.ndarray]:
    """Image id -> float32 feature vector."""
    out = {}
    for lo in range(0, len(paths), batch):
        chunk = paths[lo:lo + batch]
        feats = model.predict(load_images(chunk), verbose=0)
        out.update({p.stem: f.astype(np.float32) for p, f in zip(chunk, feats)})
    return out


def save(features: dict[str, np.ndarray], out: Path) -> Path:
    """Write features.npz (keys = image ids) via a temporary file, so a crash leaves no half file."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp.npz")
    np.savez(tmp, **features)
    os.replace(tmp, out)
    return out


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
        print(f"error: VGG16 weights file {args.weights} not found. Nothing is downloaded: put the "
              f"Keras file {WEIGHTS_FILE} (with the top layers, whose fc2 gives the 4096-long "
              "features) there, or pass --weights PATH.", file=sys.stderr)
        return 2
    paths = image_files(args.images) if args.images.is_dir() else []
    if not paths:
        print(f"error: no {'/'.join(SUFFIXES)} images in {args.images}", file=sys.stderr)
        return 2
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    model = feature_model(None if args.random_weights else str(args.weights))
    out = save(extract(model, paths, args.batch), args.out or args.images.parent / "features.npz")
    print(f"{out}: {len(paths)} images, {model.output_shape[-1]} features each")
    return 0


if __name__ == "__main__":
    sys.exit(main())
