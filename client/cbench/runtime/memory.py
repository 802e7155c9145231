"""How many rows (examples, or examples x steps) one pass takes so its peak memory stays within
a budget: the methods that take gradients at every destination input (EAP, EAP-IG, NAP) or
every destination's input (IFR) split their examples into passes of at most
:func:`rows_per_pass` rows, on top of their own ``batch_size``/``batch_rows``; activation
patching's edge-masked passes take at most :func:`masked_rows_per_pass` rows, and a training
step of subnetwork probing or UGS at most :func:`masked_grad_rows_per_pass` rows per pass
(the gradients of its parts are summed).

The budget is ``CBENCH_MEMORY_MB`` (default 1024 MB per pass; the whole run adds the stacked
clean and ablated node outputs of all examples, ``2 x n_forward x N x P x d_model`` floats).
On the small benchmark models every default batch fits in one pass, so chunking changes
nothing there; on a GPT-2-small-shaped graph (12 x 12, d_model 768, sequence length 16) a
pass holds about 30 examples. Chunks only change the order of a sum over examples (scores
agree to float32)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from cbench.errors import UsageError

if TYPE_CHECKING:
    from cbench.runtime.model_state import ModelState

DEFAULT_MB = 1024.0


def budget_bytes() -> float:
    """The per-pass budget in bytes (``CBENCH_MEMORY_MB``, default 1024)."""
    raw = os.environ.get("CBENCH_MEMORY_MB", "").strip()
    if not raw:
        return DEFAULT_MB * 2**20
    try:
        mb = float(raw)
    except ValueError:
        raise UsageError(f"CBENCH_MEMORY_MB must be a number of megabytes (got {raw!r})") from None
    if not mb > 0:
        raise UsageError(f"CBENCH_MEMORY_MB must be positive (got {raw!r})")
    return mb * 2**20


def _dims(rt: ModelState) -> tuple[int, int, int, int, int, int]:
    """(d_model, n_heads, d_head, d_mlp or 0, output vocabulary, bytes per float) of the model."""
    cfg = rt.cfg
    D, H = rt.d_model, rt.n_heads
    dh = getattr(cfg, "d_head", D // max(H, 1))
    d_mlp = (getattr(cfg, "d_mlp", None) or 0) if rt.has_mlp else 0
    V = getattr(cfg, "d_vocab_out", None) or getattr(cfg, "d_vocab", 1)
    itemsize = rt.dtype.itemsize if hasattr(rt.dtype, "itemsize") else 4
    return D, H, dh, d_mlp, V, itemsize


def output_width(rt: ModelState) -> int:
    """The width of the model's outputs per position (``d_vocab_out``)."""
    return _dims(rt)[4]


