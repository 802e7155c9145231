"""Edge-masked runs: :func:`run` (validates the masks and picks the pass), :func:`run_masks`
(many masks on the same inputs in one batch), :func:`edge_mask_gradient`, and the masked pass
itself, where every destination's input is one einsum over the (forward x backward) mask
matrix (see the package docstring)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import torch

from cbench.runtime.ablations import ablated_outputs
from cbench.runtime.contractions import grouped_sources_into, sources_into
from cbench.runtime.layers import attention, embed, mlp, post_heads, unembed
from cbench.runtime.masks import edge_mask_tensor, interpolate_input, mask_matrix, node_mask_tensor, tokens_tensor
from cbench.runtime.residual_pass import forward_resid
from cbench.runtime.run_result import RunResult
from cbench.runtime.weights import current_biases

if TYPE_CHECKING:
    from cbench.runtime.model_state import ModelState


def run(rt: ModelState, base, source=None, edge_mask=None, node_mask=None, ablation: str = "resample",
        reference=None, positional: bool = True, ablated: torch.Tensor | None = None,
        input_probe: bool = False, keep_acts: bool = False,
        input_interpolation: float | torch.Tensor | None = None) -> RunResult:
    """Outputs with each edge's contribution taken from this run where the mask is 1 and from
    the ablation where it is 0 (see the package docstring). Gradients flow to float masks.

    ``input_interpolation`` (alpha, scalar or ``[B]``): replace the ``input`` node's output
    by ``ablated + alpha * (clean - ablated)`` before anything reads it (EAP-IG-inputs).
    """
    tokens = tokens_tensor(rt, base)
    B = tokens.shape[0]
    em = edge_mask_tensor(rt, edge_mask, B)
    nm = node_mask_tensor(rt, node_mask, B)
    # an all-ones mask without gradient is no patch: take the exact unpatched path
    if em is not None and not em.requires_grad and bool((em == 1).all()):
        em = None
    if nm is not None and not nm.requires_grad and bool((nm == 1).all()):
        nm = None
    if input_interpolation is not None:  # = a node mask on ``input``
        nm = interpolate_input(rt, nm, input_interpolation)
    if em is not None or nm is not None:
        if ablated is None:
            ablated = ablated_outputs(rt, tokens, source, ablation, reference, positional)
        ablated = ablated.to(rt.dtype)
    else:
        ablated = None
    if em is None:  # node masks only: the residual-stream pass
        # TransformerLens's exact head arithmetic (a [B, P, H, d_head, D] product) only where a
        # run should equal the model's own forward to the bit; a mask being trained (subnetwork
        # probing) takes the per-head matrix product: the same values to float32, 10-60x cheaper
        exact = nm is None or not nm.requires_grad
        return forward_resid(rt, tokens, nm, ablated, input_probe=input_probe, keep_acts=keep_acts, exact=exact)
    M = mask_matrix(rt, em, nm)
    return masked_pass(rt, tokens, M, ablated, input_probe=input_probe, keep_acts=keep_acts)


def run_masks(rt: ModelState, base, edge_masks, source=None, ablation: str = "resample", reference=None,
              positional: bool = True, ablated: torch.Tensor | None = None, node_masks=None,
              chunk_size: int | None = None, start_slot: int | None = None,
              prefix: torch.Tensor | None = None, every_node: bool = False) -> torch.Tensor:
    """Outputs ``[M, B, P, V]`` for ``M`` edge masks ``[M, n_edges]`` on the same inputs, run
    as batches of (mask x example) rows; ``node_masks`` optional ``[M, n_forward]``.

    ``start_slot`` + ``prefix`` (node outputs ``[F, B, P, D]`` of a run whose nodes before
    that backward slot are what every mask would compute, e.g. the clean run when the masks
    differ only in edges into that slot or later ones): skip recomputing those nodes.
    ``every_node``: compute every node even where no row keeps an edge out of it (each row's
    outputs are then those of a batch that keeps every node, whatever else is in this one)."""
    tokens = tokens_tensor(rt, base)
    B, P = tokens.shape
    masks = edge_mask_tensor(rt, edge_masks)
    if masks.dim() == 1:
        masks = masks[None]
    n_masks = masks.shape[0]
    if node_masks is not None:
        node_masks = node_mask_tensor(rt, node_masks)
        if node_masks.dim() == 1:
            node_masks = node_masks[None].expand(n_masks, -1)
    if ablated is None:
        ablated = ablated_outputs(rt, tokens, source, ablation, reference, positional)
    repeated = _repeated_rows(masks, node_masks)
    if repeated is not None:  # each distinct mask runs once (circuits at several sizes often coincide)
        keep, index = repeated
        return run_masks(rt, tokens, masks[keep], ablated=ablated,
                         node_masks=None if node_masks is None else node_masks[keep], chunk_size=chunk_size,
                         start_slot=start_slot, prefix=prefix, every_node=every_node)[index]
    if chunk_size is None:
        chunk_size = max(1, 4096 // max(B, 1))
    outs = []
    for start in range(0, n_masks, chunk_size):
        mk = masks[start:start + chunk_size]
        c = mk.shape[0]
        nm = None if node_masks is None else node_masks[start:start + chunk_size]
        M = mask_matrix(rt, mk, nm)
        if M.dim() == 2:
            M = M[None]
        tok = tokens.repeat(c, 1)  # rows: mask-major, then example
        out = masked_pass(rt, tok, M, ablated, start_slot=start_slot, prefix=prefix, every_node=every_node).output
        outs.append(out.reshape(c, B, P, -1))
    return torch.cat(outs, 0)


def _repeated_rows(masks: torch.Tensor, node_masks: torch.Tensor | None):
    """``(keep, index)`` when some mask rows repeat: ``keep`` the first row of each distinct mask
    (in order), ``index`` each row's position in ``keep``; None when all differ or masks carry
    gradients."""
    if masks.shape[0] < 2 or masks.requires_grad or (node_masks is not None and node_masks.requires_grad):
        return None
    key = masks if node_masks is None else torch.cat([masks, node_masks.to(masks.dtype)], 1)
    uniq, inverse = torch.unique(key, dim=0, return_inverse=True)
    if uniq.shape[0] == key.shape[0]:
        return None
    n = key.shape[0]
    first = torch.full((uniq.shape[0],), n, dtype=torch.long).scatter_reduce(
        0, inverse, torch.arange(n), reduce="amin")
    order = torch.argsort(first)
    pos = torch.empty_like(order)
    pos[order] = torch.arange(order.shape[0])
    return first[order], pos[inverse]


def edge_mask_gradient(rt: ModelState, base, metric_fn: Callable[[torch.Tensor], torch.Tensor], source=None,
                       edge_mask=None, node_mask=None, ablation: str = "resample", reference=None,
                       positional: bool = True, ablated: torch.Tensor | None = None):
    """``(d metric / d edge_mask [n_edges], metric value)`` at ``edge_mask`` (default all ones).

    ``metric_fn(outputs) -> scalar`` (e.g. a mean loss). At the all-ones mask this is the EAP
    score with the opposite sign: sum over examples and positions of
    ``(a_src - a'_src) . d metric / d input[dst]``.
    """
    em = edge_mask_tensor(rt, edge_mask) if edge_mask is not None else torch.ones(rt.n_edges, dtype=rt.dtype, device=rt.device)
    em = em.detach().clone().requires_grad_(True)
    with torch.enable_grad():
        res = run(rt, base, source, em, node_mask, ablation, reference, positional, ablated)
        value = metric_fn(res.output)
        (grad,) = torch.autograd.grad(value, em)
    return grad, float(value.detach())


def masked_pass(rt: ModelState, tokens, M, ablated, input_probe=False, keep_acts=False,
                start_slot: int | None = None, prefix: torch.Tensor | None = None,
                every_node: bool = False) -> RunResult:
    """The masked pass. ``M``: [F, K] or [C, F, K] (row c for examples c*B/C ... ).
    ``ablated``: [F, B|B/C|1, P|1, D]. With ``start_slot``/``prefix`` ([n_prefix, B/C, P, D],
    the outputs of the nodes before that slot, shared by all C groups) the pass starts there."""
    if M is None and not input_probe and start_slot is None:
        return forward_resid(rt, tokens, None, None, keep_acts=keep_acts)
    B, P = tokens.shape
    L, H = rt.n_layers, rt.n_heads
    D = rt.d_model
    F = rt.n_forward
    C = M.shape[0] if (M is not None and M.dim() == 3) else 1
    n = B // C
    grouped = M is not None and M.dim() == 3
    abl = None
    if ablated is not None:
        if ablated.shape[1] == B and grouped and C > 1:
            abl = ablated.expand(-1, -1, P, -1).reshape(F, C, n, P, D)
        else:
            abl = ablated.expand(-1, n if grouped else B, P, -1)
    W = None if M is None else (1.0 - M) * rt._real
    biases = current_biases(rt)

    if start_slot is None:
        layer0, part0, n_prefix = 0, "attn", 1
        shared = None
        chunks = _NodeOutputs(rt.n_forward)
        chunks.append(embed(rt, tokens)[None])
    else:
        layer0, part0, n_prefix = start_of_slot(rt, start_slot)
        shared = prefix[:n_prefix]  # [n_prefix, n, P, D], the same for every group
        chunks = _NodeOutputs(rt.n_forward - n_prefix)
    probe = None
    if input_probe:
        probe = torch.zeros(rt.n_backward, B, P, D, dtype=rt.dtype, device=rt.device, requires_grad=True)

    def mix(Mpart, acts, per_group: bool):
        """sum_f Mpart[.., f, k] * acts[f] -> [B, P, k, D]."""
        k = Mpart.shape[-1]
        if Mpart.dim() == 2:
            if acts.shape[1] != B:  # shared prefix without groups
                acts = acts.expand(-1, B, -1, -1)
            return sources_into(Mpart, acts)
        if per_group:
            a = acts.reshape(acts.shape[0], C, n, P, D)
            return grouped_sources_into(Mpart, a).reshape(B, P, k, D)
        return torch.einsum("cfk,fnpd->cnpkd", Mpart, acts).reshape(B, P, k, D)

    # Batches of masks that differ from their first row in few places (ACDC candidates,
    # activation patching): the shared part of every input is computed once per example
    # and only the differing columns per mask row.
    lowrank = grouped and C > 1 and abl is not None and abl.dim() == 4 and probe is None
    if lowrank:
        M0 = M[0]
        DM = M - M0
        W0 = (1.0 - M0) * rt._real
        diff_cols = (DM != 0).any(0).any(0)  # [K]

    def ncols(cols) -> int:
        return cols.stop - cols.start if isinstance(cols, slice) else int(cols.numel())

    def common_terms(cols, n_src: int):
        """``cols``' width, the shared sources' count, the terms every row shares ``[1, n, P, k, D]``
        and the rows' own source outputs (None when there are none)."""
        n_sh = 0 if shared is None else shared.shape[0]
        x = sources_into(W0[:, cols], abl.expand(-1, n, -1, -1))
        if shared is not None:
            x = x + sources_into(M0[:n_sh, cols], shared)
        return ncols(cols), n_sh, x[None], (chunks.first(n_src - n_sh) if chunks else None)

    def gather_lowrank(cols, n_src: int) -> torch.Tensor:
        if classes is not None:
            return gather_classes(cols, n_src)
        k, n_sh, x, own = common_terms(cols, n_src)
        if own is not None and own.shape[0]:
            a = own.reshape(own.shape[0], C, n, P, D)
            x = x + grouped_sources_into(M[:, n_sh:n_src, cols], a)
        else:
            x = x.expand(C, -1, -1, -1, -1)
        idx = torch.nonzero(diff_cols[cols]).flatten()
        if idx.numel():
            sparse = few_differences(DM[:, :, cols]) if not M.requires_grad else None
            if sparse is not None:  # the same sums, of the non-zero terms only
                return add_differences(x, sparse, abl.expand(-1, n, -1, -1), shared, n_sh).reshape(B, P, k, D)
            dm = DM[:, :, cols][:, :, idx]  # [C, F, j]
            d = -torch.einsum("cfj,fnpd->cnpjd", dm, abl.expand(-1, n, -1, -1) * rt._one)
            if shared is not None:
                d = d + torch.einsum("cfj,fnpd->cnpjd", dm[:, :n_sh], shared)
            x = x.index_add(3, idx, d)
        return x.reshape(B, P, k, D)

    def gather_classes(cols, n_src: int) -> torch.Tensor:
        """:func:`gather_lowrank` of one row per class of equal inputs (``[U * n, P, k, D]``)."""
        reps, sparse = classes.refine(cols)
        U = reps.shape[0]
        k, n_sh, x, own = common_terms(cols, n_src)
        if own is not None and own.shape[0]:
            a = own.reshape(own.shape[0], C, n, P, D)
            Mr = M if U == C else M.index_select(0, reps)  # U == C: every row its own class, in order
            x = x + grouped_sources_into(Mr[:, n_sh:n_src, cols], a if U == C else a.index_select(1, reps))
        else:
            x = x.expand(U, -1, -1, -1, -1)
        if sparse is not None:
            x = add_differences(x, sparse, abl.expand(-1, n, -1, -1), shared, n_sh)
        return x.reshape(U * n, P, k, D)

    def rows(out: torch.Tensor, dim: int) -> torch.Tensor:
        """Outputs of one row per class (``U * n`` along ``dim``) as every row's (``B``)."""
        if classes is None or classes.distinct():
            return out
        shape = list(out.shape)
        split = out.reshape(*shape[:dim], -1, n, *shape[dim + 1:]).index_select(dim, classes.row_class())
        return split.reshape(*shape[:dim], B, *shape[dim + 1:])

    def gather(cols, n_src: int) -> torch.Tensor:
        """Inputs ``[B, P, k, D]`` of the destinations in ``cols`` (a slice or an index tensor)
        from the first n_src nodes."""
        if lowrank:
            return gather_lowrank(cols, n_src)
        k = ncols(cols)
        n_sh = 0 if shared is None else shared.shape[0]
        own = chunks.first(n_src - n_sh) if chunks else None
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
                    x = x + grouped_sources_into(Wc, abl).reshape(B, P, k, D)
                else:
                    x = x + mix(Wc, abl, per_group=False)
        if probe is not None:
            x = x + probe[cols].permute(1, 2, 0, 3)
        return x

    # Nodes whose outgoing edges are all masked to 0 in every row (and no gradient or
    # activations are asked for) contribute nothing of their own: they are not computed.
    alive = None
    if M is not None and probe is None and not keep_acts and not M.requires_grad and not every_node:
        alive = (M != 0).any(-1)
        if alive.dim() == 2:
            alive = alive.any(0)
        alive = alive.tolist()
    # Single-edge masks (activation patching): rows whose inputs so far are equal (their masks
    # differ only at later destinations) have equal node outputs, computed once
    classes = None
    if lowrank and not keep_acts and not M.requires_grad and (alive is None or all(alive)):
        entries = few_differences(DM)
        if entries is not None:
            classes = _RowClasses(C, entries, M.shape[-1])

    for layer in range(layer0, L):
        base_col = layer * rt.per_layer_bwd
        n_src = 1 + layer * rt.per_layer_fwd
        if not (layer == layer0 and part0 == "mlp"):
            # with a post-norm every head's share depends on all heads of its layer: all computed
            live = (list(range(H)) if alive is None or rt.post_norm
                    else [h for h in range(H) if alive[n_src + h]])
            if len(live) == H:
                x = gather(slice(base_col, base_col + 3 * H), n_src) + biases.attn[layer]
                chunks.append(rows(post_heads(rt, layer, attention(rt, layer, x)), 1))  # [H, B, P, D]
            else:
                heads = torch.zeros(H, B, P, D, dtype=rt.dtype, device=rt.device)
                if live:
                    idx = torch.tensor(live, device=rt.device)
                    cols = torch.cat([base_col + idx, base_col + H + idx, base_col + 2 * H + idx])
                    x = gather(cols, n_src) + biases.attn[layer]
                    heads = heads.index_copy(0, idx, attention(rt, layer, x, heads=idx))
                chunks.append(heads)
        if rt.has_mlp:
            col = base_col + 3 * H
            n_src_mlp = n_src if rt.parallel else n_src + H
            f_mlp = 1 + layer * rt.per_layer_fwd + H
            if alive is not None and not alive[f_mlp]:
                chunks.append(torch.zeros(1, B, P, D, dtype=rt.dtype, device=rt.device))
            else:
                xm = gather(slice(col, col + 1), n_src_mlp)[:, :, 0] + biases.mlp[layer]
                chunks.append(rows(mlp(rt, layer, xm)[None], 1))
    col = L * rt.per_layer_bwd
    xl = gather(slice(col, col + 1), F)[:, :, 0] + biases.logits
    out = rows(unembed(rt, xl), 0)
    acts = None
    if keep_acts:
        acts = chunks.first(len(chunks))
        if shared is not None:
            sh = shared if shared.shape[1] == B else shared.repeat(1, C, 1, 1)
            acts = torch.cat([sh, acts], 0)
    return RunResult(out, acts, probe)


def few_differences(dm: torch.Tensor):
    """The non-zero entries of ``dm`` ``[C, F, k]`` (mask rows minus a batch's first row) as
    ``(c, f, j, sign, group, pairs)`` when each is +1 or -1 and no (row, destination) pair has more
    than two (single-edge masks: activation patching, ACDC's candidates); else None. ``group``
    numbers each entry's (c, j) pair, ``pairs`` lists those pairs ``[U, 2]``."""
    nz = torch.nonzero(dm)  # (c, f, j), lexicographic
    if not nz.shape[0]:
        return None
    vals = dm[nz[:, 0], nz[:, 1], nz[:, 2]]
    if not bool((vals.abs() == 1).all()):
        return None
    key = nz[:, 0] * dm.shape[2] + nz[:, 2]
    pairs_key, group, counts = torch.unique(key, return_inverse=True, return_counts=True)
    if int(counts.max()) > 2:
        return None
    pairs = torch.stack([pairs_key // dm.shape[2], pairs_key % dm.shape[2]], 1)
    return nz[:, 0], nz[:, 1], nz[:, 2], vals, group, pairs


def add_differences(x: torch.Tensor, sparse, abl: torch.Tensor, shared: torch.Tensor | None, n_sh: int) -> torch.Tensor:
    """``x [C, n, P, k, D]`` plus, for each (row c, destination j) with non-zero entries of the mask
    difference ``dm``, ``-sum_f dm[c, f, j] abl[f] + sum_(f < n_sh) dm[c, f, j] shared[f]``: what
    the dense update adds (``-einsum(dm, abl) + einsum(dm, shared)``, index-added), to the bit. Each
    sum has at most two non-zero terms of +-1 times a value, which are exact and whose sum does not
    depend on the order; the dense update adds exact zeros everywhere else."""
    _c, f, _j, sign, group, pairs = sparse
    U = pairs.shape[0]
    terms = sign[:, None, None, None] * abl[f]  # [N, n, P, D], exact
    a = terms.new_zeros((U, *terms.shape[1:])).index_add_(0, group, terms)
    d = -a
    if shared is not None:
        inside = f < n_sh
        if bool(inside.any()):
            st = sign[inside][:, None, None, None] * shared[f[inside]]
            s = st.new_zeros((U, *st.shape[1:])).index_add_(0, group[inside], st)
            d = d + s
    x = x.contiguous() if x.is_contiguous() and x.stride(0) != 0 else x.clone(memory_format=torch.contiguous_format)
    ci, ji = pairs[:, 0], pairs[:, 1]
    x[ci, :, :, ji] = x[ci, :, :, ji] + d
    return x


class _RowClasses:
    """The rows of a batch of masks (:func:`few_differences`' entries) in classes of equal node
    outputs so far: all rows start in one class (the same shared prefix and ablated values); a
    gather splits a class wherever its rows' masks differ in the gathered destinations. A class's
    inputs are computed for one of its rows (the first), which gives every row of it the same
    values as computing each row on its own: no operation mixes rows."""

    def __init__(self, C: int, entries, K: int):
        c, f, j, s, _group, _pairs = entries
        self.K = K
        self.by_row: dict[int, list[tuple[int, int, float]]] = {}
        for ci, fi, ji, si in zip(c.tolist(), f.tolist(), j.tolist(), s.tolist()):
            self.by_row.setdefault(ci, []).append((fi, ji, si))
        self.cls = [0] * C
        self.sign_dtype, self.device = s.dtype, c.device

    def refine(self, cols):
        """``(representatives [U], their difference entries in cols or None)`` after splitting
        the classes by the rows' mask differences in ``cols`` (a slice or an index tensor)."""
        if isinstance(cols, slice):
            pos = {j: j - cols.start for j in range(cols.start, cols.stop)}
        else:
            pos = {int(j): i for i, j in enumerate(cols.tolist())}
        keys: dict[tuple, int] = {}
        reps: list[int] = []
        cls = []
        for row, old in enumerate(self.cls):
            key = (old, tuple(e for e in self.by_row.get(row, ()) if e[1] in pos))
            if key not in keys:
                keys[key] = len(reps)
                reps.append(row)
            cls.append(keys[key])
        self.cls = cls
        found = [(u, f, pos[j], s) for u, row in enumerate(reps) for f, j, s in self.by_row.get(row, ()) if j in pos]
        reps_t = torch.tensor(reps, dtype=torch.long, device=self.device)
        if not found:
            return reps_t, None
        u, f, j, s = (torch.tensor(v, device=self.device) for v in zip(*found))
        k = max(pos.values()) + 1
        pairs_key, group = torch.unique(u * k + j, return_inverse=True)
        pairs = torch.stack([pairs_key // k, pairs_key % k], 1)
        return reps_t, (u, f, j, s.to(self.sign_dtype), group, pairs)

    def distinct(self) -> bool:
        """Whether every row is a class of its own (then the representatives are the rows, in order)."""
        return len(set(self.cls)) == len(self.cls)

    def row_class(self) -> torch.Tensor:
        return torch.tensor(self.cls, dtype=torch.long, device=self.device)


class _NodeOutputs:
    """The node outputs a masked pass has computed so far ([k, B, P, D] blocks, in node order),
    read back stacked by every later gather. Without autograd they are written once into one
    buffer of ``capacity`` nodes and a gather reads a prefix of it (no copy); with autograd (mask
    learning) the blocks are concatenated per gather, since writing into a buffer a gradient pass
    has read would invalidate it. Either way the values are the same."""

    def __init__(self, capacity: int):
        self.buffered = not torch.is_grad_enabled()
        self.capacity = capacity
        self.blocks: list[torch.Tensor] = []
        self.buffer: torch.Tensor | None = None
        self.n = 0

    def __len__(self) -> int:
        return self.n

    def append(self, x: torch.Tensor) -> None:
        k = x.shape[0]
        if not self.buffered:
            self.blocks.append(x)
        else:
            if self.buffer is None:
                self.buffer = x.new_empty((self.capacity, *x.shape[1:]))
            self.buffer[self.n:self.n + k] = x
        self.n += k

    def first(self, count: int) -> torch.Tensor:
        """The first ``count`` node outputs, stacked ``[count, B, P, D]``."""
        if self.buffered:
            return self.buffer[:count]
        return (torch.cat(self.blocks, 0) if len(self.blocks) > 1 else self.blocks[0])[:count]


def start_of_slot(rt: ModelState, slot: int) -> tuple[int, str, int]:
    """(layer, part, n_prefix) where a pass that only changes inputs of backward ``slot`` and
    later must start: part is ``attn``, ``mlp`` or ``logits``; n_prefix nodes come before."""
    node, _qkv = rt.graph.backward_slots[slot]
    n = rt.graph.node(node)
    if n.kind == "logits":
        return rt.n_layers, "logits", rt.n_forward
    base = 1 + n.layer * rt.per_layer_fwd
    if n.kind == "head":
        return n.layer, "attn", base
    return n.layer, "mlp", base if rt.parallel else base + rt.n_heads
