"""Inputs checked and converted: token ids, edge masks and node masks in every accepted form
(see the package docstring), the (forward x backward) mask matrix they make, the ``input``
node's interpolation as a node mask, and edge names to a boolean edge vector."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Mapping

import numpy as np
import torch

from cbench.errors import GraphError, UsageError
from cbench.graph.graph import Graph

if TYPE_CHECKING:
    from cbench.runtime.model_state import ModelState


def tokens_tensor(rt: ModelState, tokens) -> torch.Tensor:
    """Token ids as a long tensor ``[batch, pos]`` (one row from ``[pos]``), checked against the model."""
    t = torch.as_tensor(tokens, device=rt.device)
    if t.dim() == 1:
        t = t[None]
    if t.dim() != 2 or t.dtype not in (torch.int64, torch.int32, torch.int16, torch.uint8):
        raise UsageError(f"tokens must be integer ids of shape [batch, pos] (got {tuple(t.shape)}, {t.dtype})")
    if t.shape[1] > rt.cfg.n_ctx:
        raise UsageError(f"inputs have {t.shape[1]} positions but the model takes at most {rt.cfg.n_ctx}")
    if t.numel() and (int(t.min()) < 0 or int(t.max()) >= rt.cfg.d_vocab):
        raise UsageError(f"token ids must be in [0, {rt.cfg.d_vocab}) for this model")
    return t.long()


def _is_names(mask) -> bool:
    """Whether ``mask`` is a collection of names (a set, or a non-empty list or tuple of strings)."""
    return bool(isinstance(mask, (set, frozenset)) or (isinstance(mask, (list, tuple)) and mask
                                                       and isinstance(next(iter(mask)), str)))


def edge_mask_tensor(rt: ModelState, mask, batch: int | None = None) -> torch.Tensor | None:
    """A float tensor ``[n_edges]`` or ``[batch, n_edges]`` from any accepted edge-mask form."""
    if mask is None:
        return None
    if _is_names(mask):
        mask = rt.graph.mask(mask)
    if isinstance(mask, (list, tuple)) and not mask:
        raise GraphError(f"an edge mask for this model has {rt.n_edges} entries, got 0")
    t = mask if isinstance(mask, torch.Tensor) else torch.as_tensor(np.asarray(mask))
    shape = tuple(t.shape)
    if t.dim() not in (1, 2) or shape[-1] != rt.n_edges:
        raise GraphError(f"an edge mask for this model has {rt.n_edges} entries, got shape {shape}")
    _check_rows(t, batch, "edge")
    t = t.to(device=rt.device, dtype=rt.dtype) if (t.dtype != rt.dtype or t.device != rt.device) else t
    return t


def node_mask_tensor(rt: ModelState, mask, batch: int | None = None) -> torch.Tensor | None:
    """A float tensor ``[n_forward]`` or ``[batch, n_forward]`` over ``graph.forward_nodes``."""
    if mask is None:
        return None
    g = rt.graph
    if isinstance(mask, Mapping):
        t = torch.ones(rt.n_forward, dtype=rt.dtype, device=rt.device)
        for name, value in mask.items():
            t[g.forward_index(g.node(name).name)] = float(value)
        return t
    if _is_names(mask):
        keep = {g.node(n).name for n in mask}
        return torch.tensor([1.0 if n in keep else 0.0 for n in g.forward_nodes], dtype=rt.dtype, device=rt.device)
    t = mask if isinstance(mask, torch.Tensor) else torch.as_tensor(np.asarray(mask))
    shape = tuple(t.shape)
    if t.dim() not in (1, 2) or shape[-1] != rt.n_forward:
        raise GraphError(f"a node mask for this model has {rt.n_forward} entries "
                         f"(one per node in {', '.join(g.forward_nodes[:4])}, ...), got shape {shape}")
    _check_rows(t, batch, "node")
    return t.to(device=rt.device, dtype=rt.dtype)


def _check_rows(t: torch.Tensor, batch: int | None, kind: str) -> None:
    """A ``[C, n]`` mask needs C = batch or a divisor of it."""
    rows = t.shape[0]
    if t.dim() == 2 and batch is not None and (rows == 0 or batch % rows):
        raise GraphError(f"a per-example {kind} mask needs {batch} rows (one per input) or a divisor "
                         f"of {batch} (one per group of inputs), got {rows}")


def mask_matrix(rt: ModelState, edge_mask: torch.Tensor | None, node_mask: torch.Tensor | None):
    """Effective (F x K) mask matrix (or [B, F, K]); None when everything is kept."""
    if edge_mask is None and node_mask is None:
        return None
    if edge_mask is None:
        M = rt._real.clone()
    else:
        M = rt.graph.to_matrix(edge_mask)
    if node_mask is not None:
        if node_mask.dim() == 1:
            M = M * node_mask[:, None]
        else:
            if M.dim() == 2:
                M = M[None]
            M = M * node_mask[:, :, None]
    return M


def interpolate_input(rt: ModelState, nm: torch.Tensor | None, input_interpolation) -> torch.Tensor:
    """The node mask ``nm`` (None = all ones) with the ``input`` node's entry scaled by
    ``input_interpolation`` (alpha, scalar or ``[B]``): ``input`` then reads
    ``ablated + alpha * (clean - ablated)`` (EAP-IG-inputs); one row per alpha."""
    alpha = torch.as_tensor(input_interpolation, dtype=rt.dtype, device=rt.device).reshape(-1)
    rows = max(alpha.shape[0], 1 if nm is None or nm.dim() == 1 else nm.shape[0])
    base_nm = torch.ones(rt.n_forward, dtype=rt.dtype, device=rt.device) if nm is None else nm
    if base_nm.dim() == 1:
        base_nm = base_nm[None].expand(rows, -1)
    if base_nm.shape[0] != rows:
        base_nm = base_nm.repeat_interleave(rows // base_nm.shape[0], dim=0)
    return torch.cat([base_nm[:, :1] * alpha.expand(rows)[:, None], base_nm[:, 1:]], 1)



def mix_node_outputs(x: torch.Tensor, nm: torch.Tensor | None, ablated: torch.Tensor | None,
                     f0: int, f1: int) -> torch.Tensor:
    """Outputs ``x [B, P, k, D]`` of forward nodes f0..f1-1 under node-mask rows ``nm [C, F]``
    (row c for examples c*B/C ...): ``n * x + (1 - n) * ablated`` (``x`` itself when those
    entries are all 1 without gradient). ``ablated``: ``[F, B|B/C|1, P|1, D]``. Rows ``nm [C, F, D]``
    mask each output dimension (neuron) on its own (MIB's neuron-level circuits)."""
    if nm is None:
        return x
    alpha = nm[:, f0:f1]  # [C, k]
    if bool((alpha == 1).all()) and not alpha.requires_grad:
        return x
    B, P, k, D = x.shape
    C = nm.shape[0]
    n = B // C
    a = ablated[f0:f1]  # [k, B|n|1, P|1, D] -> broadcastable to [C, n, P, k, D]
    if a.shape[1] == C * n and C > 1:
        a = a.reshape(k, C, n, a.shape[2], a.shape[3]).permute(1, 2, 3, 0, 4)
    else:
        a = a.permute(1, 2, 0, 3)[None]  # [1, n|1, P|1, k, D]
    xv = x.reshape(C, n, P, k, D)
    w = alpha[:, None, None, :, :] if alpha.dim() == 3 else alpha[:, None, None, :, None]
    return (a + w * (xv - a)).reshape(B, P, k, D)

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
