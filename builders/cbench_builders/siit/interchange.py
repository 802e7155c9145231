"""Interchange interventions on whole components (attention heads, MLPs), batched by masks.

A *component* is a canonical graph node that writes to the residual stream: ``a{L}.h{H}`` (an
attention head, interchanged at its ``hook_z`` slice; equivalent to interchanging its
``hook_result`` since the head's output is linear in z) or ``m{L}`` (an MLP, interchanged at
``hook_mlp_out``). Components are indexed in :func:`components` order (per layer: heads, then
the MLP).

An intervention replaces a component's activation on the base input by its activation on the
source input **per example**: a boolean mask ``[batch, n_components]`` says which components are
interchanged in which example. So one forward pass serves a batch in which every example has its
own set of interchanged components (Algorithm 1's per-pair sampling of a node, appendix H's
Bernoulli(0.5) strictness sampling, all nodes of an evaluation tiled over the batch) without a
Python loop over examples.

Two implementations of the same thing:

* :class:`ComponentForward` -- the fast path used for training and evaluation: the model's
  forward pass written out from its own parameters (so gradients reach them), one fused q/k/v
  matmul per layer, no hook machinery. It supports the architectures SIIT builds and Tracr
  compiles: no normalization, standard positional embeddings, relu/gelu MLPs or attention-only,
  causal or bidirectional attention, sequential attention and MLP. :meth:`ComponentForward.supports`
  says whether a model qualifies.
* :func:`run_interchanged` -- the reference: TransformerLens hooks at the same hook points
  (``blocks.L.attn.hook_z``, ``blocks.L.hook_mlp_out``). Tests assert that both agree, and the
  fast path agrees with ``model(tokens)`` within float tolerance.

Source activations are computed once per batch without gradients (:meth:`ComponentForward.acts`):
training gradients flow through the base run only, as in IIT.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

# the hook reference and the component naming live in the client (cbench.tasks.interchange)
from cbench.tasks.interchange import Site, components, model_components, run_interchanged, site_of, source_activations

__all__ = ["ComponentForward", "SourceActs", "Site", "components", "model_components", "run_interchanged",
           "site_of", "source_activations"]


# ---------------------------------------------------------------------------- the fast path
@dataclass
class SourceActs:
    """Per-layer activations of a source batch: ``z[l]`` [B, P, H, d_head], ``mlp[l]`` [B, P, d_model]."""

    z: list[torch.Tensor]
    mlp: list[torch.Tensor | None]

    def index(self, idx: torch.Tensor) -> "SourceActs":
        """The activations of the examples ``idx`` (e.g. to tile a batch)."""
        return SourceActs([z[idx] for z in self.z], [m[idx] if m is not None else None for m in self.mlp])


class ComponentForward:
    """A HookedTransformer's forward pass with per-example component interchange (see module doc)."""

    def __init__(self, model):
        if not self.supports(model):
            raise ValueError("ComponentForward supports models without normalization, with standard positional "
                             "embeddings, relu/gelu MLPs and sequential attention/MLP only")
        self.model = model
        cfg = model.cfg
        self.n_layers, self.n_heads, self.d_head = cfg.n_layers, cfg.n_heads, cfg.d_head
        self.has_mlp = not cfg.attn_only
        self.causal = cfg.attention_dir == "causal"
        self.scale = float(cfg.attn_scale) if cfg.use_attn_scale else 1.0
        self.act = {"relu": F.relu, "gelu": F.gelu, "gelu_new": lambda x: F.gelu(x, approximate="tanh")}[cfg.act_fn] \
            if self.has_mlp else None
        self.names = model_components(model)
        self.index = {n: i for i, n in enumerate(self.names)}
        self.stride = self.n_heads + (1 if self.has_mlp else 0)

    @staticmethod
    def supports(model) -> bool:
        cfg = model.cfg
        return (cfg.normalization_type is None and cfg.positional_embedding_type == "standard"
                and not cfg.parallel_attn_mlp and not getattr(cfg, "gated_mlp", False)
                and (cfg.attn_only or cfg.act_fn in ("relu", "gelu", "gelu_new"))
                and not getattr(cfg, "use_attention_sinks", False)
                and getattr(cfg, "attn_scores_soft_cap", -1.0) <= 0
                and getattr(cfg, "output_logits_soft_cap", -1.0) <= 0
                and not getattr(cfg, "scale_attn_by_inverse_layer_idx", False)
                and getattr(cfg, "num_experts", None) in (None, 0)
                and getattr(cfg, "n_key_value_heads", None) in (None, cfg.n_heads))

    def mask(self, batch: int, columns: dict[str, torch.Tensor | bool] | None = None) -> torch.Tensor:
        """A ``[batch, n_components]`` bool mask from ``{node: bool or [batch] bool}``."""
        m = torch.zeros(batch, len(self.names), dtype=torch.bool)
        for node, sel in (columns or {}).items():
            m[:, self.index[node]] = sel
        return m

    def forward(self, tokens: torch.Tensor, source: SourceActs | None = None, mask: torch.Tensor | None = None,
                collect: bool = False):
        """Outputs ``[B, P, d_vocab_out]`` on ``tokens``; where ``mask[b, c]`` is set, component ``c``
        of example ``b`` takes its activation from ``source``. With ``collect`` returns
        ``(outputs, SourceActs)`` of this run (the activations after patching)."""
        m = self.model
        B, P = tokens.shape
        H, dh = self.n_heads, self.d_head
        x = m.embed.W_E[tokens] + m.pos_embed.W_pos[:P]
        zs, mlps = [], []
        if self.causal:
            allowed = torch.ones(P, P, dtype=torch.bool).tril()
        for layer, blk in enumerate(m.blocks):
            attn = blk.attn
            d = x.shape[-1]
            w = torch.cat([attn.W_Q, attn.W_K, attn.W_V], dim=0)  # [3H, d, dh]
            w = w.permute(1, 0, 2).reshape(d, 3 * H * dh)
            b = torch.cat([attn.b_Q, attn.b_K, attn.b_V], dim=0).reshape(-1)
            qkv = torch.addmm(b, x.reshape(B * P, d), w).view(B, P, 3, H, dh)
            q = qkv[:, :, 0].transpose(1, 2)  # [B, H, P, dh]
            k = qkv[:, :, 1].transpose(1, 2)
            v = qkv[:, :, 2].transpose(1, 2)
            scores = q @ k.transpose(-1, -2) / self.scale  # [B, H, Pq, Pk]
            if self.causal:
                scores = scores.masked_fill(~allowed, float("-inf"))
            # softmax written out: on CPU torch.softmax over a short last dimension is ~3x slower
            e = (scores - scores.amax(dim=-1, keepdim=True).detach()).exp()
            pattern = e / e.sum(dim=-1, keepdim=True)
            z = (pattern @ v).transpose(1, 2)  # [B, P, H, dh]
            if mask is not None:
                sel = mask[:, layer * self.stride: layer * self.stride + H]
                if source is not None:
                    z = torch.where(sel[:, None, :, None], source.z[layer], z)
            if collect:
                zs.append(z)
            out = z.reshape(B * P, H * dh) @ attn.W_O.reshape(H * dh, d) + attn.b_O
            x = x + out.view(B, P, d)
            if self.has_mlp:
                mlp = blk.mlp
                pre = torch.addmm(mlp.b_in, x.reshape(B * P, d), mlp.W_in)
                mo = torch.addmm(mlp.b_out, self.act(pre), mlp.W_out).view(B, P, d)
                if mask is not None and source is not None:
                    sel = mask[:, layer * self.stride + H]
                    mo = torch.where(sel[:, None, None], source.mlp[layer], mo)
                if collect:
                    mlps.append(mo)
                x = x + mo
            elif collect:
                mlps.append(None)
        logits = x @ m.unembed.W_U + m.unembed.b_U
        if collect:
            return logits, SourceActs(zs, mlps)
        return logits

    __call__ = forward

    def node_outputs(self, tokens: torch.Tensor, acts: SourceActs) -> torch.Tensor:
        """Every graph node's output on ``tokens`` ``[F, B, P, d_model]`` (the ``input`` node, then per
        layer each head's result without ``b_O`` and the MLP's output), as the graph runtime
        (:mod:`cbench.runtime`) orders and computes them, from this run's activations ``acts``:
        what a resample ablation from ``tokens`` substitutes, without a second pass (gradients
        flow through ``acts``)."""
        m = self.model
        P = tokens.shape[1]
        out = [(m.embed.W_E[tokens] + m.pos_embed.W_pos[:P])[None]]
        for layer, blk in enumerate(m.blocks):
            out.append(torch.einsum("bphe,hed->hbpd", acts.z[layer], blk.attn.W_O))
            if acts.mlp[layer] is not None:
                out.append(acts.mlp[layer][None])
        return torch.cat(out, 0)

    def acts(self, tokens: torch.Tensor) -> SourceActs:
        """Activations of every component on ``tokens`` (no gradients): the source cache."""
        with torch.no_grad():
            return self.forward(tokens, collect=True)[1]


