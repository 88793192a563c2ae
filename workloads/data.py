"""Training data: deterministic synthetic batches and a Flickr8k-layout loader.

Synthetic data is generated inside the tf.data graph with stateless RNG keyed by
(seed, batch id), so it is deterministic, costs no memory and ships as a tiny graph
to remote (parameter-server) workers. Worker `i` of `n` reads batch ids
i, i+n, i+2n, ...: shards are disjoint by construction. The shard index may be a
tensor (ParameterServerStrategy gives it only inside the worker's dataset function).

Flickr8k: a captions file (`image.jpg#0<TAB>caption`, or Kaggle's `image,caption`
CSV) plus precomputed image features (`.npz`, or a pickled dict in `.npy`) mapping
image id -> vector. Nothing is ever downloaded.
"""
from __future__ import annotations

import collections
import math
import os
import re
from dataclasses import dataclass, field

import numpy as np

START, END = "startseq", "endseq"
CAPTION_FILES = ("Flickr8k.token.txt", "captions.txt", "captions.tsv")
FEATURE_FILES = ("features.npz", "features.npy")
SPLIT_FILES = ("Flickr_8k.trainImages.txt", "Flickr_8k.testImages.txt")


# --------------------------------------------------------------------------- synthetic

def synthetic_batch(model: str, p: dict, seed: int, batch_id, batch_size: int):
    """One deterministic batch (x, y) for `model` with resolved params `p`."""
    import tensorflow as tf

    key = tf.stack([tf.cast(seed, tf.int64), tf.cast(batch_id, tf.int64)])
    wkey = tf.constant([seed, -1], tf.int64)  # fixed "teacher" so labels are learnable
    if "/" in model:            # a keras/ zoo model: images, labelled by a projection of the pooled image
        s, c = p["image_size"], p["channels"]
        x = tf.random.stateless_uniform([batch_size, s, s, c], seed=key)
        g = min(4, s)
        pooled = tf.reshape(tf.image.resize(x, [g, g], method="area"), [batch_size, -1]) - 0.5
        w = tf.random.stateless_normal([g * g * c, p["classes"]], seed=wkey)
        return x, tf.argmax(tf.matmul(pooled, w), axis=1, output_type=tf.int32)
    if model == "mlp":
        x = tf.random.stateless_normal([batch_size, p["input_dim"]], seed=key)
        w = tf.random.stateless_normal([p["input_dim"], p["classes"]], seed=wkey)
        return x, tf.argmax(tf.matmul(x, w), axis=1, output_type=tf.int32)
    if model == "cnn":
        shape = [batch_size, p["height"], p["width"], p["channels"]]
        x = tf.random.stateless_uniform(shape, seed=key)
        flat = tf.reshape(x, [batch_size, -1]) - 0.5
        w = tf.random.stateless_normal([flat.shape[1], p["classes"]], seed=wkey)
        return x, tf.argmax(tf.matmul(flat, w), axis=1, output_type=tf.int32)
    if model == "caption":
        keys = tf.random.experimental.stateless_split(key, 4)
        ml, v = p["max_len"], p["vocab_size"]
        feats = tf.random.stateless_uniform([batch_size, p["feature_dim"]], seed=keys[0])
        length = tf.random.stateless_uniform([batch_size, 1], seed=keys[1], minval=1,
                                             maxval=ml + 1, dtype=tf.int32)
        tokens = tf.random.stateless_uniform([batch_size, ml], seed=keys[2], minval=1,
                                             maxval=v, dtype=tf.int32)
        valid = tf.range(ml)[None, :] >= ml - length  # pre-padding, like pad_sequences
        seq = tf.where(valid, tokens, 0)
        hint = tf.argmax(feats[:, :16], axis=1, output_type=tf.int32)
        y = (tokens[:, -1] + hint) % (v - 1) + 1
        return (feats, seq), y
    raise ValueError(f"unknown model {model!r}")


def synthetic_dataset(model: str, p: dict, seed: int, batch_size: int,
                      shard_index=0, num_shards: int = 1):
    """Infinite dataset of batches with ids shard_index + k * num_shards."""
    import tensorflow as tf

    def make(k):
        return synthetic_batch(model, p, seed, shard_index + k * num_shards, batch_size)

    ds = tf.data.Dataset.counter(dtype=tf.int64).map(make, num_parallel_calls=1)
    return ds.prefetch(2)


# --------------------------------------------------------------------------- flickr8k