def _rows(row_bytes_: int, budget: float | None) -> int:
    budget = budget_bytes() if budget is None else budget
    return max(1, int(budget // max(row_bytes_, 1)))


def row_bytes(rt: ModelState, positions: int) -> int:
    """An upper estimate of the bytes one row of ``positions`` tokens costs in a forward and
    backward pass that returns the gradient at every destination input: the gradients
    ``[n_backward, P, D]``, the node outputs and their differences ``2 x [n_forward, P, D]``,
    and per layer what autograd keeps (residual, layer-norm input and output, fused q/k/v,
    attention scores and pattern, z, attention output, MLP input, hidden pre- and
    post-activation), plus the logits."""
    D, H, dh, d_mlp, V, itemsize = _dims(rt)
    per_layer = 5 * D + 3 * H * dh + 2 * H * positions + H * dh + 2 * d_mlp
    floats = (rt.n_backward + 2 * rt.n_forward) * D + rt.n_layers * per_layer + 2 * V
    return int(floats * positions * itemsize)


def rows_per_pass(rt: ModelState, positions: int, budget: float | None = None) -> int:
    """The most rows of ``positions`` tokens one pass may take within the budget (at least 1)."""
    return _rows(row_bytes(rt, positions), budget)


def masked_row_bytes(rt: ModelState, positions: int) -> int:
    """An upper estimate of the bytes one row of ``positions`` tokens costs in the edge-masked
    forward without gradients (activation patching, ACDC-style evaluation): every node's output
    kept for the destinations after it (``n_forward x P x D``), and one layer's temporaries at a
    time: the per-head q/k/v inputs before and after the norm (``2 x 3H x D``), q/k/v, scores
    and pattern, per-head results, the MLP's hidden activations, the residual copies."""
    D, H, dh, d_mlp, V, itemsize = _dims(rt)
    per_layer = 2 * 3 * H * D + 3 * H * dh + 2 * H * positions + H * D + 2 * d_mlp + 4 * D
    floats = rt.n_forward * D + per_layer + 2 * V
    return int(floats * positions * itemsize)


def masked_rows_per_pass(rt: ModelState, positions: int, budget: float | None = None) -> int:
    """The most rows of the edge-masked forward one pass may take within the budget (at least 1)."""
    return _rows(masked_row_bytes(rt, positions), budget)


def masked_grad_row_bytes(rt: ModelState, positions: int) -> int:
    """An upper estimate of the bytes one row of ``positions`` tokens costs in an edge-masked
    forward and backward pass with a gradient to the mask (subnetwork probing, UGS): what
    autograd keeps per layer for every head's own q/k/v input (the mixed input, its layer norm's
    intermediates and their gradients, about ``16 x 3H x D``), the attention and MLP
    temporaries, and every node's output and its gradient (``2 x n_forward x D``). Measured on the
    GPT-2-small shape at 16 positions: 225 MB (UGS) and 317 MB (edge masks) per row; this gives
    374 MB."""
    D, H, dh, d_mlp, V, itemsize = _dims(rt)
    per_layer = 16 * 3 * H * D + 4 * H * positions + 8 * d_mlp
    floats = 2 * rt.n_forward * D + rt.n_layers * per_layer + 2 * V
    return int(floats * positions * itemsize)


def masked_grad_rows_per_pass(rt: ModelState, positions: int, budget: float | None = None) -> int:
    """The most rows of the masked forward and backward one pass may take within the budget."""
    return _rows(masked_grad_row_bytes(rt, positions), budget)


def row_parts(n: int, size: int) -> list[tuple[int, int]]:
    """``(start, stop)`` of consecutive parts of at most ``size`` of ``n`` rows."""
    size = max(1, int(size))
    return [(s, min(n, s + size)) for s in range(0, n, size)]


def exact_rows_per_pass(rt: ModelState, positions: int, budget: float | None = None) -> int:
    """Rows per pass of the exact (TransformerLens-order) forward within the budget: its largest
    temporaries per row are the heads' products before the sum over d_head (``P x H x d_head x
    D``, TransformerLens's ``hook_result`` arithmetic) and the per-head q/k/v inputs (``P x 3H x
    D``, normalised)."""
    D, H, dh, _d_mlp, _V, itemsize = _dims(rt)
    return _rows(positions * (2 * H * dh * D + 3 * 3 * H * D) * itemsize, budget)


def available_bytes(device) -> float | None:
    """Memory free for a run on ``device``: the GPU's free memory, else the system's
    ``MemAvailable`` (Linux); None where it cannot be read."""
    import torch

    if getattr(device, "type", str(device)) == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return float(free)
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def run_bytes(rt: ModelState, n_examples: int, positions: int) -> tuple[int, int]:
    """A lower estimate of what a discovery run adds on top of the model: ``(held, one_pass)``,
    ``held`` the stacked clean and ablated node outputs of all examples (``2 x n_forward x N x
    P x d_model``) and the clean outputs (``N x P x vocab``), ``one_pass`` the smallest pass (one
    row of :func:`row_bytes`)."""
    D, _H, _dh, _d_mlp, V, itemsize = _dims(rt)
    held = (2 * rt.n_forward * D + V) * n_examples * positions * itemsize
    return int(held), row_bytes(rt, positions)


def check_fits(rt: ModelState, n_examples: int, positions: int, available: float | None = None) -> None:
    """One UsageError, before a run, when even its smallest passes cannot fit the memory free on
    the runtime's device: how much it needs and what to change."""
    free = available_bytes(rt.device) if available is None else available
    if free is None:
        return
    held, one = run_bytes(rt, n_examples, positions)
    if held + one <= free:
        return
    gb = 2.0**30
    per_pair = held / max(n_examples, 1)
    fits = int(max(free - one, 0) // max(per_pair, 1))
    raise UsageError(f"this run needs at least {(held + one) / gb:.1f} GB on {rt.device} ({n_examples} pairs of "
                     f"{positions} tokens: node outputs {held / gb:.1f} GB, one pass {one / gb:.1f} GB) but "
                     f"{free / gb:.1f} GB are free: use at most {fits} pairs (--n-examples), shorter inputs or "
                     f"--dtype bfloat16")
