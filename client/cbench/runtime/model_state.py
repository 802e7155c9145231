"""The state every runtime pass reads: :class:`ModelState` (one model, its graph, dimensions and
parameter caches), built from a ``HookedTransformer`` or a model artifact on a chosen device.

The pass modules (``clean_pass``, ``masked_forward``, ``input_gradients``, ...) take a
:class:`ModelState` and never the facade that composes them, so imports run one way:
``circuit_runtime`` -> passes -> ``model_state``.
"""

from __future__ import annotations

import numpy as np
import torch

from cbench.errors import GraphError, UnsupportedModelError
from cbench.graph.graph import Graph


def _model_of(model_or_artifact):
    if hasattr(model_or_artifact, "load_model") and not isinstance(model_or_artifact, torch.nn.Module):
        return model_or_artifact.load_model()
    return model_or_artifact


def _on(value) -> bool:
    return value is not None and value is not False and not (isinstance(value, (int, float)) and value <= 0)


# (config field, test of its value, the feature named in the message): what the runtime refuses
_UNSUPPORTED = (
    ("positional_embedding_type", lambda v: v not in ("standard", "rotary", "shortformer"),
     "{v!r} positional embeddings (the runtime runs absolute, shortformer and rotary ones)"),
    ("original_architecture", lambda v: v in ("Olmo2ForCausalLM", "Olmo3ForCausalLM"),
     "post-norm blocks ({v})"),
    ("use_qk_norm", bool, "query/key normalization"),
    ("use_attention_sinks", bool, "attention sinks"),
    ("clip_qkv", _on, "clipping of queries, keys and values"),
    ("use_logn_attn", bool, "log-n attention scaling"),
    ("use_dynamic_ntk_rope", bool, "dynamic NTK rotary scaling"),
    ("use_yarn_rope", bool, "YaRN rotary scaling"),
    ("post_embedding_ln", bool, "a layer norm after the embedding"),
    ("num_experts", _on, "mixture-of-experts MLPs"),
    ("load_in_4bit", bool, "4-bit quantized weights"),
)


def unsupported_feature(cfg) -> str | None:
    """The first architecture feature of ``cfg`` the runtime does not run, named, or None."""
    for field, test, what in _UNSUPPORTED:
        v = getattr(cfg, field, None)
        if v is not None and test(v):
            return what.format(v=v)
    return None


def unsupported_post_norm(model) -> str | None:
    """What of a post-normalized model (``use_normalization_before_and_after``, Gemma-2's
    ``ln1_post``/``ln2_post``) the runtime does not run, named, or None: it runs RMSNorm
    post-norms on attention without an output bias (every Gemma-2), where the norm of the
    summed heads distributes over the heads exactly (see :func:`cbench.runtime.layers.post_heads`)."""
    cfg = model.cfg
    if not getattr(cfg, "use_normalization_before_and_after", False):
        return None
    kinds = {type(getattr(blk, name, None)).__name__ for blk in model.blocks for name in ("ln1_post", "ln2_post")
             if hasattr(blk, name)}
    if not kinds <= {"RMSNorm", "Identity"}:
        return f"post-normalization by {', '.join(sorted(kinds))} (the runtime runs RMSNorm post-norms)"
    if any(bool((blk.attn.b_O != 0).any()) for blk in model.blocks):
        return "post-normalization of an attention output with a bias (b_O)"
    return None


def _check_supported(cfg, model=None) -> None:
    """One clear GraphError naming the architecture feature the runtime does not run."""
    what = unsupported_feature(cfg)
    if what is None and model is not None:
        what = unsupported_post_norm(model)
    if what is not None:
        raise UnsupportedModelError(f"the runtime does not support {what}")


def _cap(value) -> float | None:
    return float(value) if value is not None and value > 0 else None


def select_device(device: str | torch.device | None) -> torch.device | None:
    """The device a runtime runs on: ``device`` when given, else ``CBENCH_DEVICE`` when set
    (``cpu``, ``cuda``, ``cuda:1``; ``auto``: a GPU when one is present), else None (where the
    model's parameters are). One clear GraphError for a device torch does not have."""
    import os

    name = device if device is not None else (os.environ.get("CBENCH_DEVICE", "").strip() or None)
    if name is None:
        return None
    if str(name) == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        dev = torch.device(name)
    except (RuntimeError, TypeError):
        raise GraphError(f"unknown device {name!r} (use cpu, cuda, cuda:N or auto)") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise GraphError(f"device {name!r} asked for, but torch sees no GPU here (use cpu or auto)")
    return dev