class Tokenizer:
    """Word <-> index (0 is padding) built from training captions."""

    def __init__(self, words: list[str], max_len: int):
        self.index_word = [""] + list(words)
        self.word_index = {w: i for i, w in enumerate(self.index_word) if w}
        self.max_len = max_len

    @property
    def vocab_size(self) -> int:
        return len(self.index_word)

    def encode(self, tokens: list[str]) -> list[int]:
        return [self.word_index[t] for t in tokens if t in self.word_index]

    def decode(self, ids) -> list[str]:
        return [self.index_word[i] for i in ids if 0 < i < len(self.index_word)]

    def pad(self, ids: list[int]) -> np.ndarray:
        """Pre-pad (or keep the last max_len) like keras pad_sequences."""
        ids = list(ids)[-self.max_len:]
        out = np.zeros(self.max_len, np.int32)
        if ids:
            out[-len(ids):] = ids
        return out


def clean_caption(text: str) -> list[str]:
    """Lower-case, drop punctuation, numbers and one-letter words."""
    words = re.sub(r"[^a-z ]", " ", text.lower()).split()
    return [w for w in words if len(w) > 1]


def image_id(name: str) -> str:
    """`1000268201_693b08cb0e.jpg#0` -> `1000268201_693b08cb0e`."""
    name = os.path.basename(name.split("#", 1)[0].strip())
    return os.path.splitext(name)[0] if name.lower().endswith((".jpg", ".jpeg", ".png")) else name


def read_captions(path: str) -> dict[str, list[str]]:
    """Raw captions per image id, in file order."""
    caps: dict[str, list[str]] = collections.defaultdict(list)
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh):
            line = line.rstrip("\n")
            if not line.strip():
                continue
            if "\t" in line:
                name, text = line.split("\t", 1)
            elif "," in line:  # Kaggle captions.txt: image,caption (with a header)
                name, text = line.split(",", 1)
                if n == 0 and name.strip() == "image":
                    continue
            else:
                raise ValueError(f"{path}:{n + 1}: expected 'image.jpg#k<TAB>caption'")
            caps[image_id(name)].append(text.strip())
    return dict(caps)


def load_features(path: str) -> dict[str, np.ndarray]:
    """Image id -> float32 vector from an .npz, or a pickled dict in an .npy."""
    if path.endswith(".npz"):
        with np.load(path) as z:
            raw = {k: z[k] for k in z.files}
    else:
        raw = np.load(path, allow_pickle=True).item()
    return {image_id(k): np.asarray(v, np.float32).reshape(-1) for k, v in raw.items()}


def _find(directory: str, names, explicit: str | None) -> str | None:
    if explicit:
        return explicit if os.path.isabs(explicit) else os.path.join(directory, explicit)
    for n in names:
        if os.path.exists(os.path.join(directory, n)):
            return os.path.join(directory, n)
    return None


def split_ids(ids, test_fraction: float, seed: int) -> tuple[list[str], list[str]]:
    """Deterministic train/test split by image id."""
    ids = sorted(ids)
    order = np.random.default_rng(seed).permutation(len(ids))
    n_test = min(len(ids) - 1, max(1, math.ceil(len(ids) * test_fraction))) if len(ids) > 1 else 0
    test = sorted(ids[i] for i in order[:n_test])
    train = sorted(ids[i] for i in order[n_test:])
    return train, test


@dataclass
class CaptionData:
    tokenizer: Tokenizer
    features: np.ndarray                       # (images, feature_dim), row per image
    rows: dict[str, int]                       # image id -> row in `features`
    captions: dict[str, list[list[str]]]       # cleaned tokens, without start/end
    train_ids: list[str]
    test_ids: list[str]
    pairs: tuple = field(default=None, repr=False)  # (rows, seqs, targets) of train_ids

    @property
    def feature_dim(self) -> int:
        return int(self.features.shape[1])

    def model_params(self) -> dict:
        return {"vocab_size": self.tokenizer.vocab_size, "max_len": self.tokenizer.max_len,
                "feature_dim": self.feature_dim}


