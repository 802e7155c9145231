"""The edge-masked forward pass: a model run as a graph of nodes and edges (EAP-IG style).

One :class:`CircuitRuntime` wraps one model (a ``HookedTransformer`` or a model artifact) and runs
it layer by layer from its own weights, keeping every node's output in one stacked tensor
``acts[n_forward, batch, pos, d_model]`` (rows in :attr:`cbench.graph.Graph.forward_nodes`
order: ``input``, then per layer the heads and the MLP). The input of every destination
(each head's q, k and v input, each MLP input, the logits) is one masked sum over its sources::

    input[dst] = sum_src  M[src, dst] * acts[src] + (1 - M[src, dst]) * ablated[src]  + bias[dst]

computed per layer as one einsum over the (forward x backward) matrix of the graph
(:meth:`cbench.graph.Graph.to_matrix`). ``acts`` are the node outputs *of this run* (so a patch
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
* Outputs are the raw model outputs ``[batch, pos, d_vocab_out]`` (numerical tasks: one unit).
* Exactness: an unpatched run (no mask, or all-ones masks without gradient) follows
  TransformerLens's own order of operations and gives bit-for-bit the outputs of
  ``HookedTransformer.forward``. A masked run sums each destination's sources in one einsum
  instead of accumulating the residual stream layer by layer, so with a differentiable all-ones
  mask it differs from the model only by float32 rounding of that different summation order
  (relative ~1e-7, e.g. < 1e-5 on logits of size 20); against TransformerLens hook patching of
  the same edges it agrees within 1e-5 (tests/test_runtime.py).

Public API (what discovery, ablation and scoring rely on)::

    rt = CircuitRuntime(model_or_artifact)           # HookedTransformer or ModelArtifact
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
(e.g. a :class:`cbench.metrics.Metric`, which is a mean over examples).

Three passes, chosen automatically: no mask -> TransformerLens's own order of operations
(bit-exact); node masks only -> the residual-stream pass with each masked node's output
interpolated (``n * out + (1 - n) * ablated``, the same thing as masking all its outgoing
edges); edge masks -> the (forward x backward) einsum pass. ``ablated`` lets a caller pass
precomputed ablated activations so loops over many masks do not recompute them.
``input_probe=True`` adds a zero tensor ``probe[n_backward, B, P, D]`` (requires grad) to every
destination input, so ``result.probe.grad`` is d metric / d input of every destination.
:meth:`input_gradients` gives the same gradients without materialising per-head inputs (probes
on the q/k/v projections mapped back through W_Q/W_K/W_V and the layer norm), the fast path for
EAP and EAP-IG. ``run_masks(start_slot=k, prefix=acts)`` starts each pass at backward slot ``k``
from given node outputs, for mask batches that differ only in inputs of slot ``k`` and later. Tiny models on shared CPUs run much faster with ``torch.set_num_threads(1)`` (the CLI
sets it; ``CBENCH_THREADS`` overrides).

Scores convention used by the discovery methods: metrics are losses (lower is better), and an
edge's score is the loss increase when that edge is ablated (positive: the edge helps). For EAP
that is ``-(d loss / d mask)`` at the all-ones mask.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

import numpy as np
import torch

from cbench.errors import GraphError, UsageError
from cbench.graph import Graph

ABLATIONS = ("resample", "mean", "zero")


@dataclass
class RunResult:
    """What :meth:`CircuitRuntime.run` returns.

    ``output``: the model outputs ``[batch, pos, d_vocab_out]``; ``acts``: every node's output
    in this run ``[n_forward, batch, pos, d_model]`` (only with ``keep_acts=True``);
    ``probe``: the zero tensor added to destination inputs (only with ``input_probe=True``),
    whose ``.grad`` after backward is the gradient w.r.t. each destination input
    ``[n_backward, batch, pos, d_model]``.
    """

    output: torch.Tensor
    acts: torch.Tensor | None = None
    probe: torch.Tensor | None = None


def _model_of(model_or_artifact):
    if hasattr(model_or_artifact, "load_model") and not isinstance(model_or_artifact, torch.nn.Module):
        return model_or_artifact.load_model()
    return model_or_artifact


class CircuitRuntime:
    """Edge-masked runs of one model; see the module docstring for the API."""

    def __init__(self, model_or_artifact, device: str | torch.device | None = None):
        self.artifact = None if isinstance(model_or_artifact, torch.nn.Module) else model_or_artifact
        model = _model_of(model_or_artifact)
        self.model = model
        cfg = model.cfg
        self.cfg = cfg
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
        self.graph = Graph.from_config(cfg)
        g = self.graph
        self.device = torch.device(device) if device is not None else next(model.parameters()).device
        self.dtype = next(model.parameters()).dtype
        self.n_layers, self.n_heads = g.n_layers, g.n_heads
        self.has_mlp = g.has_mlp
        self.parallel = g.parallel_attn_mlp
        self.causal = getattr(cfg, "attention_dir", "causal") == "causal"
        self.d_model = cfg.d_model
        self.per_layer_fwd = self.n_heads + (1 if self.has_mlp else 0)
        self.per_layer_bwd = 3 * self.n_heads + (1 if self.has_mlp else 0)
        self._edge_f = torch.as_tensor(g.edge_forward, device=self.device)
        self._edge_b = torch.as_tensor(g.edge_backward, device=self.device)
        self._real = torch.as_tensor(g.real_edge_matrix, device=self.device, dtype=self.dtype)
        self._one = torch.ones((), device=self.device, dtype=self.dtype)
        # constant bias each destination receives: the b_O of every attention layer before it
        with torch.no_grad():
            b_o = [blk.attn.b_O.detach().to(self.device) for blk in model.blocks]
            zero = torch.zeros(self.d_model, device=self.device, dtype=self.dtype)
            self._bias_attn = []  # per layer: sum of b_O of layers < l
            self._bias_mlp = []   # per layer: sum of b_O of layers <= l (parallel: < l)
            acc = zero.clone()
            for layer in range(self.n_layers):
                self._bias_attn.append(acc.clone())
                self._bias_mlp.append(acc.clone() if self.parallel else acc + b_o[layer])
                acc = acc + b_o[layer]
            self._bias_logits = acc

    # ------------------------------------------------------------------ sizes
    @property
    def n_edges(self) -> int:
        return self.graph.n_edges

    @property
    def n_forward(self) -> int:
        return self.graph.n_forward

    @property
    def n_backward(self) -> int:
        return self.graph.n_backward

    # ------------------------------------------------------------------ input checks
    def tokens_tensor(self, tokens) -> torch.Tensor:
        t = torch.as_tensor(tokens, device=self.device)
        if t.dim() == 1:
            t = t[None]
        if t.dim() != 2 or t.dtype not in (torch.int64, torch.int32, torch.int16, torch.uint8):
            raise UsageError(f"tokens must be integer ids of shape [batch, pos] (got {tuple(t.shape)}, {t.dtype})")
        if t.shape[1] > self.cfg.n_ctx:
            raise UsageError(f"inputs have {t.shape[1]} positions but the model takes at most {self.cfg.n_ctx}")
        if t.numel() and (int(t.min()) < 0 or int(t.max()) >= self.cfg.d_vocab):
            raise UsageError(f"token ids must be in [0, {self.cfg.d_vocab}) for this model")
        return t.long()

    def edge_mask_tensor(self, mask, batch: int | None = None) -> torch.Tensor | None:
        """A float tensor ``[n_edges]`` or ``[batch, n_edges]`` from any accepted edge-mask form."""
        if mask is None:
            return None
        if isinstance(mask, (set, frozenset)) or (isinstance(mask, (list, tuple)) and mask and isinstance(next(iter(mask)), str)):
            mask = self.graph.mask(mask)
        if isinstance(mask, (list, tuple)) and not mask:
            raise GraphError(f"an edge mask for this model has {self.n_edges} entries, got 0")
        t = mask if isinstance(mask, torch.Tensor) else torch.as_tensor(np.asarray(mask))
        shape = tuple(t.shape)
        if t.dim() not in (1, 2) or shape[-1] != self.n_edges:
            raise GraphError(f"an edge mask for this model has {self.n_edges} entries, got shape {shape}")
        if t.dim() == 2 and batch is not None and (shape[0] == 0 or batch % shape[0]):
            raise GraphError(f"a per-example edge mask needs {batch} rows (one per input) or a divisor "
                             f"of {batch} (one per group of inputs), got {shape[0]}")
        t = t.to(device=self.device, dtype=self.dtype) if (t.dtype != self.dtype or t.device != self.device) else t
        return t

    def node_mask_tensor(self, mask, batch: int | None = None) -> torch.Tensor | None:
        """A float tensor ``[n_forward]`` or ``[batch, n_forward]`` over ``graph.forward_nodes``."""
        if mask is None:
            return None
        g = self.graph
        if isinstance(mask, Mapping):
            t = torch.ones(self.n_forward, dtype=self.dtype, device=self.device)
            for name, value in mask.items():
                t[g.forward_index(g.node(name).name)] = float(value)
            return t
        if isinstance(mask, (set, frozenset)) or (isinstance(mask, (list, tuple)) and mask and isinstance(next(iter(mask)), str)):
            keep = {g.node(n).name for n in mask}
            return torch.tensor([1.0 if n in keep else 0.0 for n in g.forward_nodes], dtype=self.dtype, device=self.device)
        t = mask if isinstance(mask, torch.Tensor) else torch.as_tensor(np.asarray(mask))
        shape = tuple(t.shape)
        if t.dim() not in (1, 2) or shape[-1] != self.n_forward:
            raise GraphError(f"a node mask for this model has {self.n_forward} entries "
                             f"(one per node in {', '.join(g.forward_nodes[:4])}, ...), got shape {shape}")
        if t.dim() == 2 and batch is not None and (shape[0] == 0 or batch % shape[0]):
            raise GraphError(f"a per-example node mask needs {batch} rows (one per input) or a divisor "
                             f"of {batch} (one per group of inputs), got {shape[0]}")
        return t.to(device=self.device, dtype=self.dtype)

    # ------------------------------------------------------------------ model pieces
    def _embed(self, tokens: torch.Tensor) -> torch.Tensor:
        m = self.model
        return m.embed(tokens) + m.pos_embed(tokens)

    def _attention(self, layer: int, x: torch.Tensor, tl_order: bool = False,
                   heads: torch.Tensor | None = None) -> torch.Tensor:
        """Heads of ``layer`` on per-head inputs ``x[B, P, 3H, D]`` (q inputs, k inputs, v inputs,
        already summed, before ln1); returns per-head results ``[H, B, P, D]`` without b_O
        (``tl_order``: ``[B, P, H, D]`` computed exactly as TransformerLens does). ``heads``:
        only these head indices (x then holds their q, k, v inputs)."""
        blk = self.model.blocks[layer]
        attn = blk.attn
        W_Q, W_K, W_V, W_O = attn.W_Q, attn.W_K, attn.W_V, attn.W_O
        b_Q, b_K, b_V = attn.b_Q, attn.b_K, attn.b_V
        if heads is not None:
            W_Q, W_K, W_V, W_O = W_Q[heads], W_K[heads], W_V[heads], W_O[heads]
            b_Q, b_K, b_V = b_Q[heads], b_K[heads], b_V[heads]
        H = W_Q.shape[0]
        x = blk.ln1(x)
        q_in, k_in, v_in = x[:, :, :H], x[:, :, H:2 * H], x[:, :, 2 * H:3 * H]
        q = torch.einsum("bphd,hde->bphe", q_in, W_Q) + b_Q
        k = torch.einsum("bphd,hde->bphe", k_in, W_K) + b_K
        v = torch.einsum("bphd,hde->bphe", v_in, W_V) + b_V
        scores = q.permute(0, 2, 1, 3) @ k.permute(0, 2, 3, 1) / attn.attn_scale  # [B, H, Q, K]
        if self.causal:
            P = scores.shape[-1]
            keep = torch.ones(P, P, dtype=torch.bool, device=scores.device).tril()
            scores = torch.where(keep, scores, attn.IGNORE.to(scores.device))
        pattern = torch.softmax(scores, dim=-1)
        pattern = torch.where(torch.isnan(pattern), torch.zeros_like(pattern), pattern)
        z = pattern @ v.permute(0, 2, 1, 3)  # [B, H, P, d_head]
        if tl_order:  # TransformerLens's exact arithmetic for hook_result: [B, P, H, D]
            z = z.permute(0, 2, 1, 3)
            return (z[..., None] * W_O[None, None]).sum(-2)
        return torch.einsum("bhpe,hed->hbpd", z, W_O)

    def _mlp(self, layer: int, x: torch.Tensor) -> torch.Tensor:
        blk = self.model.blocks[layer]
        return blk.mlp(blk.ln2(x))

    def _unembed(self, x: torch.Tensor) -> torch.Tensor:
        m = self.model
        ln = getattr(m, "ln_final", None)
        if ln is not None:
            x = ln(x)
        return m.unembed(x)

    # ------------------------------------------------------------------ one node at a time
    def unembed_fn(self) -> Callable[[torch.Tensor], torch.Tensor]:
        """``logits``' output from the final residual, as :meth:`_unembed` computes it, with the
        module calls resolved once (for callers that run it many times)."""
        m = self.model
        ln = getattr(m, "ln_final", None)
        if ln is not None and not isinstance(ln, torch.nn.Identity):
            return self._unembed
        if type(m.unembed).__name__ == "Unembed" and type(m.unembed).forward.__module__.startswith("transformer_lens"):
            W, b = m.unembed.W_U.T.contiguous(), m.unembed.b_U
            return lambda x: torch.nn.functional.linear(x, W, b)
        return self._unembed

    def destination_inputs(self, acts: torch.Tensor) -> torch.Tensor:
        """The input of every destination ``[n_backward, B, P, D]`` when every edge is kept, from
        node outputs ``acts [n_forward, B, P, D]``: the sum of its sources plus its constant bias."""
        bias = self.__dict__.get("_slot_bias_stack")
        if bias is None:
            with torch.inference_mode(False):
                bias = self._slot_bias_stack = torch.stack([self._slot_bias(k) for k in range(self.n_backward)])
        F, K = acts.shape[0], self.n_backward
        if "_prefix_sources" not in self.__dict__:
            # destination k reads sources 0..n_k-1 (a prefix of the forward order) in the models here
            real = np.asarray(self.graph.real_edge_matrix, dtype=bool)
            counts = real.sum(0)
            prefix = all(real[:c, k].all() for k, c in enumerate(counts)) and bool((counts > 0).all())
            self._prefix_sources = torch.as_tensor(counts - 1, device=self.device) if prefix else None
        bias = bias.view((K,) + (1,) * (acts.dim() - 2) + (-1,))
        last = self._prefix_sources
        if last is not None:  # running sums, then each destination's prefix
            run = torch.empty_like(acts)
            run[0] = acts[0]
            for f in range(1, F):
                torch.add(run[f - 1], acts[f], out=run[f])
            return run.index_select(0, last).add_(bias)
        out = torch.mm(self._real.t(), acts.reshape(F, -1)).view((K,) + tuple(acts.shape[1:]))
        return out.add_(bias)

    def _slot_bias(self, slot: int) -> torch.Tensor:
        layer, rest = divmod(slot, self.per_layer_bwd)
        if layer == self.n_layers:
            return self._bias_logits
        return self._bias_attn[layer] if rest < 3 * self.n_heads else self._bias_mlp[layer]

    def node_output(self, node: str, x) -> torch.Tensor:
        """The output of one node from its own (already summed) inputs, for incremental passes:
        a head takes ``x = (q_in, k_in, v_in)``, each ``[..., P, D]`` with leading dimensions that
        broadcast against each other (an input shared by every row is projected once), and gives
        ``[..., P, D]``; an MLP takes ``[..., P, D]``; ``logits`` takes the final residual
        ``[..., P, D]`` and gives the model outputs ``[..., P, d_vocab_out]``."""
        n = self.graph.node(node)
        if n.kind == "head":
            blk = self.model.blocks[n.layer]
            attn, h = blk.attn, n.head
            q_in, k_in, v_in = x
            q = blk.ln1(q_in) @ attn.W_Q[h] + attn.b_Q[h]
            k = blk.ln1(k_in) @ attn.W_K[h] + attn.b_K[h]
            v = blk.ln1(v_in) @ attn.W_V[h] + attn.b_V[h]
            scores = q @ k.transpose(-1, -2) / attn.attn_scale
            P = scores.shape[-1]
            if self.causal:
                scores = scores.masked_fill(self._future(P, scores.device), float(attn.IGNORE))
            # every row keeps at least its own position, so no row is all-masked (no NaN to clear)
            if P < 8:  # the fused kernel is slow on very short rows; same values to float rounding
                e = (scores - scores.amax(-1, keepdim=True)).exp_()
                pattern = e / e.sum(-1, keepdim=True)
            else:
                pattern = torch.softmax(scores, dim=-1)
            return (pattern @ v) @ attn.W_O[h]
        if n.kind == "mlp":
            mlp = self.model.blocks[n.layer].mlp
            if type(mlp).__name__ == "MLP" and not self.cfg.is_layer_norm_activation():
                # TransformerLens's MLP without its hook points (the same products)
                xin = self.model.blocks[n.layer].ln2(x)
                shape = xin.shape
                pre = torch.addmm(mlp.b_in, xin.reshape(-1, shape[-1]), mlp.W_in)
                out = torch.addmm(mlp.b_out, mlp.act_fn(pre), mlp.W_out)
                return out.view(*shape[:-1], out.shape[-1])
            return self._mlp(n.layer, x)
        if n.kind == "logits":
            return self._unembed(x)
        raise GraphError(f"node {node!r} has no inputs")

    def _future(self, P: int, device) -> torch.Tensor:
        """``[P, P]`` bool, True above the diagonal (the positions a causal head cannot see)."""
        cache = self.__dict__.setdefault("_future_cache", {})
        key = (P, str(device))
        if key not in cache:
            with torch.inference_mode(False):  # usable by autograd passes later too
                cache[key] = torch.ones(P, P, dtype=torch.bool, device=device).triu(1)
        return cache[key]

    # ------------------------------------------------------------------ clean runs
    @torch.no_grad()
    def node_outputs(self, tokens) -> torch.Tensor:
        """Every forward node's output on an unpatched run: ``[n_forward, B, P, D]``."""
        return self._plain_pass(self.tokens_tensor(tokens)).acts

    @torch.no_grad()
    def _plain_pass(self, tokens: torch.Tensor) -> RunResult:
        """The unpatched pass with every node's output (not bit-exact): the residual stream, with
        each layer's q/k/v projections fused in one matrix product (per-head inputs are all the
        residual stream here, so they are not materialised)."""
        B, P = tokens.shape
        H, D = self.n_heads, self.d_model
        resid = self._embed(tokens)
        chunks = [resid[None]]
        future = self._future(P, resid.device) if self.causal else None
        for layer in range(self.n_layers):
            blk = self.model.blocks[layer]
            attn = blk.attn
            W, b, _rows = self._qkv_weights(layer)
            d_head = W.shape[1] // (3 * H)
            qkv = torch.addmm(b, blk.ln1(resid).reshape(B * P, D), W).view(B, P, 3, H, d_head)
            q, k, v = (t.transpose(1, 2) for t in qkv.unbind(2))  # [B, H, P, dh]
            scores = q @ k.transpose(-1, -2) / attn.attn_scale
            if future is not None:
                scores = scores.masked_fill(future, float(attn.IGNORE))
            pattern = torch.softmax(scores, dim=-1)
            pattern = torch.where(torch.isnan(pattern), torch.zeros_like(pattern), pattern)
            heads = torch.einsum("bhpe,hed->hbpd", pattern @ v, attn.W_O)  # [H, B, P, D]
            chunks.append(heads)
            attn_out = heads.sum(0) + attn.b_O
            if self.has_mlp:
                mlp_out = self._mlp(layer, resid if self.parallel else resid + attn_out)
                chunks.append(mlp_out[None])
                resid = resid + attn_out + mlp_out
            else:
                resid = resid + attn_out
        return RunResult(self._unembed(resid), torch.cat(chunks, 0))

    @torch.no_grad()
    def paired_outputs(self, base, source) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One unpatched pass over ``base`` and ``source`` rows together: ``(outputs on base
        [B, P, V], node outputs on base [F, B, P, D], node outputs on source [F, B, P, D])``.
        Both in the same (not bit-exact, see :meth:`clean`) arithmetic."""
        b, s = self.tokens_tensor(base), self.tokens_tensor(source)
        if s.shape != b.shape:
            raise UsageError(f"source inputs have shape {tuple(s.shape)}, base inputs {tuple(b.shape)}")
        B = b.shape[0]
        res = self._plain_pass(torch.cat([b, s]))
        return res.output[:B], res.acts[:, :B], res.acts[:, B:]

    @torch.no_grad()
    def clean(self, tokens) -> torch.Tensor:
        """The unpatched model's outputs ``[B, P, d_vocab_out]`` (same numbers as the model)."""
        return self._forward(self.tokens_tensor(tokens), None, None).output

    def ablated_outputs(self, base, source=None, ablation: str = "resample", reference=None,
                        positional: bool = True) -> torch.Tensor:
        """The ablated value of every node's output, broadcastable to ``[F, B, P, D]``.

        ``resample``: node outputs on ``source`` (paired with ``base`` row by row);
        ``mean``: mean node outputs over ``reference`` inputs (``positional=True``: per position,
        needs the same length as ``base``; else also over positions); ``zero``: zeros.
        """
        base_t = self.tokens_tensor(base)
        B, P = base_t.shape
        if ablation == "resample":
            if source is None:
                raise UsageError("resample ablation needs source inputs paired with the base inputs")
            src = self.tokens_tensor(source)
            if src.shape != base_t.shape:
                raise UsageError(f"source inputs have shape {tuple(src.shape)}, base inputs {tuple(base_t.shape)}")
            return self.node_outputs(src)
        if ablation == "mean":
            ref = self.tokens_tensor(reference if reference is not None else (source if source is not None else base_t))
            acts = self.node_outputs(ref)
            if positional:
                if ref.shape[1] < P:
                    raise UsageError(f"positional mean ablation needs reference inputs of length >= {P}")
                return acts[:, :, :P].mean(dim=1, keepdim=True)
            return acts.mean(dim=(1, 2), keepdim=True)
        if ablation == "zero":
            return torch.zeros(self.n_forward, 1, 1, self.d_model, device=self.device, dtype=self.dtype)
        raise UsageError(f"unknown ablation {ablation!r}; choose one of: {', '.join(ABLATIONS)}")

    # ------------------------------------------------------------------ the masked pass
    def _matrix(self, edge_mask: torch.Tensor | None, node_mask: torch.Tensor | None):
        """Effective (F x K) mask matrix (or [B, F, K]); None when everything is kept."""
        if edge_mask is None and node_mask is None:
            return None
        if edge_mask is None:
            M = self._real.clone()
        else:
            M = self.graph.to_matrix(edge_mask)
        if node_mask is not None:
            if node_mask.dim() == 1:
                M = M * node_mask[:, None]
            else:
                if M.dim() == 2:
                    M = M[None]
                M = M * node_mask[:, :, None]
        return M

    def _interpolate_input(self, nm: torch.Tensor | None, input_interpolation) -> torch.Tensor:
        """The node mask ``nm`` (None = all ones) with the ``input`` node's entry scaled by
        ``input_interpolation`` (alpha, scalar or ``[B]``): ``input`` then reads
        ``ablated + alpha * (clean - ablated)`` (EAP-IG-inputs); one row per alpha."""
        alpha = torch.as_tensor(input_interpolation, dtype=self.dtype, device=self.device).reshape(-1)
        rows = max(alpha.shape[0], 1 if nm is None or nm.dim() == 1 else nm.shape[0])
        base_nm = torch.ones(self.n_forward, dtype=self.dtype, device=self.device) if nm is None else nm
        if base_nm.dim() == 1:
            base_nm = base_nm[None].expand(rows, -1)
        if base_nm.shape[0] != rows:
            base_nm = base_nm.repeat_interleave(rows // base_nm.shape[0], dim=0)
        return torch.cat([base_nm[:, :1] * alpha.expand(rows)[:, None], base_nm[:, 1:]], 1)

    def run(self, base, source=None, edge_mask=None, node_mask=None, ablation: str = "resample",
            reference=None, positional: bool = True, ablated: torch.Tensor | None = None,
            input_probe: bool = False, keep_acts: bool = False,
            input_interpolation: float | torch.Tensor | None = None) -> RunResult:
        """Outputs with each edge's contribution taken from this run where the mask is 1 and from
        the ablation where it is 0 (see the module docstring). Gradients flow to float masks.

        ``input_interpolation`` (alpha, scalar or ``[B]``): replace the ``input`` node's output
        by ``ablated + alpha * (clean - ablated)`` before anything reads it (EAP-IG-inputs).
        """
        tokens = self.tokens_tensor(base)
        B = tokens.shape[0]
        em = self.edge_mask_tensor(edge_mask, B)
        nm = self.node_mask_tensor(node_mask, B)
        # an all-ones mask without gradient is no patch: take the exact unpatched path
        if em is not None and not em.requires_grad and bool((em == 1).all()):
            em = None
        if nm is not None and not nm.requires_grad and bool((nm == 1).all()):
            nm = None
        if input_interpolation is not None:  # = a node mask on ``input``
            nm = self._interpolate_input(nm, input_interpolation)
        if em is not None or nm is not None:
            if ablated is None:
                ablated = self.ablated_outputs(tokens, source, ablation, reference, positional)
            ablated = ablated.to(self.dtype)
        else:
            ablated = None
        if em is None:  # node masks only: the residual-stream pass
            return self._forward_resid(tokens, nm, ablated, input_probe=input_probe, keep_acts=keep_acts)
        M = self._matrix(em, nm)
        return self._forward(tokens, M, ablated, input_probe=input_probe, keep_acts=keep_acts)

    def _abl_view(self, ablated: torch.Tensor, f0: int, f1: int, C: int, n: int, P: int) -> torch.Tensor:
        """Ablated outputs of forward nodes f0..f1-1, broadcastable to ``[C, n, P, k, D]``."""
        a = ablated[f0:f1]  # [k, B|n|1, P|1, D]
        if a.shape[1] == C * n and C > 1:
            a = a.reshape(f1 - f0, C, n, a.shape[2], a.shape[3]).permute(1, 2, 3, 0, 4)
        else:
            a = a.permute(1, 2, 0, 3)[None]  # [1, n|1, P|1, k, D]
        return a

    def _forward_exact(self, tokens, keep_acts=False) -> RunResult:
        return self._forward_resid(tokens, None, None, keep_acts=keep_acts)

    def _forward_resid(self, tokens, node_mask=None, ablated=None, input_probe=False, keep_acts=False,
                       exact: bool = True) -> RunResult:
        """The pass without edge masks, in TransformerLens's own order of operations: the
        residual stream is summed layer by layer (bit-for-bit ``HookedTransformer.forward``
        when nothing is masked). ``node_mask`` ([F] or [C, F], row c for examples c*B/C...):
        each node's output becomes ``n * out + (1 - n) * ablated`` before anything reads it, which
        is what a node mask means on the edge formulation too. ``input_probe``: a zero tensor added
        to every destination input, whose gradient is d output / d input (EAP)."""
        B, P = tokens.shape
        H, D = self.n_heads, self.d_model
        nm = node_mask
        if nm is not None and nm.dim() == 1:
            nm = nm[None]
        C = 1 if nm is None else nm.shape[0]
        n = B // C
        probe = None
        if input_probe:
            probe = torch.zeros(self.n_backward, B, P, D, dtype=self.dtype, device=self.device, requires_grad=True)

        def interp(x, f0, f1):
            """x: [B, P, k, D] outputs of nodes f0..f1-1 -> masked outputs."""
            if nm is None:
                return x
            alpha = nm[:, f0:f1]  # [C, k]
            if bool((alpha == 1).all()) and not alpha.requires_grad:
                return x
            a = self._abl_view(ablated, f0, f1, C, n, P)
            xv = x.reshape(C, n, P, f1 - f0, D)
            al = alpha[:, None, None, :, None]
            return (a + al * (xv - a)).reshape(B, P, f1 - f0, D)

        def probe_at(col0, col1):
            return probe[col0:col1].permute(1, 2, 0, 3)  # [B, P, k, D]

        emb = self._embed(tokens)
        resid = interp(emb[:, :, None], 0, 1)[:, :, 0]
        chunks = [resid[None]] if keep_acts else None
        f = 1
        for layer in range(self.n_layers):
            blk = self.model.blocks[layer]
            col = layer * self.per_layer_bwd
            x = resid[:, :, None, :].expand(-1, -1, 3 * H, -1)
            if probe is not None:
                x = x + probe_at(col, col + 3 * H)
            if exact:
                heads = self._attention(layer, x, tl_order=True)  # [B, P, H, D]
            else:
                heads = self._attention(layer, x).permute(1, 2, 0, 3)
            heads = interp(heads, f, f + H)
            f += H
            attn_out = heads.sum(2) + blk.attn.b_O
            if keep_acts:
                chunks.append(heads.permute(2, 0, 1, 3))
            if self.has_mlp:
                mlp_in = resid if self.parallel else resid + attn_out
                if probe is not None:
                    mlp_in = mlp_in + probe_at(col + 3 * H, col + 3 * H + 1)[:, :, 0]
                mlp_out = interp(self._mlp(layer, mlp_in.clone())[:, :, None], f, f + 1)[:, :, 0]
                f += 1
                resid = resid + attn_out + mlp_out if self.parallel else resid + attn_out + mlp_out
                if keep_acts:
                    chunks.append(mlp_out[None])
            else:
                resid = resid + attn_out
        if probe is not None:
            resid = resid + probe_at(self.n_backward - 1, self.n_backward)[:, :, 0]
        out = self._unembed(resid)
        return RunResult(out, torch.cat(chunks, 0) if keep_acts else None, probe)

    def _start_of_slot(self, slot: int) -> tuple[int, str, int]:
        """(layer, part, n_prefix) where a pass that only changes inputs of backward ``slot`` and
        later must start: part is ``attn``, ``mlp`` or ``logits``; n_prefix nodes come before."""
        node, _qkv = self.graph.backward_slots[slot]
        n = self.graph.node(node)
        if n.kind == "logits":
            return self.n_layers, "logits", self.n_forward
        base = 1 + n.layer * self.per_layer_fwd
        if n.kind == "head":
            return n.layer, "attn", base
        return n.layer, "mlp", base if self.parallel else base + self.n_heads

    def _forward(self, tokens, M, ablated, input_probe=False, keep_acts=False, input_interpolation=None,
                 start_slot: int | None = None, prefix: torch.Tensor | None = None) -> RunResult:
        """The masked pass. ``M``: [F, K] or [C, F, K] (row c for examples c*B/C ... ).
        ``ablated``: [F, B|B/C|1, P|1, D]. With ``start_slot``/``prefix`` ([n_prefix, B/C, P, D],
        the outputs of the nodes before that slot, shared by all C groups) the pass starts there."""
        if M is None and not input_probe and input_interpolation is None and start_slot is None:
            return self._forward_exact(tokens, keep_acts)
        B, P = tokens.shape
        L, H = self.n_layers, self.n_heads
        D = self.d_model
        F = self.n_forward
        C = M.shape[0] if (M is not None and M.dim() == 3) else 1
        n = B // C
        grouped = M is not None and M.dim() == 3
        abl = None
        if ablated is not None:
            if ablated.shape[1] == B and grouped and C > 1:
                abl = ablated.expand(-1, -1, P, -1).reshape(F, C, n, P, D)
            else:
                abl = ablated.expand(-1, n if grouped else B, P, -1)
        W = None if M is None else (1.0 - M) * self._real

        if start_slot is None:
            layer0, part0, n_prefix = 0, "attn", 1
            emb = self._embed(tokens)
            if input_interpolation is not None:
                alpha = torch.as_tensor(input_interpolation, dtype=self.dtype, device=self.device)
                if alpha.dim() == 1:
                    alpha = alpha[:, None, None]
                a0 = ablated[0].expand(B, P, D) if ablated.shape[1] in (1, B) else ablated[0].repeat(C, 1, 1)
                emb = a0 + alpha * (emb - a0)
            shared = None
            chunks = [emb[None]]
        else:
            layer0, part0, n_prefix = self._start_of_slot(start_slot)
            shared = prefix[:n_prefix]  # [n_prefix, n, P, D], the same for every group
            chunks = []
        probe = None
        if input_probe:
            probe = torch.zeros(self.n_backward, B, P, D, dtype=self.dtype, device=self.device, requires_grad=True)

        def mix(Mpart, acts, per_group: bool):
            """sum_f Mpart[.., f, k] * acts[f] -> [B, P, k, D]."""
            k = Mpart.shape[-1]
            if Mpart.dim() == 2:
                if acts.shape[1] != B:  # shared prefix without groups
                    acts = acts.expand(-1, B, -1, -1)
                return torch.einsum("fk,fbpd->bpkd", Mpart, acts)
            if per_group:
                a = acts.reshape(acts.shape[0], C, n, P, D)
                return torch.einsum("cfk,fcnpd->cnpkd", Mpart, a).reshape(B, P, k, D)
            return torch.einsum("cfk,fnpd->cnpkd", Mpart, acts).reshape(B, P, k, D)

        # Batches of masks that differ from their first row in few places (ACDC candidates,
        # activation patching): the shared part of every input is computed once per example
        # and only the differing columns per mask row.
        lowrank = grouped and C > 1 and abl is not None and abl.dim() == 4 and probe is None
        if lowrank:
            M0 = M[0]
            DM = M - M0
            W0 = (1.0 - M0) * self._real
            diff_cols = (DM != 0).any(0).any(0)  # [K]

        def ncols(cols) -> int:
            return cols.stop - cols.start if isinstance(cols, slice) else int(cols.numel())

        def gather_lowrank(cols, n_src: int) -> torch.Tensor:
            k = ncols(cols)
            n_sh = 0 if shared is None else shared.shape[0]
            x = torch.einsum("fk,fnpd->npkd", W0[:, cols], abl.expand(-1, n, -1, -1))
            if shared is not None:
                x = x + torch.einsum("fk,fnpd->npkd", M0[:n_sh, cols], shared)
            x = x[None]  # [1, n, P, k, D]
            own = (torch.cat(chunks, 0) if len(chunks) > 1 else chunks[0])[: n_src - n_sh] if chunks else None
            if own is not None and own.shape[0]:
                a = own.reshape(own.shape[0], C, n, P, D)
                x = x + torch.einsum("cfk,fcnpd->cnpkd", M[:, n_sh:n_src, cols], a)
            else:
                x = x.expand(C, -1, -1, -1, -1)
            idx = torch.nonzero(diff_cols[cols]).flatten()
            if idx.numel():
                dm = DM[:, :, cols][:, :, idx]  # [C, F, j]
                d = -torch.einsum("cfj,fnpd->cnpjd", dm, abl.expand(-1, n, -1, -1) * self._one)
                if shared is not None:
                    d = d + torch.einsum("cfj,fnpd->cnpjd", dm[:, :n_sh], shared)
                x = x.index_add(3, idx, d)
            return x.reshape(B, P, k, D)

        def gather(cols, n_src: int) -> torch.Tensor:
            """Inputs ``[B, P, k, D]`` of the destinations in ``cols`` (a slice or an index tensor)
            from the first n_src nodes."""
            if lowrank:
                return gather_lowrank(cols, n_src)
            k = ncols(cols)
            n_sh = 0 if shared is None else shared.shape[0]
            own = (torch.cat(chunks, 0) if len(chunks) > 1 else chunks[0])[: n_src - n_sh] if chunks else None
            if M is None:
                total = own.sum(0) if own is not None else 0.0
                if shared is not None:
                    total = total + shared.sum(0).expand(B, P, D) if shared.shape[1] != B else total + shared.sum(0)
                x = total[:, :, None, :].expand(B, P, k, D)
            else:
                Mc = M[..., :, cols]
                x = 0.0
                if shared is not None:
                    x = mix(Mc[..., :n_sh, :], shared, per_group=False)
                if own is not None and own.shape[0]:
                    x = x + mix(Mc[..., n_sh:n_src, :], own, per_group=True)
                if abl is not None:
                    Wc = W[..., :, cols]
                    if grouped and abl.dim() == 5:
                        x = x + torch.einsum("cfk,fcnpd->cnpkd", Wc, abl).reshape(B, P, k, D)
                    else:
                        x = x + mix(Wc, abl, per_group=False)
            if probe is not None:
                x = x + probe[cols].permute(1, 2, 0, 3)
            return x

        # Nodes whose outgoing edges are all masked to 0 in every row (and no gradient or
        # activations are asked for) contribute nothing of their own: they are not computed.
        alive = None
        if M is not None and probe is None and not keep_acts and not M.requires_grad:
            alive = (M != 0).any(-1)
            if alive.dim() == 2:
                alive = alive.any(0)
            alive = alive.tolist()

        for layer in range(layer0, L):
            base_col = layer * self.per_layer_bwd
            n_src = 1 + layer * self.per_layer_fwd
            if not (layer == layer0 and part0 == "mlp"):
                live = list(range(H)) if alive is None else [h for h in range(H) if alive[n_src + h]]
                if len(live) == H:
                    x = gather(slice(base_col, base_col + 3 * H), n_src) + self._bias_attn[layer]
                    chunks.append(self._attention(layer, x))  # [H, B, P, D]
                else:
                    heads = torch.zeros(H, B, P, D, dtype=self.dtype, device=self.device)
                    if live:
                        idx = torch.tensor(live, device=self.device)
                        cols = torch.cat([base_col + idx, base_col + H + idx, base_col + 2 * H + idx])
                        x = gather(cols, n_src) + self._bias_attn[layer]
                        heads = heads.index_copy(0, idx, self._attention(layer, x, heads=idx))
                    chunks.append(heads)
            if self.has_mlp:
                col = base_col + 3 * H
                n_src_mlp = n_src if self.parallel else n_src + H
                f_mlp = 1 + layer * self.per_layer_fwd + H
                if alive is not None and not alive[f_mlp]:
                    chunks.append(torch.zeros(1, B, P, D, dtype=self.dtype, device=self.device))
                else:
                    xm = gather(slice(col, col + 1), n_src_mlp)[:, :, 0] + self._bias_mlp[layer]
                    chunks.append(self._mlp(layer, xm)[None])
        col = L * self.per_layer_bwd
        xl = gather(slice(col, col + 1), F)[:, :, 0] + self._bias_logits
        out = self._unembed(xl)
        acts = None
        if keep_acts:
            acts = torch.cat(chunks, 0)
            if shared is not None:
                sh = shared if shared.shape[1] == B else shared.repeat(1, C, 1, 1)
                acts = torch.cat([sh, acts], 0)
        return RunResult(out, acts, probe)

    # ------------------------------------------------------------------ batched helpers
    def run_masks(self, base, edge_masks, source=None, ablation: str = "resample", reference=None,
                  positional: bool = True, ablated: torch.Tensor | None = None, node_masks=None,
                  chunk_size: int | None = None, start_slot: int | None = None,
                  prefix: torch.Tensor | None = None) -> torch.Tensor:
        """Outputs ``[M, B, P, V]`` for ``M`` edge masks ``[M, n_edges]`` on the same inputs, run
        as batches of (mask x example) rows; ``node_masks`` optional ``[M, n_forward]``.

        ``start_slot`` + ``prefix`` (node outputs ``[F, B, P, D]`` of a run whose nodes before
        that backward slot are what every mask would compute, e.g. the clean run when the masks
        differ only in edges into that slot or later ones): skip recomputing those nodes."""
        tokens = self.tokens_tensor(base)
        B, P = tokens.shape
        masks = self.edge_mask_tensor(edge_masks)
        if masks.dim() == 1:
            masks = masks[None]
        n_masks = masks.shape[0]
        if node_masks is not None:
            node_masks = self.node_mask_tensor(node_masks)
            if node_masks.dim() == 1:
                node_masks = node_masks[None].expand(n_masks, -1)
        if ablated is None:
            ablated = self.ablated_outputs(tokens, source, ablation, reference, positional)
        if chunk_size is None:
            chunk_size = max(1, 4096 // max(B, 1))
        outs = []
        for start in range(0, n_masks, chunk_size):
            mk = masks[start:start + chunk_size]
            c = mk.shape[0]
            nm = None if node_masks is None else node_masks[start:start + chunk_size]
            M = self._matrix(mk, nm)
            if M.dim() == 2:
                M = M[None]
            tok = tokens.repeat(c, 1)  # rows: mask-major, then example
            out = self._forward(tok, M, ablated, start_slot=start_slot, prefix=prefix).output
            outs.append(out.reshape(c, B, P, -1))
        return torch.cat(outs, 0)

    def edge_mask_gradient(self, base, metric_fn: Callable[[torch.Tensor], torch.Tensor], source=None,
                           edge_mask=None, node_mask=None, ablation: str = "resample", reference=None,
                           positional: bool = True, ablated: torch.Tensor | None = None):
        """``(d metric / d edge_mask [n_edges], metric value)`` at ``edge_mask`` (default all ones).

        ``metric_fn(outputs) -> scalar`` (e.g. a mean loss). At the all-ones mask this is the EAP
        score with the opposite sign: sum over examples and positions of
        ``(a_src - a'_src) . d metric / d input[dst]``.
        """
        em = self.edge_mask_tensor(edge_mask) if edge_mask is not None else torch.ones(self.n_edges, dtype=self.dtype, device=self.device)
        em = em.detach().clone().requires_grad_(True)
        with torch.enable_grad():
            res = self.run(base, source, em, node_mask, ablation, reference, positional, ablated)
            value = metric_fn(res.output)
            (grad,) = torch.autograd.grad(value, em)
        return grad, float(value.detach())

    def input_gradients(self, base, metric_fn: Callable[[torch.Tensor], torch.Tensor], source=None,
                        edge_mask=None, node_mask=None, ablation: str = "resample", reference=None,
                        positional: bool = True, ablated: torch.Tensor | None = None,
                        input_interpolation=None, sum_steps: tuple[int, int] | None = None,
                        first_block_acts: bool = False, shared_first: bool = False):
        """``(d metric / d input of every destination [n_backward, B, P, D], metric value)``.

        ``first_block_acts=True`` (node masks only, no edge mask): also return, third, every
        node's output ``[n_forward, B/C, P, D]`` on the first block of rows (those the first
        node-mask row applies to), e.g. the alpha = 0 rows of EAP-IG-inputs, which are the run
        on the source inputs; ``ablated`` then only needs its ``input`` row.

        ``shared_first=True``: position 0 is computed once when it is the same in every row (causal
        attention, one token there, only ``input`` interpolated, see ``_fast_input_grads``); the
        gradients at position 0 are then zeros, for callers whose differences there are zero.

        ``sum_steps=(G, Z)``: the rows are G x Z blocks of B/(G Z) examples (e.g. groups and
        integrated-gradient steps); the gradients are summed over Z, giving ``[K, G * B/(G Z), P, D]``.

        Without an edge mask this runs the residual-stream pass with probes on the q/k/v
        projections, the MLP inputs and the final residual, and maps the q/k/v gradients back to
        each head's input through W_Q/W_K/W_V and the layer norm's vector-Jacobian product, so
        per-head inputs are never materialised. With an edge mask (or an unsupported norm) it adds
        a probe to every destination input of the masked pass."""
        tokens = self.tokens_tensor(base)
        fast = edge_mask is None and self._ln_kind() is not None
        if fast:
            B = tokens.shape[0]
            nm = self.node_mask_tensor(node_mask, B)
            if input_interpolation is not None:
                nm = self._interpolate_input(nm, input_interpolation)
            if nm is not None and ablated is None:
                ablated = self.ablated_outputs(tokens, source, ablation, reference, positional)
            with torch.enable_grad():
                return self._fast_input_grads(tokens, nm, ablated, metric_fn, sum_steps, first_block_acts,
                                              shared_first)
        if first_block_acts:
            raise UsageError("first_block_acts needs the residual-stream pass (no edge mask, a supported norm)")
        with torch.enable_grad():
            res = self.run(tokens, source, edge_mask, node_mask, ablation, reference, positional, ablated,
                           input_probe=True, input_interpolation=input_interpolation)
            value = metric_fn(res.output)
            (grad,) = torch.autograd.grad(value, res.probe)
        if sum_steps is not None:
            G, Z = sum_steps
            grad = grad.reshape(grad.shape[0], G, Z, -1, *grad.shape[2:]).sum(2).flatten(1, 2)
        return grad, float(value.detach())

    def _ln_kind(self) -> str | None:
        names = {type(blk.ln1).__name__ for blk in self.model.blocks}
        names |= {type(getattr(self.model, "ln_final", torch.nn.Identity())).__name__}
        if self.has_mlp:
            names |= {type(blk.ln2).__name__ for blk in self.model.blocks}
        if len(names) != 1:
            return None
        kind = names.pop()
        return kind if kind in ("Identity", "LayerNorm", "LayerNormPre", "RMSNorm", "RMSNormPre") else None

    @staticmethod
    def _ln_vjp(ln, x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        """Vector-Jacobian product of layer norm ``ln`` at ``x [B, P, D]`` for ``g [..., B, P, D]``."""
        kind = type(ln).__name__
        if kind == "Identity":
            return g
        if kind in ("LayerNorm", "RMSNorm"):
            g = g * ln.w
        if kind.startswith("LayerNorm"):
            xc = x - x.mean(-1, keepdim=True)
        else:
            xc = x
        scale = (xc.pow(2).mean(-1, keepdim=True) + ln.eps).sqrt()
        xh = xc / scale
        out = g - (g * xh).mean(-1, keepdim=True) * xh
        if kind.startswith("LayerNorm"):
            out = out - g.mean(-1, keepdim=True)
        return out / scale

    def _qkv_weights(self, layer: int):
        """Layer ``layer``'s q, k and v projections fused: ``(W [D, 3*H*d_head], b [3*H*d_head],
        W_rows [3H, D, d_head])`` (rows in backward-slot order: q of every head, then k, then v)."""
        cache = self.__dict__.setdefault("_qkv_cache", {})
        if layer not in cache:
            with torch.inference_mode(False), torch.no_grad():  # usable by autograd passes later too
                cache[layer] = self._fuse_qkv(layer)
        return cache[layer]

    def _fuse_qkv(self, layer: int):
        attn = self.model.blocks[layer].attn
        rows = torch.cat([attn.W_Q, attn.W_K, attn.W_V], 0).detach()  # [3H, D, dh]
        W = rows.permute(1, 0, 2).reshape(rows.shape[1], -1).contiguous()
        b = torch.cat([attn.b_Q, attn.b_K, attn.b_V], 0).detach().reshape(-1)
        return W, b, rows

    def _fast_input_grads(self, tokens, nm, ablated, metric_fn, sum_steps=None, first_block_acts=False,
                          shared_first: bool = False):
        """Forward with the q/k/v projections fused in one matrix product per layer, then one
        backward for the gradients at the projections, MLP inputs and final residual (taken on
        those intermediate tensors directly), mapped back to each head's q/k/v input.

        ``shared_first``: when attention is causal, every row has the same token at position 0
        and only the ``input`` node is interpolated, with the same value at position 0 in every
        row, position 0 computes the same thing in every row: it is run once, without gradient,
        and the rows carry positions 1.. only (its keys and values are shared). The gradients at
        position 0 are then returned as zeros: for callers (EAP-IG-inputs) whose clean and
        ablated outputs are equal there, so those gradients are multiplied by zero anyway."""
        B, P = tokens.shape
        H, D = self.n_heads, self.d_model
        if nm is not None and nm.dim() == 1:
            nm = nm[None]
        C = 1 if nm is None else nm.shape[0]
        n = B // C
        emb = self._embed(tokens)
        if shared_first:
            shared_first = self._first_position_shared(tokens, emb, nm, ablated)
        o = 1 if shared_first else 0  # positions computed in the rows: o .. P-1
        Pm = P - o
        abl = ablated
        if o and ablated is not None and ablated.shape[2] == P:
            abl = ablated[:, :, o:]

        def interp(x, f0, f1):
            if nm is None:
                return x
            alpha = nm[:, f0:f1]
            if bool((alpha == 1).all()) and not alpha.requires_grad:
                return x
            a = self._abl_view(abl, f0, f1, C, n, Pm)
            xv = x.reshape(C, n, Pm, f1 - f0, D)
            return (a + alpha[:, None, None, :, None] * (xv - a)).reshape(B, Pm, f1 - f0, D)

        def needs(f0, f1):
            return nm is not None and (nm[:, f0:f1].requires_grad or not bool((nm[:, f0:f1] == 1).all()))

        first = self._first_position(emb[:1, :1].detach()) if o else None
        targets, resids = [], []
        block = [] if first_block_acts else None  # node outputs on rows 0 .. n-1

        def keep_block(x):  # [k, n, Pm, D] -> with position 0 in front
            if o:
                x = torch.cat([first["acts"][len(block)].expand(x.shape[0], n, 1, D), x], 2)
            block.append(x)

        if not emb.requires_grad:  # a frozen model: the gradients still need a graph
            emb = emb.detach().requires_grad_(True)
        resid = interp(emb[:, o:, None], 0, 1)[:, :, 0]
        if block is not None:
            keep_block(resid[:n].detach()[None])
        f = 1
        future = self._future(P, emb.device)[o:] if self.causal else None
        for layer in range(self.n_layers):
            blk = self.model.blocks[layer]
            attn = blk.attn
            resids.append(resid.detach())
            W, b, _rows = self._qkv_weights(layer)
            d_head = W.shape[1] // (3 * H)
            qkv = torch.addmm(b, blk.ln1(resid).reshape(B * Pm, D), W).view(B, Pm, 3, H, d_head)
            targets.append(qkv)
            q, k, v = (t.transpose(1, 2) for t in qkv.unbind(2))  # [B, H, Pm, dh]
            if o:
                k0, v0 = first["kv"][layer]
                k = torch.cat([k0.expand(B, H, o, d_head), k], 2)
                v = torch.cat([v0.expand(B, H, o, d_head), v], 2)
            scores = q @ k.transpose(-1, -2) / attn.attn_scale  # [B, H, Pm, P]
            if future is not None:
                scores = torch.where(future, attn.IGNORE.to(scores.device), scores)
            if P < 8 and future is not None:  # short rows: the fused kernel is slow (no row is all-masked)
                e = (scores - scores.detach().amax(-1, keepdim=True)).exp()
                pattern = e / e.sum(-1, keepdim=True)
            else:
                pattern = torch.softmax(scores, dim=-1)
                pattern = torch.where(torch.isnan(pattern), torch.zeros_like(pattern), pattern)
            z = pattern @ v  # [B, H, Pm, dh]
            if needs(f, f + H):
                heads = interp(torch.einsum("bhpe,hed->bphd", z, attn.W_O), f, f + H)
                attn_out = heads.sum(2) + attn.b_O
                if block is not None:
                    keep_block(heads[:n].detach().permute(2, 0, 1, 3))
            else:
                attn_out = torch.addmm(attn.b_O, z.transpose(1, 2).reshape(B * Pm, -1),
                                       attn.W_O.reshape(-1, D)).view(B, Pm, D)
                if block is not None:
                    with torch.no_grad():
                        keep_block(torch.einsum("nhpe,hed->hnpd", z[:n], attn.W_O))
            f += H
            if self.has_mlp:
                mlp_in = resid.view(B, Pm, D) if self.parallel else resid + attn_out  # its own tensor
                targets.append(mlp_in)
                mlp_out = self._mlp(layer, mlp_in)
                if needs(f, f + 1):
                    mlp_out = interp(mlp_out[:, :, None], f, f + 1)[:, :, 0]
                if block is not None:
                    keep_block(mlp_out[:n].detach()[None])
                f += 1
                resid = resid + attn_out + mlp_out
            else:
                resid = resid + attn_out
        resid = resid.view(B, Pm, D)
        targets.append(resid)
        out = self._unembed(resid)
        if o:
            out = torch.cat([first["out"].expand(B, o, -1), out], 1)
        value = metric_fn(out)
        grads = torch.autograd.grad(value, targets)

        def fold(t):  # [k, B, Pm, D] -> summed over integrated-gradient steps, position 0 back
            if sum_steps is not None:
                G, Z = sum_steps
                t = t.reshape(t.shape[0], G, Z, -1, Pm, D).sum(2).flatten(1, 2)
            if o:
                t = torch.cat([t.new_zeros(t.shape[0], t.shape[1], o, D), t], 2)
            return t

        rows = []
        gi = 0
        for layer in range(self.n_layers):
            blk = self.model.blocks[layer]
            _W, _b, w_rows = self._qkv_weights(layer)
            gq = grads[gi]  # [B, Pm, 3, H, dh]
            gi += 1
            identity = type(blk.ln1).__name__ == "Identity"
            if identity and sum_steps is not None:
                G, Z = sum_steps
                gq = gq.reshape(G, Z, -1, Pm, 3, H, gq.shape[-1]).sum(1).flatten(0, 1)
            b_rows = gq.shape[0]
            g3 = gq.reshape(b_rows * Pm, 3 * H, -1).transpose(0, 1)  # [3H, b*Pm, dh]
            g_ln = torch.bmm(g3, w_rows.transpose(1, 2)).view(3 * H, b_rows, Pm, D)
            if identity:
                rows.append(torch.cat([g_ln.new_zeros(3 * H, b_rows, o, D), g_ln], 2) if o else g_ln)
            else:
                rows.append(fold(self._ln_vjp(blk.ln1, resids[layer], g_ln)))
            if self.has_mlp:
                rows.append(fold(grads[gi][None]))
                gi += 1
        rows.append(fold(grads[gi][None]))
        if block is not None:
            return torch.cat(rows, 0), float(value.detach()), torch.cat(block, 0)
        return torch.cat(rows, 0), float(value.detach())

    def _first_position_shared(self, tokens, emb, nm, ablated) -> bool:
        """Whether position 0 is the same computation in every row (see ``_fast_input_grads``)."""
        if not self.causal or tokens.shape[1] < 2 or not bool((tokens[:, 0] == tokens[0, 0]).all()):
            return False
        if nm is None:
            return True
        if nm.requires_grad or not bool((nm[:, 1:] == 1).all()) or ablated is None:
            return False
        return bool((ablated[0][..., :1, :] == emb[0, 0]).all())

    @torch.no_grad()
    def _first_position(self, resid: torch.Tensor) -> dict:
        """Position 0 alone (``resid`` its input ``[1, 1, D]``), as ``_fast_input_grads`` computes it:
        per layer its key and value ``[1, H, 1, dh]``, every node's output there ``[k, 1, 1, D]``
        (input, heads, MLP, in forward order) and the model output ``[1, 1, V]``."""
        H, D = self.n_heads, self.d_model
        kv, acts = [], [resid[None]]
        for layer in range(self.n_layers):
            blk = self.model.blocks[layer]
            attn = blk.attn
            W, b, _rows = self._qkv_weights(layer)
            d_head = W.shape[1] // (3 * H)
            qkv = torch.addmm(b, blk.ln1(resid).reshape(1, D), W).view(1, 1, 3, H, d_head)
            q, k, v = (t.transpose(1, 2) for t in qkv.unbind(2))
            kv.append((k, v))
            pattern = torch.softmax(q @ k.transpose(-1, -2) / attn.attn_scale, dim=-1)
            z = pattern @ v
            acts.append(torch.einsum("nhpe,hed->hnpd", z, attn.W_O))
            attn_out = torch.addmm(attn.b_O, z.transpose(1, 2).reshape(1, -1), attn.W_O.reshape(-1, D)).view(1, 1, D)
            if self.has_mlp:
                mlp_out = self._mlp(layer, resid if self.parallel else resid + attn_out)
                acts.append(mlp_out[None])
                resid = resid + attn_out + mlp_out
            else:
                resid = resid + attn_out
        return {"kv": kv, "acts": acts, "out": self._unembed(resid)}

    def scores_from_input_gradients(self, diff: torch.Tensor, grads: torch.Tensor) -> torch.Tensor:
        """Edge scores ``[n_edges]``: ``sum_{b,p} diff[src] . grads[dst]`` for every edge, where
        ``diff`` is ``[F, B, P, D]`` (e.g. clean minus ablated node outputs) and ``grads`` is
        ``[K, B, P, D]`` (from :meth:`input_gradients`)."""
        mat = diff.expand(-1, *grads.shape[1:]).reshape(diff.shape[0], -1) @ grads.reshape(grads.shape[0], -1).T
        return self.graph.from_matrix(mat)


def as_runtime(model_or_runtime) -> CircuitRuntime:
    """A :class:`CircuitRuntime` from a runtime, a HookedTransformer or a model artifact."""
    if isinstance(model_or_runtime, CircuitRuntime):
        return model_or_runtime
    return CircuitRuntime(model_or_runtime)


def edge_names_to_mask(graph: Graph, names: Iterable[str]) -> np.ndarray:
    """Boolean edge vector of ``names`` (q/k/v-level names, or head-level names meaning all three)."""
    out = np.zeros(graph.n_edges, dtype=bool)
    head_level = {}
    for e in graph.edges:
        head_level.setdefault(f"{e.src}->{e.dst}", []).append(e.index)
    for n in names:
        if graph.has_edge(n):
            out[graph.edge_index(n)] = True
        elif n in head_level:
            out[head_level[n]] = True
        else:
            graph.edge_index(n)  # raises GraphError with a suggestion
    return out
