"""Small models for runtime and discovery tests: random ones, and a hand-built one whose circuit
is known by construction."""

from __future__ import annotations

import math

import torch

from cbench.artifacts.transformer_lens_adapter import build_model

torch.set_num_threads(1)


def random_model(n_layers=2, n_heads=3, d_model=24, d_head=8, attn_only=False, causal=True, ln=None,
                 parallel=False, d_vocab=9, d_vocab_out=6, seed=0, bias_scale=0.3, weight_scale=1.0):
    cfg = dict(n_layers=n_layers, n_heads=n_heads, d_model=d_model, d_head=d_head, d_mlp=2 * d_model,
               n_ctx=8, d_vocab=d_vocab, d_vocab_out=d_vocab_out, act_fn="relu", attn_only=attn_only,
               attention_dir="causal" if causal else "bidirectional", normalization_type=ln,
               parallel_attn_mlp=parallel, seed=seed, dtype="float32")
    model = build_model(cfg)
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.split(".")[-1].startswith("b_"):
                p.copy_(torch.randn(p.shape, generator=gen) * bias_scale)
            elif name.split(".")[-1].startswith("W_"):
                p.mul_(weight_scale)
    return model


def random_tokens(n, p, d_vocab=9, seed=0, bos=0):
    gen = torch.Generator().manual_seed(seed)
    t = torch.randint(1, d_vocab, (n, p), generator=gen)
    t[:, 0] = bos
    return t


# ---------------------------------------------------------------------------- hand-built circuit
# vocabulary: 0 BOS, 1 a, 2 b, 3 c; output class t = token t. Residual layout (d_model 17):
# token one-hot [0:4] | position one-hot [4:9] | S1 [9:13] (a0.h0 writes) | S2 [13:17] (a1.h1 writes)
# a0.h0 attends to the previous position (q, k read positions) and copies the token (v) into S1;
# a1.h1 has W_Q = W_K = 0 (uniform causal attention), copies S1 into S2; W_U reads S2 only.
# Every other head and MLP has all-zero weights and biases. Under zero ablation the circuit is
# exactly: input->a0.h0<q>, input->a0.h0<k>, input->a0.h0<v>, a0.h0->a1.h1<v>, a1.h1->logits.
HANDBUILT_CIRCUIT = {
    "input->a0.h0<q>", "input->a0.h0<k>", "input->a0.h0<v>", "a0.h0->a1.h1<v>", "a1.h1->logits",
}


def handbuilt_model(with_mlp: bool = False):
    V, P, D, dh = 4, 5, 17, 5
    cfg = dict(n_layers=2, n_heads=2, d_model=D, d_head=dh, d_mlp=8, n_ctx=P, d_vocab=V, d_vocab_out=V,
               act_fn="relu", attn_only=not with_mlp, attention_dir="causal", normalization_type=None,
               seed=0, dtype="float32")
    model = build_model(cfg)
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        tok, pos, s1, s2 = 0, 4, 9, 13
        for t in range(V):
            model.embed.W_E[t, tok + t] = 1.0
        for p in range(P):
            model.pos_embed.W_pos[p, pos + p] = 1.0
        a0 = model.blocks[0].attn
        big = 30.0 * math.sqrt(dh)
        for p in range(P):
            a0.W_Q[0, pos + p, p] = 1.0
            if p + 1 < P:
                a0.W_K[0, pos + p, p + 1] = big
        for t in range(V):
            a0.W_V[0, tok + t, t] = 1.0
            a0.W_O[0, t, s1 + t] = 1.0
        a1 = model.blocks[1].attn
        for t in range(V):
            a1.W_V[1, s1 + t, t] = 1.0
            a1.W_O[1, t, s2 + t] = 1.0
            model.unembed.W_U[s2 + t, t] = 5.0
    return model
