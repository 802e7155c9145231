"""The facade: :class:`CircuitRuntime` (one model, its graph and the caches the passes share)
and :func:`as_runtime`. Each method lives in the module named for its concern."""

from __future__ import annotations

import torch

from cbench.errors import GraphError
from cbench.graph.graph import Graph
from cbench.runtime import ablations, clean_pass, incremental, layer_norm, layers, masked_forward, masks
from cbench.runtime import input_gradients as gradients
from cbench.runtime.weights import refresh_weights


def _model_of(model_or_artifact):
    if hasattr(model_or_artifact, "load_model") and not isinstance(model_or_artifact, torch.nn.Module):
        return model_or_artifact.load_model()
    return model_or_artifact


def _check_supported(cfg) -> None:
    """One clear GraphError for a model architecture the runtime does not run."""
    if getattr(cfg, "positional_embedding_type", "standard") not in ("standard",):
        raise GraphError(f"the runtime supports absolute positional embeddings only "
                         f"(this model has {cfg.positional_embedding_type!r})")
    if getattr(cfg, "n_key_value_heads", None) not in (None, cfg.n_heads):
        raise GraphError("the runtime does not support grouped-query attention")
    if getattr(cfg, "gated_mlp", False):
        raise GraphError("the runtime does not support gated MLPs")
    if getattr(cfg, "attn_scores_soft_cap", -1.0) not in (-1.0, None) and cfg.attn_scores_soft_cap > 0:
        raise GraphError("the runtime does not support attention soft-capping")
    if getattr(cfg, "use_normalization_before_and_after", False):
        raise GraphError("the runtime does not support post-normalization")


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


class CircuitRuntime:
    """Edge-masked runs of one model; see :mod:`cbench.runtime` for the conventions and the API."""

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
        _check_supported(cfg)
        self.graph = Graph.from_config(cfg)
        g = self.graph
        self.device = next(model.parameters()).device
        self.dtype = next(model.parameters()).dtype
        self.n_layers, self.n_heads = g.n_layers, g.n_heads
        self.has_mlp = g.has_mlp
        self.parallel = g.parallel_attn_mlp
        self.causal = getattr(cfg, "attention_dir", "causal") == "causal"
        self.d_model = cfg.d_model
        self.per_layer_fwd = self.n_heads + (1 if self.has_mlp else 0)
        self.per_layer_bwd = 3 * self.n_heads + (1 if self.has_mlp else 0)
        self._real = torch.as_tensor(g.real_edge_matrix, device=self.device, dtype=self.dtype)
        self._one = torch.ones((), device=self.device, dtype=self.dtype)
        self._prefix_sources = incremental.source_prefix_ends(g, self.device)
        self._future_cache: dict = {}
        self.live_weights = bool(live_weights)
        self.optimal_vectors = None  # [F, D] once learned (optimal_ablation.use)
        self._model_sha256 = None
        refresh_weights(self)  # the caches of the model's parameters (weights.py)

    @property
    def n_edges(self) -> int:
        return self.graph.n_edges

    @property
    def n_forward(self) -> int:
        return self.graph.n_forward

    @property
    def n_backward(self) -> int:
        return self.graph.n_backward

    # inputs and masks checked and converted (masks.py)
    tokens_tensor = masks.tokens_tensor
    edge_mask_tensor = masks.edge_mask_tensor
    node_mask_tensor = masks.node_mask_tensor
    # unpatched runs (clean_pass.py)
    clean = clean_pass.clean
    node_outputs = clean_pass.node_outputs
    paired_outputs = clean_pass.paired_outputs
    plain_pass = clean_pass.plain_pass
    clean_for_reference = clean_pass.clean_for_reference
    # ablated activations (ablations.py)
    ablated_outputs = ablations.ablated_outputs
    # edge- and node-masked runs (masked_forward.py)
    run = masked_forward.run
    run_masks = masked_forward.run_masks
    edge_mask_gradient = masked_forward.edge_mask_gradient
    # gradients at every destination input (input_gradients.py)
    input_gradients = gradients.input_gradients
    scores_from_input_gradients = gradients.scores_from_input_gradients
    node_gradients = gradients.node_gradients
    neuron_scores_from_input_gradients = gradients.neuron_scores_from_input_gradients
    # one node at a time (incremental.py, layers.py)
    destination_inputs = incremental.destination_inputs
    node_output = incremental.node_output
    unembed_fn = layers.unembed_fn
    # the model's parameters (weights.py)
    refresh_weights = refresh_weights
    # model pieces the discovery methods call directly
    _embed = layers.embed
    _future = layers.future_mask
    _ln_kind = layer_norm.ln_kind


def as_runtime(model_or_runtime) -> CircuitRuntime:
    """A :class:`CircuitRuntime` from a runtime, a HookedTransformer or a model artifact."""
    if isinstance(model_or_runtime, CircuitRuntime):
        return model_or_runtime
    return CircuitRuntime(model_or_runtime)
