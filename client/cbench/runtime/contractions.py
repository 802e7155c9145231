"""The passes' contractions as one ``bmm`` each: the same product that ``torch.einsum`` computes
for each of these subscripts (it permutes and reshapes its operands into one batched matrix
product), with the same operands, so the values, the output's layout and the gradients are
those of the ``einsum`` to the bit (a contraction over a dimension of size 1, which ``einsum``
computes as a product, is left to it); but without its many intermediate views, each of which is
also a node of the autograd graph. On the benchmark's small models a pass is mostly such per
operation overhead: a training step of a mask-learning method spends about half its time on it.
``tests/test_contractions.py`` checks each against its ``einsum``, forward and backward."""

from __future__ import annotations

import torch


def sources_into(m: torch.Tensor, acts: torch.Tensor) -> torch.Tensor:
    """``einsum("fk,fbpd->bpkd", m, acts)``: each destination's input, the mask-weighted sum of the
    source outputs ``acts [f, b, p, d]`` (``m [f, k]``)."""
    f, k = m.shape
    _f, b, p, d = acts.shape
    if f == 1:
        return torch.einsum("fk,fbpd->bpkd", m, acts)
    out = torch.bmm(m.t().unsqueeze(0), acts.reshape(1, f, b * p * d))
    return out.view(k, b, p, d).permute(1, 2, 0, 3)


def grouped_sources_into(m: torch.Tensor, acts: torch.Tensor) -> torch.Tensor:
    """``einsum("cfk,fcnpd->cnpkd", m, acts)``: :func:`sources_into` with a mask per group ``c``
    of ``n`` examples (``m [c, f, k]``, ``acts [f, c, n, p, d]``)."""
    c, f, k = m.shape
    _f, _c, n, p, d = acts.shape
    if f == 1:
        return torch.einsum("cfk,fcnpd->cnpkd", m, acts)
    out = torch.bmm(m.transpose(1, 2), acts.transpose(0, 1).reshape(c, f, n * p * d))
    return out.view(c, k, n, p, d).permute(0, 2, 3, 1, 4)


def per_head_project(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``einsum("bphd,hde->bphe", x, w)``: each head's projection of its own input."""
    if x.shape[-1] == 1:
        return torch.einsum("bphd,hde->bphe", x, w)
    return _per_head(x.permute(2, 0, 1, 3), w).permute(1, 2, 0, 3)


def shared_project(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``einsum("bpd,hde->bphe", x, w)``: every head's projection of one input."""
    b, p, d = x.shape
    h, _d, e = w.shape
    if d == 1:
        return torch.einsum("bpd,hde->bphe", x, w)
    out = torch.bmm(x.reshape(1, b * p, d), w.permute(1, 0, 2).reshape(1, d, h * e))
    return out.view(b, p, h, e)


def heads_out(z: torch.Tensor, w_o: torch.Tensor) -> torch.Tensor:
    """``einsum("bhpe,hed->hbpd", z, w_o)``: each head's output from its values ``z``."""
    if z.shape[-1] == 1:
        return torch.einsum("bhpe,hed->hbpd", z, w_o)
    return _per_head(z.permute(1, 0, 2, 3), w_o)


def _per_head(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``[h, b, p, d] x [h, d, e] -> [h, b, p, e]``: one matrix product per head, as ``einsum``
    batches it (the head first, the examples and positions as the rows)."""
    h, b, p, d = x.shape
    return torch.bmm(x.reshape(h, b * p, d), w).view(h, b, p, w.shape[-1])