def make_pairs(data: CaptionData, ids) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(image row, padded partial sequence) -> next word, for every caption prefix."""
    tok = data.tokenizer
    rows, seqs, targets = [], [], []
    for i in ids:
        for words in data.captions[i]:
            enc = tok.encode([START] + words + [END])
            for k in range(1, len(enc)):
                rows.append(data.rows[i])
                seqs.append(tok.pad(enc[:k]))
                targets.append(enc[k])
    if not rows:
        return (np.zeros(0, np.int32), np.zeros((0, tok.max_len), np.int32),
                np.zeros(0, np.int32))
    return np.array(rows, np.int32), np.stack(seqs), np.array(targets, np.int32)


def load_flickr8k(path: str, captions: str | None = None, features: str | None = None,
                  test_fraction: float = 0.2, max_len: int | None = None,
                  min_count: int = 1, max_images: int | None = None,
                  seed: int = 0) -> CaptionData:
    """Load a Flickr8k-layout directory; see the module docstring."""
    cap_path = _find(path, CAPTION_FILES, captions)
    feat_path = _find(path, FEATURE_FILES, features)
    if not cap_path or not os.path.exists(cap_path):
        raise FileNotFoundError(f"no captions file in {path} (tried {', '.join(CAPTION_FILES)})")
    if not feat_path or not os.path.exists(feat_path):
        raise FileNotFoundError(f"no features file in {path} (tried {', '.join(FEATURE_FILES)})")
    raw = read_captions(cap_path)
    feats = load_features(feat_path)
    ids = sorted(set(raw) & set(feats))
    if max_images:
        ids = ids[:max_images]
    if len(ids) < 2:
        raise ValueError(f"{path}: need at least 2 images with both captions and features")
    train_file, test_file = (os.path.join(path, n) for n in SPLIT_FILES)
    if os.path.exists(train_file) and os.path.exists(test_file):
        known = set(ids)
        read = lambda f: sorted({image_id(l) for l in open(f) if l.strip()} & known)  # noqa: E731
        train_ids, test_ids = read(train_file), read(test_file)
    else:
        train_ids, test_ids = split_ids(ids, test_fraction, seed)
    cleaned = {i: [clean_caption(c) for c in raw[i]] for i in train_ids + test_ids}
    counts = collections.Counter(w for i in train_ids for c in cleaned[i] for w in c)
    words = sorted((w for w, n in counts.items() if n >= min_count), key=lambda w: (-counts[w], w))
    longest = max(len(c) + 2 for i in train_ids for c in cleaned[i])
    tok = Tokenizer([START, END] + [w for w in words if w not in (START, END)],
                    max_len or longest)
    order = train_ids + test_ids
    matrix = np.stack([feats[i] for i in order]).astype(np.float32)
    data = CaptionData(tok, matrix, {i: r for r, i in enumerate(order)}, cleaned,
                       train_ids, test_ids)
    data.pairs = make_pairs(data, train_ids)
    return data


def flickr8k_dataset(data: CaptionData, batch_size: int, seed: int,
                     shard_index=0, num_shards: int = 1):
    """Infinite, shuffled ((feature, sequence), next word) batches of this worker's shard."""
    import tensorflow as tf

    rows, seqs, targets = data.pairs
    ds = tf.data.Dataset.from_tensor_slices((rows, seqs, targets))
    ds = ds.shard(num_shards, shard_index)
    ds = ds.shuffle(min(len(rows), 10000), seed=seed, reshuffle_each_iteration=True).repeat()
    feats = tf.constant(data.features)

    def gather(r, s, t):
        return (tf.gather(feats, r), s), t

    return ds.batch(batch_size, drop_remainder=True).map(gather).prefetch(2)


def caption_options(data_cfg: dict) -> dict:
    """Loader keyword arguments from the job's `data` section."""
    keys = ("captions", "features", "test_fraction", "max_len", "min_count", "max_images")
    return {k: data_cfg[k] for k in keys if data_cfg.get(k) is not None}


def synthetic_caption_data(p: dict, seed: int, images: int = 8, captions: int = 2) -> CaptionData:
    """A random held-out set (words `w3`, `w4`, ...) so eval runs without Flickr8k."""
    rng = np.random.default_rng(seed + 7919)
    words = [START, END] + [f"w{i}" for i in range(3, p["vocab_size"])]
    tok = Tokenizer(words, p["max_len"])
    ids = [f"img{i}" for i in range(images)]
    caps = {i: [[str(w) for w in rng.choice(words[2:], size=rng.integers(3, 8))]
                for _ in range(captions)] for i in ids}
    feats = rng.random((images, p["feature_dim"]), dtype=np.float32)
    return CaptionData(tok, feats, {i: r for r, i in enumerate(ids)}, caps, [], ids)