def source_prefix_ends(graph: Graph, device) -> torch.Tensor | None:
    """Per destination, the index of its last source when every destination ``k`` reads sources
    0..n_k-1 (a prefix of the forward order, as in the models here), else None."""
    blocks = graph.source_blocks
    if not blocks or any(n == 0 for n, _first, _stop in blocks):
        return None
    ends = np.empty(graph.n_backward, dtype=np.int64)
    for n, first, stop in blocks:
        ends[first:stop] = n - 1
    return torch.as_tensor(ends, device=device)


class ModelState:
    """One model as the runtime's passes see it: the model, its graph and dimensions, its device
    and dtype, and the caches of its parameters (filled by :mod:`cbench.runtime.weights`). Every pass
    module takes this state; :class:`~cbench.runtime.circuit_runtime.CircuitRuntime` adds the passes
    as methods."""

    def __init__(self, model_or_artifact, device: str | torch.device | None = None, live_weights: bool = False):
        """``device``: move the model there first (default: ``CBENCH_DEVICE``, else where its
        parameters are; see :func:`select_device`). ``live_weights=True``: every pass reads the
        model's parameters when it runs (none cached or detached), so gradients of its outputs reach ``model.parameters()`` and an
        optimizer step on the model shows in the next run (training through masked runs).
        Default: the b_O sums are cached at construction and the fused q/k/v projections at
        first use, detached (for a frozen model; :meth:`refresh_weights` re-reads them)."""
        self.artifact = None if isinstance(model_or_artifact, torch.nn.Module) else model_or_artifact
        model = _model_of(model_or_artifact)
        device = select_device(device)
        if device is not None and next(model.parameters()).device != device:
            torch.nn.Module.to(model, device)  # the passes read the model's own parameters
            if hasattr(model.cfg, "device"):
                model.cfg.device = str(device)
        self.model = model
        cfg = model.cfg
        self.cfg = cfg
        _check_supported(cfg, model)
        self.graph = Graph.from_config(cfg)
        g = self.graph
        self.device = next(model.parameters()).device
        self.dtype = next(model.parameters()).dtype
        self.n_layers, self.n_heads = g.n_layers, g.n_heads
        self.has_mlp = g.has_mlp
        self.parallel = g.parallel_attn_mlp
        self.causal = getattr(cfg, "attention_dir", "causal") == "causal"
        self.rotary = getattr(cfg, "positional_embedding_type", "standard") == "rotary"
        # shortformer: the position embedding is added to every head's query and key inputs after
        # ln1, never to the residual stream (the ``input`` node is the token embedding alone)
        self.shortformer = getattr(cfg, "positional_embedding_type", "standard") == "shortformer"
        # Gemma-2's RMSNorm on the summed attention output and on the MLP output
        self.post_norm = (bool(getattr(cfg, "use_normalization_before_and_after", False))
                          and type(getattr(model.blocks[0], "ln1_post", None)).__name__ == "RMSNorm")
        self.attn_soft_cap = _cap(getattr(cfg, "attn_scores_soft_cap", None))
        self.logit_soft_cap = _cap(getattr(cfg, "output_logits_soft_cap", None))
        # per layer, its sliding window (local attention) or None; [] when no layer is local
        self.windows = [getattr(blk.attn, "attn_type", "global") == "local" and cfg.window_size or None
                        for blk in model.blocks]
        if not any(self.windows):
            self.windows = []
        self.d_model = cfg.d_model
        self.per_layer_fwd = self.n_heads + (1 if self.has_mlp else 0)
        self.per_layer_bwd = 3 * self.n_heads + (1 if self.has_mlp else 0)
        self._real = torch.as_tensor(g.real_edge_matrix, device=self.device, dtype=self.dtype)
        self._one = torch.ones((), device=self.device, dtype=self.dtype)
        self._prefix_sources = source_prefix_ends(g, self.device)
        self._future_cache: dict = {}
        self.live_weights = bool(live_weights)
        self.optimal_vectors = None  # [F, D] once learned (optimal_ablation.use)
        self._model_sha256 = None

    @property
    def n_edges(self) -> int:
        return self.graph.n_edges

    @property
    def n_forward(self) -> int:
        return self.graph.n_forward

    @property
    def n_backward(self) -> int:
        return self.graph.n_backward
