"""A model in TransformerLens 4's native form: the files ``TransformerBridge.boot_native`` loads.

TransformerLens 4 removed ``HookedTransformer``; its supported path for a model defined by a
config rather than a Hugging Face checkpoint is ``TransformerBridge.boot_native(config)``, which
builds a TL-native transformer (``transformer_lens.model_bridge.sources.native``) wrapped in the
bridge; ``bridge.load_state_dict`` fills its weights under the bridge's names. This module converts
an artifact's ``config.json`` and weights (TransformerLens 3.x layout) into that form with torch
alone (no TransformerLens import), so a release ships them beside the 3.x files::

    bridge/config.json        a TransformerBridgeConfig dict (TransformerBridgeConfig.from_dict)
    bridge/model.safetensors  the bridge's state dict: embed, pos_embed, blocks.L.attn.{q,k,v,o},
                              blocks.L.mlp.{in,out}, unembed (weight and bias)

The native model computes what the 3.x model computes. One difference of layout: its attention
divides scores by ``attn_scale`` too but refuses an unscaled ``attn_scale`` of 1 with ``d_head > 1``,
so a 3.x scale other than ``sqrt(d_head)`` is folded into ``W_Q``/``b_Q`` and the bridge config says
``sqrt(d_head)``.

Why not ``boot_transformers``: it needs a ``transformers`` architecture, and none computes these
models (no layer norms, learned positions, bidirectional attention for some, input and output
vocabularies of different sizes, an unembedding bias).

What does not convert (:class:`~cbench.errors.ArtifactError` naming the feature): layer norms,
rotary or other positional embeddings, gated or parallel MLPs, grouped-query or local attention,
soft caps, per-layer attention scaling, activations the native model lacks. No model released by
cbench has any of these.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cbench.errors import ArtifactError

BRIDGE_DIR = "bridge"
BRIDGE_CONFIG_FILE = f"{BRIDGE_DIR}/config.json"
BRIDGE_WEIGHTS_FILE = f"{BRIDGE_DIR}/model.safetensors"
NATIVE_ARCHITECTURE = "TransformerLensNative"

# activations of transformer_lens.model_bridge.sources.native.model (4.x), by 3.x act_fn name
_ACTIVATIONS = frozenset({"gelu", "gelu_new", "relu", "silu"})

# 3.x config fields that must keep their default for the native model to compute the same function:
# field -> (values that are fine, what the feature is called in the error)
_UNSUPPORTED: dict[str, tuple[tuple[Any, ...], str]] = {
    "positional_embedding_type": (("standard",), "positional embeddings other than learned ('standard')"),
    "gated_mlp": ((False, None), "a gated MLP"),
    "parallel_attn_mlp": ((False, None), "attention and MLP in parallel"),
    "n_key_value_heads": ((None,), "grouped-query attention (n_key_value_heads)"),
    "use_local_attn": ((False, None), "local attention"),
    "scale_attn_by_inverse_layer_idx": ((False, None), "attention scaled by the inverse layer index"),
    "attn_scores_soft_cap": ((-1.0, -1, None), "an attention-score soft cap"),
    "output_logits_soft_cap": ((-1.0, -1, None), "an output soft cap"),
    "final_rms": ((False, None), "a final RMS norm"),
    "post_embedding_ln": ((False, None), "a layer norm after the embedding"),
    "use_normalization_before_and_after": ((False, None), "normalization before and after each sublayer"),
    "use_qk_norm": ((False, None), "query/key norms"),
    "num_experts": ((None,), "mixture-of-experts MLPs"),
    "use_attention_sinks": ((False, None), "attention sinks"),
}


@dataclass(frozen=True)
class NativeBridgeModel:
    """The bridge form of one model: ``config`` for ``TransformerBridge.boot_native`` and the
    bridge's ``state_dict``."""

    config: dict
    state_dict: dict


def unsupported_features(config: Mapping[str, Any]) -> list[str]:
    """What in a 3.x ``config.json`` the TransformerLens 4 native model cannot compute (empty: it
    converts). The unembedding bias is not checked here (it depends on the weights)."""
    problems = []
    for key, (fine, what) in _UNSUPPORTED.items():
        if config.get(key, fine[0]) not in fine:
            problems.append(f"{what} ({key}={config.get(key)!r})")
    norm = config.get("normalization_type")
    if norm is not None:
        problems.append(f"normalization {norm!r} (cbench converts models without layer norms only)")
    act = config.get("act_fn")
    if not config.get("attn_only") and act not in _ACTIVATIONS:
        problems.append(f"activation {act!r} (native: {', '.join(sorted(_ACTIVATIONS))})")
    if config.get("attention_dir", "causal") not in ("causal", "bidirectional"):
        problems.append(f"attention_dir {config.get('attention_dir')!r}")
    return problems


def _attn_factor(config: Mapping[str, Any]) -> float:
    """What W_Q must be multiplied by so that dividing by sqrt(d_head) gives the 3.x scores."""
    d_head = int(config["d_head"])
    scale = float(config.get("attn_scale") or math.sqrt(d_head)) if config.get("use_attn_scale", True) else 1.0
    if scale <= 0:
        raise ArtifactError(f"attn_scale {scale} is not positive")
    return math.sqrt(d_head) / scale


