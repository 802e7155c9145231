"""The edge-masked forward pass: a model run as a graph of nodes and edges (EAP-IG style).

One :class:`CircuitRuntime` wraps one model (a ``HookedTransformer`` or a model artifact) and runs
it layer by layer from its own weights, keeping every node's output in one stacked tensor
``acts[n_forward, batch, pos, d_model]`` (rows in :attr:`cbench.graph.graph.Graph.forward_nodes`
order: ``input``, then per layer the heads and the MLP). The input of every destination
(each head's q, k and v input, each MLP input, the logits) is one masked sum over its sources::

    input[dst] = sum_src  M[src, dst] * acts[src] + (1 - M[src, dst]) * ablated[src]  + bias[dst]

computed per layer as one einsum over the (forward x backward) matrix of the graph
(:meth:`cbench.graph.graph.Graph.to_matrix`). ``acts`` are the node outputs *of this run* (so a patch
propagates downstream, as in ACDC and EAP-IG); ``ablated`` are the node outputs of the ablation
(resample: an unpatched run on the paired source input; mean: the mean over a reference set,
per position or over positions too; zero: zeros).

Conventions (fixed, documented here and in the card):

* ``input`` = token embedding + positional embedding (``blocks.0.hook_resid_pre``).
* A head's output is its ``hook_result`` (z @ W_O) **without** b_O. The attention output bias
  b_O, like every other bias, is not a node: it is a constant ``bias[dst]`` every destination
  downstream of that layer receives unmasked (the sum of b_O of the layers before it, and of its
  own layer for an MLP). This is the TransformerLens/ACDC/EAP-IG convention: resample and mean
  ablation are unaffected by the choice (b_O cancels), and zero-ablating a head zeroes its
  ``hook_result`` only, as InterpBench's node ablations do.
* An MLP's output is ``hook_mlp_out`` (including b_out).
* Layer norms (``ln1`` per q/k/v input, ``ln2``, ``ln_final``) are applied to each destination's
  own masked input, as ``use_split_qkv_input`` does in TransformerLens.
* Node masks multiply the masks of the node's outgoing edges (a node kept with weight ``n`` writes
  ``n * acts + (1 - n) * ablated`` to every destination), so node and edge masks compose.
* Outputs are the raw model outputs ``[batch, pos, d_vocab_out]`` (numerical tasks: one unit),
  soft-capped when the model caps its logits.
* Today's architectures are cases of the same passes (docs/real-models.md): rotary embeddings
  act on each head's queries and keys (``input`` is then the token embedding alone); with
  grouped-query attention every query head has its own k and v input (the shared key/value
  head's weights, as the EAP-IG library and MIB define the edges); gated MLPs, RMSNorm and
  parallel attention and MLP are the model's own modules; a feature the passes do not run
  (post-norms, query/key norms, ...) is refused in one line (``UnsupportedModelError``).
* Exactness: an unpatched run (no mask, or all-ones masks without gradient) follows
  TransformerLens's own order of operations and gives bit-for-bit the outputs of
  ``HookedTransformer.forward``. A masked run sums each destination's sources in one einsum
  instead of accumulating the residual stream layer by layer, so with a differentiable all-ones
  mask it differs from the model only by float32 rounding of that different summation order
  (relative ~1e-7, e.g. < 1e-5 on logits of size 20); against TransformerLens hook patching of
  the same edges it agrees within 1e-5 (tests/test_runtime.py).

Public API (what discovery, ablation and scoring rely on)::

    rt = CircuitRuntime(model_or_artifact)           # HookedTransformer or ModelArtifact
    rt = CircuitRuntime(model, live_weights=True)    # passes read the parameters live (training)
    rt.refresh_weights()                             # re-read cached parameters after a change
    rt = as_runtime(model_or_artifact_or_runtime)
    rt.graph, rt.n_edges, rt.n_forward, rt.n_backward, rt.cfg, rt.d_model
    rt.clean(tokens) -> Tensor[B, P, V]              # the unpatched model, bit-exact (no grad)
    rt.node_outputs(tokens) -> Tensor[F, B, P, D]    # every node's clean output
    rt.paired_outputs(base, source) -> (out[B, P, V], acts[F, B, P, D], source acts)  # one pass
    rt.ablated_outputs(base, source=None, ablation="resample", reference=None,
                       positional=True) -> Tensor[F, B|1, P|1, D]
    rt.run(base, source=None, edge_mask=None, node_mask=None, ablation="resample",
           reference=None, positional=True, ablated=None, input_probe=False,
           keep_acts=False, input_interpolation=None) -> RunResult(output, acts, probe)
    rt.run_masks(base, edge_masks[M, E], source=None, ablation=..., ablated=None,
                 node_masks=None, start_slot=None, prefix=None) -> Tensor[M, B, P, V]
                                          # many masks on the same inputs, one batch
    rt.edge_mask_gradient(base, metric_fn, source=None, edge_mask=None, ...) -> (Tensor[E], value)
    rt.input_gradients(base, metric_fn, source=None, node_mask=None, ablated=None,
                       input_interpolation=None, sum_steps=None, first_block_acts=False,
                       shared_first=False)
                                          -> (Tensor[K, B, P, D], value[, Tensor[F, B/C, P, D]])
    rt.scores_from_input_gradients(diff[F, B, P, D], grads[K, B, P, D]) -> Tensor[E]
    rt.destination_inputs(acts[F, B, P, D]) -> Tensor[K, B, P, D]   # unmasked inputs incl. biases
    rt.node_output(node, inputs) -> Tensor[..., P, D | V]            # one node (incremental ACDC)
    rt.edge_mask_tensor(mask) / rt.node_mask_tensor(mask)  # validation + conversion
    edge_names_to_mask(graph, names) -> bool[E]     # q/k/v-level or head-level names

``edge_mask``: ``None`` (all ones), a vector over ``graph.edges`` (``[n_edges]``, bool or float
in [0, 1], differentiable), a ``[C, n_edges]`` matrix (C = batch: one mask per example; C a
divisor of batch: row c applies to examples c*batch/C ... (c+1)*batch/C - 1, i.e. a batch of
masks over tiled inputs), or a set/list of edge names (the edges kept). ``node_mask``: ``None``,
``[n_forward]`` or ``[C, n_forward]`` (same row rule) over ``graph.forward_nodes``, a dict
``{node name: weight}`` (others 1), or a set/list of node names kept. Wrong lengths raise
:class:`~cbench.errors.GraphError` in one line. ``metric_fn(outputs) -> scalar tensor``
(e.g. a :class:`cbench.tasks.metrics.Metric`, which is a mean over examples).

Three passes, chosen automatically by ``run``: no mask -> TransformerLens's own order of
operations (bit-exact); node masks only -> the residual-stream pass with each masked node's
output interpolated (the same thing as masking all its outgoing edges); edge masks -> the
(forward x backward) einsum pass. ``ablated`` lets a caller pass precomputed ablated activations
so loops over many masks do not recompute them. ``input_probe=True`` adds a zero tensor
``probe[n_backward, B, P, D]`` (requires grad) to every destination input, so
``result.probe.grad`` is d metric / d input of every destination; :meth:`input_gradients` gives
the same gradients without materialising per-head inputs, the fast path for EAP and EAP-IG.
``run_masks(start_slot=k, prefix=acts)`` starts each pass at backward slot ``k`` from given node
outputs, for mask batches that differ only in inputs of slot ``k`` and later. Tiny models on
shared CPUs run much faster with ``torch.set_num_threads(1)`` (the CLI sets it;
``CBENCH_THREADS`` overrides).

Weights: by default the b_O sums and the fused q/k/v projections are cached (detached) at
first use, so a runtime suits a frozen model; after the model changes, call
``rt.refresh_weights()``. With ``live_weights=True`` every pass reads the model's parameters
when it runs, so ``loss.backward()`` through ``rt.run(...)`` reaches ``model.parameters()``
(ablated activations stay detached, as TransformerLens's ``run_with_cache`` gives them; pass
``ablated=rt.run(source, keep_acts=True).acts`` for gradients through the source run too).

Scores convention used by the discovery methods: metrics are losses (lower is better), and an
edge's score is the loss increase when that edge is ablated (positive: the edge helps). For EAP
that is ``-(d loss / d mask)`` at the all-ones mask.

Modules, one per concern: ``circuit_runtime`` (the facade class), ``masks`` (input and mask
checks and conversion), ``clean_pass`` (unpatched runs), ``ablations`` (ablated activations),
``residual_pass`` (the pass without edge masks), ``masked_forward`` (``run``, ``run_masks``,
``edge_mask_gradient``, the einsum pass), ``input_gradients``, ``layer_norm`` (its VJP),
``incremental`` (one node at a time), ``layers`` (the model's layers as functions),
``attention_ops`` (rotary embeddings, soft-caps, causal and sliding-window masks), ``memory``
(rows per pass within ``CBENCH_MEMORY_MB``), ``weights`` (b_O sums and fused q/k/v, cached or
live) and ``run_result``. ``CircuitRuntime(model, device=...)`` (or ``CBENCH_DEVICE``) moves the
model to that device first.

May import: ``cbench.tasks``, ``cbench.hub`` (the optimal-ablation cache), ``cbench.artifacts``,
``cbench.graph``, ``cbench.errors``. Inside, the pass modules take a
:class:`~cbench.runtime.model_state.ModelState`; only ``circuit_runtime`` composes them.
"""

# Imported on first use: the CLI imports ``cbench.runtime.allocator`` and ``.threads`` before every
# command, and those must not pay for torch (2-3 s) when the command never runs a model.
from cbench.about import moved_attributes as _lazy

__all__ = ["ABLATIONS", "CircuitRuntime", "RunResult", "as_runtime", "edge_names_to_mask"]
__getattr__ = _lazy(__name__, {"ABLATIONS": "cbench.runtime.ablations", "CircuitRuntime": "cbench.runtime.circuit_runtime",
                               "as_runtime": "cbench.runtime.circuit_runtime",
                               "edge_names_to_mask": "cbench.runtime.masks", "RunResult": "cbench.runtime.run_result"})
