"""Images -> the caption model's image features, as the thesis made them: each image resized to
224x224 and passed through VGG16, whose penultimate layer (fc2, 4096 values) is the feature
vector. Used by scripts/flickr8k_features.py (the data set's features.npz) and by the `caption`
command (a new photo, thesis figure 20). Nothing is downloaded: the Keras VGG16 weights file with
the top layers must be on disk."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

SIZE = (224, 224)
SUFFIXES = (".jpg", ".jpeg", ".png")
WEIGHTS_FILE = "vgg16_weights_tf_dim_ordering_tf_kernels.h5"


def missing_weights(path: Path, option: str = "--weights PATH") -> str:
    """What to say when the VGG16 weights file is not there."""
    return (f"VGG16 weights file {path} not found. Nothing is downloaded: put the Keras file {WEIGHTS_FILE} "
            f"(with the top layers, whose fc2 gives the 4096-long features) there, or pass {option}.")


MAX_PHOTO_PIXELS = 100_000_000      # 100 megapixels: a photo larger than that is refused, not decoded


def photo_problem(path: Path) -> str | None:
    """Why a photo cannot be read as an image (named, before TensorFlow starts), or None: its header is
    read and its data checked, never decoded in full, so a file claiming 100,000 x 100,000 pixels is
    refused by its header."""
    from PIL import Image, UnidentifiedImageError

    try:
        limit, Image.MAX_IMAGE_PIXELS = Image.MAX_IMAGE_PIXELS, None     # its size is judged below, in one sentence
        try:
            img = Image.open(path)
        finally:
            Image.MAX_IMAGE_PIXELS = limit
        with img:
            width, height = img.size
            if width * height > MAX_PHOTO_PIXELS:
                return f"{path}: {width} x {height} pixels is more than the {MAX_PHOTO_PIXELS:,} a photo may have"
            img.verify()
    except UnidentifiedImageError:
        return f"{path}: not an image this program reads (JPEG or PNG)"
    except (Image.DecompressionBombError, OSError, ValueError, SyntaxError) as err:
        return f"{path}: not a readable image ({str(err).splitlines()[0][:160] if str(err) else type(err).__name__})"
    return None


def image_files(folder: Path) -> list[Path]:
    """The images of a folder (not recursive), sorted by name."""
    return sorted(p for p in Path(folder).iterdir() if p.suffix.lower() in SUFFIXES)


def load_images(paths: list[Path]) -> np.ndarray:
    """(n, 224, 224, 3) float32 RGB, VGG16-preprocessed (BGR, ImageNet means subtracted)."""
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    from PIL import Image
    from tf_keras.applications.vgg16 import preprocess_input

    arrays = []
    for p in paths:
        with Image.open(p) as img:
            arrays.append(np.asarray(img.convert("RGB").resize(SIZE, Image.NEAREST), np.float32))
    return preprocess_input(np.stack(arrays))


def feature_model(weights: str | None):
    """VGG16 up to fc2 (4096 outputs); weights: a local .h5 path, or None for random weights."""
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    import tf_keras as keras

    vgg = keras.applications.VGG16(weights=weights, include_top=True)
    return keras.Model(vgg.inputs, vgg.get_layer("fc2").output)


def extract(model, paths: list[Path], batch: int = 16, key=lambda p: p.stem) -> dict[str, np.ndarray]:
    """key(path) (by default the image id: the file name without its extension) -> float32 feature vector."""
    out = {}
    for lo in range(0, len(paths), batch):
        chunk = paths[lo:lo + batch]
        feats = model.predict(load_images(chunk), verbose=0)
        out.update({key(p): f.astype(np.float32) for p, f in zip(chunk, feats)})
    return out


def save(features: dict[str, np.ndarray], out: Path) -> Path:
    """Write features.npz (keys = image ids) via a temporary file, so a crash leaves no half file."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp.npz")
    np.savez(tmp, **features)
    os.replace(tmp, out)
    return out
