#!/usr/bin/env python3
"""A tiny made-up data set in Flickr8k's layout, for trying the caption model without the real one.

    .venv/bin/python scripts/tiny_flickr8k.py data/flickr8k-tiny
    .venv/bin/python run_experiment.py run topologies/thesis_caption.yaml --set workload.data.path=data/flickr8k-tiny

writes Flickr8k.token.txt (IMAGE.jpg#K<TAB>caption, three captions per image from a 13-word
vocabulary) and features.npz (one random feature vector per image). Seeded: the same files every
time. Its BLEU scores say only that the pipeline works, nothing about the thesis's model.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

WORDS = "dog cat runs sleeps grass sofa red car road birds fly over sea".split()


def write_flickr8k(folder: Path, images: int = 10, dim: int = 32) -> None:
    """Flickr8k layout in `folder` (made here; it must not exist): the captions file and features.npz."""
    folder.mkdir(parents=True)
    rng = np.random.default_rng(3)
    lines, feats = [], {}
    for i in range(images):
        feats[f"{1000 + i}_img"] = rng.random(dim, dtype=np.float32)
        lines += [f"{1000 + i}_img.jpg#{k}\tA {' '.join(rng.choice(WORDS, 4))} ." for k in range(3)]
    (folder / "Flickr8k.token.txt").write_text("\n".join(lines) + "\n")
    np.savez(folder / "features.npz", **feats)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path, help="the folder to make")
    p.add_argument("--images", type=int, default=10)
    p.add_argument("--dim", type=int, default=32, help="length of each made-up feature vector")
    args = p.parse_args(argv)
    if args.out.exists():
        print(f"error: {args.out} exists; name a new folder", file=sys.stderr)
        return 2
    write_flickr8k(args.out, args.images, args.dim)
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
