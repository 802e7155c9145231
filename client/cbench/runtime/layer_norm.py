"""Layer norms for the input-gradient fast path: which norm the model uses throughout
(:func:`ln_kind`) and its vector-Jacobian product (:func:`ln_vjp`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from cbench.runtime.circuit_runtime import CircuitRuntime

SUPPORTED = ("Identity", "LayerNorm", "LayerNormPre", "RMSNorm", "RMSNormPre")


def ln_kind(rt: CircuitRuntime) -> str | None:
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