def bridge_config(config: Mapping[str, Any]) -> dict:
    """The ``TransformerBridgeConfig`` dict of a 3.x ``config.json``. ``default_prepend_bos`` is on:
    every cbench model reads BOS at position 0."""
    if config.get("dtype", "float32") != "float32":
        raise ArtifactError(f"cbench converts float32 models only (dtype {config.get('dtype')!r})")
    problems = unsupported_features(config)
    if problems:
        raise ArtifactError("TransformerLens 4's native model cannot compute this model: " + "; ".join(problems))
    d_model = int(config["d_model"])
    d_vocab_out = config.get("d_vocab_out", -1)
    out = {
        "architecture": NATIVE_ARCHITECTURE,
        "model_name": str(config.get("model_name") or "cbench"),
        "n_layers": int(config["n_layers"]),
        "n_heads": int(config["n_heads"]),
        "d_model": d_model,
        "d_head": int(config["d_head"]),
        "d_mlp": None if config.get("attn_only") else int(config["d_mlp"]),
        "d_vocab": int(config["d_vocab"]),
        "d_vocab_out": int(config["d_vocab"]) if d_vocab_out in (-1, None) else int(d_vocab_out),
        "n_ctx": int(config["n_ctx"]),
        "act_fn": config.get("act_fn"),
        "attn_only": bool(config.get("attn_only", False)),
        "attention_dir": config.get("attention_dir", "causal"),
        "normalization_type": config.get("normalization_type"),
        "positional_embedding_type": "standard",
        "use_attn_scale": True,
        "attn_scale": math.sqrt(int(config["d_head"])),
        "default_prepend_bos": True,
        "tokenizer_prepends_bos": True,  # cbench's tokenizers add BOS (the bridge's own probe needs the word "a")
    }
    return out


def to_native(config: Mapping[str, Any], state_dict: Mapping[str, Any]) -> NativeBridgeModel:
    """Convert a 3.x model (``config.json`` dict and its weights) into the bridge's form: the keys of
    ``TransformerBridge.state_dict()`` after ``boot_native`` (``embed``, ``pos_embed``,
    ``blocks.L.attn.{q,k,v,o}``, ``blocks.L.mlp.{in,out}``, ``unembed`` with its bias), which
    ``bridge.load_state_dict`` takes.

    Raises :class:`~cbench.errors.ArtifactError` for a model the native model cannot compute."""
    import torch

    cfg = dict(config)
    bcfg = bridge_config(cfg)
    n_layers, n_heads, d_head = int(cfg["n_layers"]), int(cfg["n_heads"]), int(cfg["d_head"])
    d_model = int(cfg["d_model"])
    factor = _attn_factor(cfg)

    def sd(key: str) -> torch.Tensor:
        try:
            return state_dict[key].detach().to("cpu")
        except KeyError:
            raise ArtifactError(f"the weights have no {key}") from None

    out: dict[str, torch.Tensor] = {"embed.weight": sd("embed.W_E"), "pos_embed.weight": sd("pos_embed.W_pos")}
    for layer in range(n_layers):
        p = f"blocks.{layer}"
        for name in ("Q", "K", "V"):
            w = sd(f"{p}.attn.W_{name}")  # [H, d_model, d_head] -> [H * d_head, d_model]
            b = sd(f"{p}.attn.b_{name}")  # [H, d_head]
            if name == "Q" and factor != 1.0:
                w, b = w * factor, b * factor
            out[f"{p}.attn.{name.lower()}.weight"] = w.permute(0, 2, 1).reshape(n_heads * d_head, d_model)
            out[f"{p}.attn.{name.lower()}.bias"] = b.reshape(n_heads * d_head)
        out[f"{p}.attn.o.weight"] = sd(f"{p}.attn.W_O").reshape(n_heads * d_head, d_model).T  # [d_model, H * d_head]
        out[f"{p}.attn.o.bias"] = sd(f"{p}.attn.b_O")
        if not cfg.get("attn_only"):
            out[f"{p}.mlp.in.weight"] = sd(f"{p}.mlp.W_in").T  # [d_mlp, d_model]
            out[f"{p}.mlp.in.bias"] = sd(f"{p}.mlp.b_in")
            out[f"{p}.mlp.out.weight"] = sd(f"{p}.mlp.W_out").T  # [d_model, d_mlp]
            out[f"{p}.mlp.out.bias"] = sd(f"{p}.mlp.b_out")
    out["unembed.weight"] = sd("unembed.W_U").T  # [d_vocab_out, d_model]
    out["unembed.bias"] = sd("unembed.b_U")
    return NativeBridgeModel(config=bcfg, state_dict={k: v.contiguous() for k, v in sorted(out.items())})


BRIDGE_FORMAT = "cbench-native-bridge/v1"


def bridge_problem(config: Mapping[str, Any], state_dict: Mapping[str, Any]) -> str | None:
    """Why the model has no TransformerLens 4 native form (None: it has one)."""
    try:
        to_native(config, state_dict)
    except ArtifactError as exc:
        return str(exc)
    return None


def bridge_files(config: Mapping[str, Any], state_dict: Mapping[str, Any]) -> dict[str, bytes]:
    """``{relative path: bytes}`` of ``bridge/config.json`` and ``bridge/model.safetensors``
    (deterministic bytes), or ``{}`` for a model the native form cannot compute
    (:func:`bridge_problem` says why)."""
    from cbench.artifacts.serialization import _safetensors_bytes, dumps_json

    try:
        native = to_native(config, state_dict)
    except ArtifactError:
        return {}
    weights = _safetensors_bytes(native.state_dict, {"format": "pt", "cbench_format": BRIDGE_FORMAT})
    return {BRIDGE_CONFIG_FILE: dumps_json(native.config), BRIDGE_WEIGHTS_FILE: weights}
