"""Synthetic data (shapes, determinism, disjoint shards) and the Flickr8k loader."""
import os

import numpy as np
import pytest

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from workloads import data, models  # noqa: E402


def first(ds, n=1):
    return [b for b in ds.take(n).as_numpy_iterator()]


SMALL = {"mlp": {}, "cnn": {}, "caption": {"vocab_size": 30, "feature_dim": 12, "max_len": 6}}


@pytest.mark.parametrize("name", ["mlp", "cnn", "caption"])
def test_synthetic_shapes(name):
    p = models.resolve_params(name, SMALL[name])
    (x, y), = first(data.synthetic_dataset(name, p, seed=1, batch_size=4))
    assert y.shape == (4,) and y.dtype == np.int32
    if name == "mlp":
        assert x.shape == (4, 784)
        assert y.min() >= 0 and y.max() < 10
    elif name == "cnn":
        assert x.shape == (4, 28, 28, 1)
    else:
        feats, seq = x
        assert feats.shape == (4, 12) and seq.shape == (4, 6)
        assert y.min() >= 1 and y.max() < 30
        for row in seq:  # pre-padded: zeros, then tokens
            nz = np.flatnonzero(row)
            assert len(nz) >= 1 and nz[-1] == 5 and np.all(np.diff(nz) == 1)


def test_synthetic_deterministic_per_seed():
    p = models.resolve_params("mlp", {})
    a = first(data.synthetic_dataset("mlp", p, 3, 8), 2)
    b = first(data.synthetic_dataset("mlp", p, 3, 8), 2)
    c = first(data.synthetic_dataset("mlp", p, 4, 8), 2)
    np.testing.assert_array_equal(a[1][0], b[1][0])
    assert not np.allclose(a[0][0], c[0][0])


def test_synthetic_shards_disjoint_and_cover():
    p = models.resolve_params("mlp", {"input_dim": 5})
    whole = first(data.synthetic_dataset("mlp", p, 0, 4), 4)
    s0 = first(data.synthetic_dataset("mlp", p, 0, 4, shard_index=0, num_shards=2), 2)
    s1 = first(data.synthetic_dataset("mlp", p, 0, 4, shard_index=1, num_shards=2), 2)
    np.testing.assert_array_equal(s0[0][0], whole[0][0])
    np.testing.assert_array_equal(s1[0][0], whole[1][0])
    np.testing.assert_array_equal(s0[1][0], whole[2][0])
    rows0 = {r.tobytes() for b in s0 for r in b[0]}
    rows1 = {r.tobytes() for b in s1 for r in b[0]}
    assert not rows0 & rows1


# ----------------------------------------------------------------------------- flickr8k

CAPS = [
    "A dog runs on the grass .", "The brown dog is running !",
    "A child in a pink dress .", "A little girl climbs stairs",
    "Two men play soccer", "Men are playing a game of soccer .",
    "A cat sleeps on a sofa", "The cat is asleep",
    "A red car on the road", "A car drives fast on a road",
    "Birds fly over the sea", "A flock of birds above water",
]


def write_flickr(tmp_path, fmt="npz", dim=16):
    ids = [f"10{i}_abc" for i in range(6)]
    with open(tmp_path / "Flickr8k.token.txt", "w") as fh:
        for n, i in enumerate(ids):
            for k in range(2):
                fh.write(f"{i}.jpg#{k}\t{CAPS[2 * n + k]}\n")
    rng = np.random.default_rng(0)
    feats = {f"{i}.jpg": rng.random(dim).astype(np.float32) for i in ids}
    if fmt == "npz":
        np.savez(tmp_path / "features.npz", **feats)
    else:
        np.save(tmp_path / "features.npy", feats, allow_pickle=True)
    return ids, feats


def test_clean_and_ids():
    assert data.clean_caption("A dog's 2 toys, running!") == ["dog", "toys", "running"]
    assert data.image_id("1000268201_693b08cb0e.jpg#3") == "1000268201_693b08cb0e"


@pytest.mark.parametrize("fmt", ["npz", "npy"])
def test_flickr8k_loader(tmp_path, fmt):
    ids, feats = write_flickr(tmp_path, fmt)
    d = data.load_flickr8k(str(tmp_path), test_fraction=0.34, seed=0)
    assert len(d.test_ids) == 3 and len(d.train_ids) == 3
    assert not set(d.test_ids) & set(d.train_ids)
    assert set(d.test_ids) | set(d.train_ids) == set(ids)
    tok = d.tokenizer
    assert tok.index_word[0] == "" and tok.word_index[data.START] == 1
    train_words = {w for i in d.train_ids for c in d.captions[i] for w in c}
    assert set(tok.word_index) == train_words | {data.START, data.END}
    assert tok.vocab_size == len(train_words) + 3
    assert tok.max_len == max(len(c) + 2 for i in d.train_ids for c in d.captions[i])
    assert d.model_params() == {"vocab_size": tok.vocab_size, "max_len": tok.max_len,
                                "feature_dim": 16}
    np.testing.assert_array_equal(d.features[d.rows[ids[0]]], feats[f"{ids[0]}.jpg"])
    rows, seqs, targets = d.pairs
    assert len(rows) == sum(len(c) + 1 for i in d.train_ids for c in d.captions[i])
    assert seqs.shape == (len(rows), tok.max_len)
    # first pair of the first caption: [startseq] -> first word, pre-padded
    first_id = d.train_ids[0]
    assert seqs[0][-1] == tok.word_index[data.START] and not seqs[0][:-1].any()
    assert tok.index_word[targets[0]] == d.captions[first_id][0][0]
    assert rows[0] == d.rows[first_id]


def test_flickr8k_split_deterministic_and_files(tmp_path):
    ids, _ = write_flickr(tmp_path)
    a = data.load_flickr8k(str(tmp_path), seed=5)
    b = data.load_flickr8k(str(tmp_path), seed=5)
    assert a.test_ids == b.test_ids
    (tmp_path / "Flickr_8k.trainImages.txt").write_text("".join(f"{i}.jpg\n" for i in ids[:4]))
    (tmp_path / "Flickr_8k.testImages.txt").write_text("".join(f"{i}.jpg\n" for i in ids[4:]))
    c = data.load_flickr8k(str(tmp_path))
    assert c.train_ids == ids[:4] and c.test_ids == ids[4:]


def test_flickr8k_missing_files(tmp_path):
    with pytest.raises(FileNotFoundError):
        data.load_flickr8k(str(tmp_path))


def test_flickr8k_dataset_shards(tmp_path):
    import collections

    write_flickr(tmp_path)
    d = data.load_flickr8k(str(tmp_path))
    (feats, seq), y = first(data.flickr8k_dataset(d, 4, seed=0))[0]
    assert feats.shape == (4, 16) and seq.shape == (4, d.tokenizer.max_len) and y.shape == (4,)
    n = len(d.pairs[0])

    def one_pass(k):  # batch 1, one pass over shard k of 2
        ds = data.flickr8k_dataset(d, 1, 0, k, 2)
        return collections.Counter((tuple(b[0][1][0]), int(b[1][0]))
                                   for b in first(ds, (n - k + 1) // 2))

    everything = collections.Counter((tuple(s), int(t)) for s, t in zip(d.pairs[1], d.pairs[2]))
    assert one_pass(0) + one_pass(1) == everything
