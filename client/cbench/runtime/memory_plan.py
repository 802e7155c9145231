"""The memory plan of a discovery run: before it runs, how many bytes a method adds on top of the
loaded model on this model, at this number of pairs and sequence length, split into what it
holds for the whole run and what one pass adds, and the pass size (rows) it will use.

The plan counts the tensors the code allocates, term by term, in floats per token position
(``P`` positions, ``D = d_model``, ``F`` forward nodes, ``K`` destinations, ``L`` layers, ``H``
heads of ``dh``, MLP width ``d_mlp``, output width ``V``):

* **held** for the run: the clean (and, with resample ablation, ablated) node outputs of every
  pair, ``F x D`` per position each, and the outputs ``V`` per position each: EAP's paired pass
  over base and source rows keeps ``2 x (F D + V)``; EAP-IG-inputs keeps the clean outputs, the
  alpha = 0 rows' node outputs (the ablated ones) and the source embeddings, ``2 F D + V + D``;
* **a pass** of ``r`` rows, the larger of its two phases: the forward and backward, what autograd
  keeps per layer (:func:`saved_per_layer`), the outputs and their log-softmax (``3 V``) and the
  gradients it returns (q/k/v, MLP inputs, final residual); then, the saved tensors freed, those
  gradients, the gradients at every destination ``K x D`` and the clean-minus-ablated differences
  ``F x D`` that the scores are taken from (EAP-IG: per example, not per row, as its steps are
  summed first, after each layer's q/k/v gradients are mapped back per row); and, before the
  passes, the clean pass's own temporaries over all its rows (one layer at a time,
  :func:`plain_pass_per_row`);
* the **edge scores**: the ``F x K`` score matrix and its ``n_edges`` vector;
* **weight copies**: TransformerLens's gated MLP copies its three weights and its unembedding
  ``W_U`` on every forward (:func:`weight_copies`, :func:`unembed_copy`), all kept by the gradient
  pass, the largest one at a time by the clean pass.

Peak = held + the larger of the clean pass's temporaries and one gradient pass + the scores. (EAP's
rerun of near-tie rows against the clean argmax, a plain pass over at most a pass's rows, runs
after the gradient pass's graph is freed: within the clean pass's term,
:func:`cbench.discovery.base.clean_point_gradients`.)
:func:`plan_for` chooses the rows per pass (and, with ``budget``, the number of pairs per call of
the method, ``chunk``: EAP and EAP-IG scores are means over pairs, so calls over parts of the
pairs, weighted by their sizes, give the same scores) so the peak stays within a budget;
:func:`check_plan` refuses in one line, before anything runs, what cannot fit the device.
benchmarks/bench_memory_plan.py compares the plan with the measured peak (docs/real-models.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cbench.errors import UsageError
from cbench.runtime import memory
from cbench.runtime.memory import _dims, budget_bytes, row_bytes

if TYPE_CHECKING:
    from cbench.runtime.model_state import ModelState

PLANNED = ("eap", "eap-ig-inputs")
# activations TransformerLens writes as several torch operations (autograd keeps their pieces)
COMPOSITE_ACTIVATIONS = ("gelu_new", "gelu_fast", "solu_ln")
GB = 2.0**30


def saved_per_layer(rt: ModelState, positions: int) -> int:
    """Floats per position autograd keeps for one layer of the input-gradient pass: the residual,
    ln1's input and normalised output, the fused q/k/v and the rotated q and k, the attention
    scores, their masked copy and the pattern, z, the attention output, the MLP's input, ln2's
    two, the MLP's hidden activations (pre- and post-activation; gated: gate, up, activation and
    product), its output and the residual sum."""
    D, H, dh, d_mlp, _V, _ = _dims(rt)
    gated = bool(getattr(rt.cfg, "gated_mlp", False))
    mlp = (4 if gated else 2) * d_mlp
    if str(getattr(rt.cfg, "act_fn", "")) in COMPOSITE_ACTIVATIONS:
        mlp += 3 * d_mlp  # written out in torch operations: 0.5 x, tanh(...) and 1 + tanh(...) kept too
    post = 2 * D if getattr(rt, "post_norm", False) else 0
    return 3 * D + 3 * H * dh + 2 * H * dh + 3 * H * positions + H * dh + D + (4 * D + mlp if d_mlp else 0) + D + post


def _from_transformer_lens(module) -> bool:
    return type(module).__module__.startswith("transformer_lens")


def weight_copies(rt: ModelState) -> int:
    """Floats of weight copies one layer's forward makes: TransformerLens's ``GatedMLP`` passes
    ``W_gate``, ``W_in`` and ``W_out`` to ``F.linear`` as contiguous transposed copies on every
    forward (``3 x d_model x d_mlp``), which autograd keeps until the backward pass; measured at
    Qwen-2.5-0.5B's width, 52 MB a layer in float32. Other MLPs (and a bridge's Hugging Face
    modules) use their weights in place: 0."""
    D, _H, _dh, d_mlp, _V, _ = _dims(rt)
    if not (d_mlp and getattr(rt.cfg, "gated_mlp", False)):
        return 0
    return 3 * D * d_mlp if _from_transformer_lens(getattr(rt.model.blocks[0], "mlp", None)) else 0


def unembed_copy(rt: ModelState) -> int:
    """Floats of the unembedding's copy: TransformerLens's ``Unembed`` passes ``W_U`` to
    ``F.linear`` as a contiguous transposed copy on every forward (``d_model x vocab``; measured at
    Llama-3.1-8B's width and vocabulary, 1.9 GB in float32), kept by autograd for the backward
    pass; 0 for other unembeddings."""
    D, _H, _dh, _d_mlp, V, _ = _dims(rt)
    return D * V if _from_transformer_lens(getattr(rt.model, "unembed", None)) else 0


def plain_pass_per_row(rt: ModelState, positions: int) -> int:
    """Floats per position of the clean pass's temporaries at its largest layer (no autograd):
    the normalised input, q/k/v and rotated q, k, scores and pattern, z and the per-head results
    before they are written (``H x D``), or the MLP's hidden activations."""
    D, H, dh, d_mlp, _V, _ = _dims(rt)
    gated = bool(getattr(rt.cfg, "gated_mlp", False))
    attn = D + 5 * H * dh + 3 * H * positions + H * dh + H * D
    mlp = D + (4 if gated else 2) * d_mlp
    return max(attn, mlp)


@dataclass(frozen=True)
class MemoryPlan:
    """What a run of ``method`` adds on top of the loaded model, in bytes (see the module docstring)."""

    method: str
    n_examples: int
    positions: int
    chunk: int  #: pairs per call of the method (all of them unless a budget asked for fewer)
    rows_per_pass: int  #: rows (pairs, or pairs x steps) per gradient pass
    held: int  #: node outputs and outputs kept for one call's pairs
    clean_pass: int  #: the clean pass's temporaries over its rows
    gradient_pass: int  #: one gradient pass of ``rows_per_pass`` rows
    scores: int  #: the F x K score matrix and the edge vector
    parts: dict = field(default_factory=dict)

    @property
    def peak(self) -> int:
        return self.held + max(self.clean_pass, self.gradient_pass) + self.scores

    def describe(self) -> str:
        return (f"{self.method}: {self.peak / GB:.2f} GB at peak ({self.chunk} of {self.n_examples} pairs per call, "
                f"{self.rows_per_pass} rows per pass; node outputs {self.held / GB:.2f} GB, clean pass "
                f"{self.clean_pass / GB:.2f} GB, gradient pass {self.gradient_pass / GB:.2f} GB, scores "
                f"{self.scores / GB:.3f} GB)")


def _plan(rt: ModelState, method: str, n: int, N: int, P: int, steps: int, rows_budget: float | None,
          batch: int) -> MemoryPlan:
    D, _H, _dh, _d_mlp, V, itemsize = _dims(rt)
    F, K, L = rt.n_forward, rt.n_backward, rt.n_layers
    per_row_fwd = L * saved_per_layer(rt, P) + 3 * V
    H, dh = rt.n_heads, _dims(rt)[2]
    grads_at = L * (3 * H * dh + (D if rt.has_mlp else 0)) + D  # d metric / d (q/k/v, MLP inputs, final residual)
    rows = max(1, min(batch, int((budget_bytes() if rows_budget is None else rows_budget)
                                 // max(row_bytes(rt, P), 1))))
    scores = (F * K + rt.n_edges) * itemsize
    copies = L * weight_copies(rt) + unembed_copy(rt)  # kept for the backward pass
    # without autograd the copies are freed as soon as they are used: the largest one at a time
    one_copy = max(weight_copies(rt) // 3, unembed_copy(rt))
    if method == "eap":
        r = min(rows, n)
        held = 2 * n * P * (F * D + V)
        clean_pass = 2 * n * P * plain_pass_per_row(rt, P) + one_copy
        # autograd's saved tensors are freed by the backward pass before the gradients are mapped back
        grad = max(r * P * (per_row_fwd + grads_at) + copies, r * P * (grads_at + K * D + F * D))
    elif method == "eap-ig-inputs":
        Z = steps
        per_ex = max(1, rows // Z) if Z * n > rows else n  # pairs per pass (each Z rows)
        per_ex = min(per_ex, n)
        r = per_ex * Z
        held = n * P * (2 * F * D + V + D)
        clean_pass = n * P * plain_pass_per_row(rt, P) + one_copy
        # each layer's q/k/v gradients are mapped back for every row before the steps are summed
        grad = max(r * P * (per_row_fwd + grads_at) + copies,
                   r * P * (grads_at + 3 * H * D) + per_ex * P * (K * D + 2 * F * D))
    else:
        raise UsageError(f"no memory plan for {method!r} (planned: {', '.join(PLANNED)})")
    b = itemsize
    return MemoryPlan(method, N, P, n, r, held * b, clean_pass * b, grad * b, scores,
                      {"per_row_saved_floats": per_row_fwd * P})


def plan_for(rt: ModelState, method: str, n_examples: int, positions: int, *, steps: int = 5,
             budget: float | None = None, batch: int = 4096) -> MemoryPlan:
    """The plan of ``method`` on ``n_examples`` pairs of ``positions`` tokens. ``budget`` (bytes):
    the peak to stay within, by fewer pairs per call (``chunk``) and fewer rows per pass; a
    budget not even one pair of one row fits is refused in one line."""
    if budget is None:
        return _plan(rt, method, n_examples, n_examples, positions, steps, None, batch)
    n = n_examples
    while True:
        for rows_budget in (None, budget / 4, budget / 16):
            p = _plan(rt, method, n, n_examples, positions, steps, rows_budget, batch)
            if p.peak <= budget:
                return p
        if n == 1:
            raise UsageError(f"{method} on one pair of {positions} tokens needs {p.peak / GB:.2f} GB, over the "
                             f"memory budget of {budget / GB:.2f} GB: use shorter inputs or --dtype bfloat16")
        n = max(1, n // 2)


def check_plan(rt: ModelState, method: str, n_examples: int, positions: int, *, steps: int = 5,
               available: float | None = None, batch: int = 4096) -> MemoryPlan | None:
    """The plan, or one UsageError when it cannot fit the memory free on the runtime's device
    (how much it needs, what is free, and what to change). None for methods without a plan."""
    if method not in PLANNED:
        return None
    p = plan_for(rt, method, n_examples, positions, steps=steps, batch=batch)
    free = memory.available_bytes(rt.device) if available is None else available
    if free is None or p.peak <= free:
        return p
    try:
        fit = plan_for(rt, method, n_examples, positions, steps=steps, budget=free, batch=batch)
        hint = (f"--memory-budget {_floor_gb(free)} (runs in parts of {fit.chunk} pairs, same scores), at most "
                f"{fit.chunk} pairs (--n-examples)")
    except UsageError:
        hint = "shorter inputs"
    raise UsageError(f"{method} needs {p.peak / GB:.1f} GB on {rt.device} ({n_examples} pairs of {positions} tokens: "
                     f"node outputs {p.held / GB:.1f} GB, one pass {max(p.clean_pass, p.gradient_pass) / GB:.1f} GB) "
                     f"but {free / GB:.1f} GB are free: use {hint}, --dtype bfloat16, or a node-level method (nap)")


def _floor_gb(nbytes: float) -> str:
    """``nbytes`` in GB rounded down to two significant digits (a budget that still fits)."""
    import math

    gb = nbytes / GB
    if gb <= 0:
        return "0"
    step = 10.0 ** (math.floor(math.log10(gb)) - 1)
    return f"{math.floor(gb / step) * step:.6g}"


def check_budget(rt: ModelState, method: str, n_examples: int, positions: int, budget_gb: float, *,
                 steps: int = 5, batch: int = 4096, available: float | None = None) -> MemoryPlan:
    """The plan within ``budget_gb`` (parts of ``plan.chunk`` pairs, ``plan.rows_per_pass`` rows per
    pass); one UsageError when not even one pair fits the budget or the budget is over what is free."""
    plan = plan_for(rt, method, n_examples, positions, steps=steps, budget=budget_gb * GB, batch=batch)
    free = memory.available_bytes(rt.device) if available is None else available
    if free is not None and plan.peak > free:
        raise UsageError(f"--memory-budget {budget_gb:g}: {method} would use up to {plan.peak / GB:.2f} GB but "
                         f"{free / GB:.1f} GB are free on {rt.device}: give at most --memory-budget {_floor_gb(free)}")
    return plan
