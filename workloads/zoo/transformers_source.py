"""Hugging Face transformers' causal language models by model type (transformers/gpt2,
transformers/llama, ...), built from the type's default configuration (gpt2: GPT-2 small) with
model_params setting layers, width, heads, vocabulary and sequence length; nothing is downloaded."""
from __future__ import annotations

from workloads.zoo import tasks

PREFIX = "transformers"
ENGINE = "pytorch"
PACKAGES = ("transformers",)
SIZES = ("layers", "width", "heads", "vocab_size")     # null: the configuration's own


def names() -> list[str]:
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    return sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


def config(name: str, p: dict):
    """The model type's default configuration with the sizes model_params sets."""
    from transformers import AutoConfig

    cfg = AutoConfig.for_model(name)
    for key, attr in zip(SIZES, ("num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size")):
        if p.get(key) is not None:
            setattr(cfg, attr, p[key])
    for attr in ("n_positions", "max_position_embeddings"):
        if hasattr(cfg, attr) and getattr(cfg, attr) < p["seq_len"]:
            setattr(cfg, attr, p["seq_len"])
    if hasattr(cfg, "use_cache"):
        cfg.use_cache = False
    return cfg


PARAMS = {"seq_len": 128, **{k: None for k in SIZES}}


def defaults(name: str) -> dict:
    return dict(PARAMS)


def build(name: str, p: dict):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_config(config(name, p))


def batch(name: str, p: dict, seed: int, batch_id: int, batch_size: int):
    vocab = p["vocab_size"] or config(name, p).vocab_size
    return tasks.torch_token_batch({**p, "vocab_size": vocab}, seed, batch_id, batch_size)


loss = tasks.causal_lm_loss
