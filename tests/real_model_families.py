"""Tiny random-weight HookedTransformers in the exact architecture of today's model families.

Each config keeps its family's shape *kinds* (norm, positional scheme and rotary settings, the
query/key-value head ratio, gated MLP and activation, biases, soft-caps, local attention, parallel
blocks) from TransformerLens 3.9's published configs (``loading_from_pretrained.py``), with few
layers and small widths so the default suite stays fast.
"""

from __future__ import annotations

import torch

from cbench.artifacts.transformer_lens_adapter import build_model

BASE = dict(n_layers=2, n_ctx=16, d_vocab=40, seed=0, dtype="float32", attention_dir="causal")

FAMILIES = {
    # GPT-2: LayerNorm, absolute positions, GELU MLP, 12 heads of 64 (here 4 of 8)
    "gpt2": dict(d_model=32, d_head=8, n_heads=4, d_mlp=128, act_fn="gelu_new", normalization_type="LN"),
    # attention-only with shortformer positions (attn-only-4l, Redwood's 2-layer model: the docstring
    # and induction circuits): the position embedding is added to queries and keys after ln1 only
    "shortformer": dict(d_model=32, d_head=8, n_heads=4, attn_only=True, normalization_type="LN",
                        positional_embedding_type="shortformer"),
    # Pythia / GPT-NeoX: parallel attention and MLP, partial rotary (rotary_pct 0.25), NeoX pairing
    "pythia": dict(d_model=64, d_head=16, n_heads=4, d_mlp=256, act_fn="gelu", normalization_type="LN",
                   positional_embedding_type="rotary", rotary_dim=4, rotary_adjacent_pairs=False,
                   parallel_attn_mlp=True, rotary_base=10000),
    # GPT-J pairing of rotary dimensions (adjacent), partial rotary, parallel blocks
    "gptj": dict(d_model=32, d_head=8, n_heads=4, d_mlp=128, act_fn="gelu_new", normalization_type="LN",
                 positional_embedding_type="rotary", rotary_dim=4, rotary_adjacent_pairs=True,
                 parallel_attn_mlp=True),
    # Qwen-2.5-0.5B: RMSNorm, full rotary (base 1e6), GQA 14:2 (here 7:1), SwiGLU, q/k/v biases
    "qwen2.5": dict(d_model=56, d_head=8, n_heads=7, n_key_value_heads=1, d_mlp=96, act_fn="silu",
                    normalization_type="RMS", positional_embedding_type="rotary", rotary_dim=8,
                    rotary_adjacent_pairs=False, rotary_base=1000000, gated_mlp=True, final_rms=True,
                    original_architecture="Qwen2ForCausalLM"),
    # Llama-3.1-8B: RMSNorm, full rotary with NTK-by-parts scaling, GQA 32:8 (here 4:1), SwiGLU
    "llama3.1": dict(d_model=64, d_head=16, n_heads=4, n_key_value_heads=1, d_mlp=112, act_fn="silu",
                     normalization_type="RMS", positional_embedding_type="rotary", rotary_dim=16,
                     rotary_adjacent_pairs=False, rotary_base=500000.0, use_NTK_by_parts_rope=True,
                     NTK_by_parts_factor=8.0, NTK_by_parts_low_freq_factor=1.0,
                     NTK_by_parts_high_freq_factor=4.0, NTK_original_ctx_len=8192, gated_mlp=True,
                     final_rms=True, original_architecture="LlamaForCausalLM"),
    # Gemma-2-2B: RMSNorm before and after attention and MLP (ln1_post/ln2_post), rotary, GQA 8:4
    # (here 4:2), GeGLU (gelu_pytorch_tanh), attention and logit soft-caps (scaled to the tiny
    # model's scores), local (sliding-window) and global layers alternating; no biases on the
    # attention output (Gemma-2 has none)
    "gemma2": dict(d_model=32, d_head=16, n_heads=4, n_key_value_heads=2, d_mlp=64, act_fn="gelu_pytorch_tanh",
                   normalization_type="RMS", positional_embedding_type="rotary", rotary_dim=16,
                   rotary_adjacent_pairs=False, use_attn_scale=True, use_local_attn=True,
                   attn_types=["local", "global"], window_size=3, attn_scores_soft_cap=1.5,
                   output_logits_soft_cap=2.0, gated_mlp=True, final_rms=True,
                   use_normalization_before_and_after=True, original_architecture="Gemma2ForCausalLM"),
}


def family_config(family: str, **overrides) -> dict:
    cfg = dict(BASE, **FAMILIES[family])
    cfg.update(overrides)
    return cfg


def family_model(family: str, seed: int = 0, bias_scale: float = 0.2, **overrides):
    """A random-weight model of ``family`` (TransformerLens's init, random biases and norm
    weights so every parameter matters), with the edge-level hooks on (GQA ungrouped)."""
    model = build_model(family_config(family, seed=seed, **overrides))
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            leaf = name.split(".")[-1]
            if leaf.startswith("b_") or leaf.startswith("_b_"):
                p.copy_(torch.randn(p.shape, generator=gen) * bias_scale)
                if leaf == "b_O" and model.cfg.use_normalization_before_and_after:
                    p.zero_()  # Gemma-2: no output bias (and the runtime refuses one under a post-norm)
            elif leaf == "w":  # norm weights
                p.copy_(1.0 + 0.3 * torch.randn(p.shape, generator=gen))
    return model


def tokens(n: int, p: int, d_vocab: int = 40, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    t = torch.randint(1, d_vocab, (n, p), generator=gen)
    t[:, 0] = 0
    return t


# the published widths (heads, head and MLP widths, key/value heads, rotary_dim) with one layer and
# a small vocabulary: GPT-2 small, Pythia-160m, Qwen-2.5-0.5B, Llama-3.1-8B, Gemma-2-2B
FULL_WIDTH = {
    "gpt2": dict(d_model=768, d_head=64, n_heads=12, d_mlp=3072),
    "pythia": dict(d_model=768, d_head=64, n_heads=12, d_mlp=3072, rotary_dim=16),
    "qwen2.5": dict(d_model=896, d_head=64, n_heads=14, n_key_value_heads=2, d_mlp=4864, rotary_dim=64),
    "llama3.1": dict(d_model=4096, d_head=128, n_heads=32, n_key_value_heads=8, d_mlp=14336, rotary_dim=128),
    "gemma2": dict(d_model=2304, d_head=256, n_heads=8, n_key_value_heads=4, d_mlp=9216, rotary_dim=256,
                   attn_scores_soft_cap=50.0, output_logits_soft_cap=30.0, window_size=4),
}
