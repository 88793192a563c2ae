"""scripts/flickr8k_features.py: two tiny made-up images through an untrained VGG16 into the
features.npz that workloads/data.py reads; refusal without the weights file."""
import importlib.util
import os
from pathlib import Path

import numpy as np
import pytest

os.environ["TF_USE_LEGACY_KERAS"] = "1"  # before TensorFlow is imported
from PIL import Image  # noqa: E402

from workloads import data  # noqa: E402
from workloads.caption import image_features  # noqa: E402

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "flickr8k_features.py"
spec = importlib.util.spec_from_file_location("flickr8k_features", SCRIPT)
features = importlib.util.module_from_spec(spec)
spec.loader.exec_module(features)


@pytest.fixture
def images(tmp_path):
    folder = tmp_path / "Flicker8k_Dataset"
    folder.mkdir()
    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 255, (40, 60, 3), np.uint8)).save(folder / "1000_aa.jpg")
    Image.fromarray(rng.integers(0, 255, (30, 30, 4), np.uint8)).save(folder / "1001_bb.png")
    (folder / "notes.txt").write_text("not an image")
    return folder


def test_images_loaded_and_preprocessed(images):
    paths = features.image_files(images)
    assert [p.name for p in paths] == ["1000_aa.jpg", "1001_bb.png"]
    x = image_features.load_images(paths)
    assert x.shape == (2, 224, 224, 3) and x.dtype == np.float32
    assert x.min() < 0  # ImageNet means subtracted


def test_features_npz_feeds_the_flickr8k_loader(images, capsys):
    out = images.parent / "features.npz"
    assert features.main([str(images), "--random-weights", "--batch", "1"]) == 0
    assert "2 images, 4096 features each" in capsys.readouterr().out
    feats = data.load_features(str(out))
    assert sorted(feats) == ["1000_aa", "1001_bb"]
    assert all(v.shape == (4096,) and v.dtype == np.float32 for v in feats.values())
    (images.parent / "Flickr8k.token.txt").write_text(
        "1000_aa.jpg#0\tA dog runs on grass .\n1001_bb.png#0\tA cat sleeps on a sofa .\n")
    loaded = data.load_flickr8k(str(images.parent))
    assert loaded.feature_dim == 4096 and len(loaded.train_ids) == len(loaded.test_ids) == 1


def test_refuses_without_weights_and_downloads_nothing(images, tmp_path, capsys):
    missing = tmp_path / "vgg16.h5"
    assert features.main([str(images), "--weights", str(missing)]) == 2
    err = capsys.readouterr().err
    assert f"VGG16 weights file {missing} not found" in err and "Nothing is downloaded" in err
    assert not (images.parent / "features.npz").exists()
    assert features.main([str(tmp_path / "nowhere"), "--random-weights"]) == 2
    assert "no .jpg/.jpeg/.png images in" in capsys.readouterr().err
