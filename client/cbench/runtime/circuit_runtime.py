"""The facade: :class:`CircuitRuntime` (one model, its graph and the caches the passes share)
and :func:`as_runtime`. Each method lives in the module named for its concern."""

from __future__ import annotations

import torch

from cbench.runtime.model_state import ModelState
from cbench.runtime import ablations, clean_pass, incremental, layer_norm, layers, masked_forward, masks
from cbench.runtime import input_gradients as gradients
from cbench.runtime.weights import refresh_weights


class CircuitRuntime(ModelState):
    """Edge-masked runs of one model; see :mod:`cbench.runtime` for the conventions and the API."""

    def __init__(self, model_or_artifact, device: str | torch.device | None = None, live_weights: bool = False):
        """See :class:`~cbench.runtime.model_state.ModelState`; the parameter caches are filled here."""
        super().__init__(model_or_artifact, device=device, live_weights=live_weights)
        refresh_weights(self)  # the caches of the model's parameters (weights.py)

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
