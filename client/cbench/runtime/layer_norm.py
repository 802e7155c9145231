"""Layer norms for the input-gradient fast path: which norm the model uses throughout
(:func:`ln_kind`), its vector-Jacobian product (:func:`ln_vjp`), and the same product for the
gradients of q/k/v projections mapped back to the norm's input (:func:`projected_ln_vjp`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from cbench.runtime.model_state import ModelState

SUPPORTED = ("Identity", "LayerNorm", "LayerNormPre", "RMSNorm", "RMSNormPre")


def ln_kind(rt: ModelState) -> str | None:
    """The one norm class every ln1, ln2 and ln_final of the model is, if supported, else None."""
    names = {type(blk.ln1).__name__ for blk in rt.model.blocks}
    names |= {type(getattr(rt.model, "ln_final", torch.nn.Identity())).__name__}
    if rt.has_mlp:
        names |= {type(blk.ln2).__name__ for blk in rt.model.blocks}
    if len(names) != 1:
        return None
    kind = names.pop()
    return kind if kind in SUPPORTED else None


def ln_vjp(ln, x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
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


def projected_ln_vjp(ln, x: torch.Tensor, g: torch.Tensor, w_rows: torch.Tensor,
                     out: torch.Tensor | None = None) -> torch.Tensor:
    """``ln_vjp(ln, x, g @ w_rows^T)`` for projection gradients ``g [k, N, dh]`` (one row block
    per head slot, ``N`` = batch x positions), projection weights ``w_rows [k, D, dh]`` and the
    norm's input ``x [N, D]``; returns ``[k, N, D]`` (into ``out`` when given).

    The same numbers as mapping first and then :func:`ln_vjp`, in three passes over the result
    instead of ten: the norm's weight folds into ``w_rows`` and its 1/scale into ``g`` (both
    small), the one matrix product writes ``g w / scale``, and the two corrections (its mean
    along ``xh`` and, for LayerNorm, its plain mean) are one read and one or two in-place
    updates."""
    kind = type(ln).__name__
    if kind == "Identity":
        return torch.bmm(g, w_rows.transpose(1, 2), out=out)
    W = w_rows * ln.w[:, None] if kind in ("LayerNorm", "RMSNorm") else w_rows  # [k, D, dh]
    D = x.shape[-1]
    xc = x - x.mean(-1, keepdim=True) if kind.startswith("LayerNorm") else x
    scale = (xc.pow(2).mean(-1, keepdim=True) + ln.eps).sqrt()  # [N, 1]
    xh = xc / scale
    gs = g / scale  # [k, N, dh]
    out = torch.bmm(gs, W.transpose(1, 2), out=out)  # g w / scale
    along = torch.einsum("knd,nd->kn", out, xh) / D  # mean(g w xh) / scale
    out.addcmul_(along[..., None], xh, value=-1.0)
    if kind.startswith("LayerNorm"):
        out.sub_(gs @ (W.sum(1)[..., None] / D))  # mean(g w) / scale
    return out
