"""Interchange interventions on whole components (attention heads, MLPs) through TransformerLens
hooks: the straightforward reference that every faster path is checked against, and what
``cbench verify`` uses to recompute a released model's IIA and SIIA independently of training.

A *component* is a canonical graph node that writes to the residual stream: ``a{L}.h{H}`` (an
attention head, interchanged at its ``hook_z`` slice; equivalent to interchanging its
``hook_result`` since the head's output is linear in z) or ``m{L}`` (an MLP, interchanged at
``hook_mlp_out``). Components are indexed in :func:`components` order (per layer: heads, then
the MLP). ``masks[node]`` is True or a ``[batch]`` bool tensor: per example, whether the node takes
its activation from the source input.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

from cbench.artifacts.transformer_lens_adapter import mlp_out_hook, z_hook

_HEAD = re.compile(r"^a(\d+)\.h(\d+)$")
_MLP = re.compile(r"^m(\d+)$")


def components(n_layers: int, n_heads: int, has_mlp: bool = True) -> list[str]:
    """Every component of a model, in mask-column order: per layer its heads, then its MLP."""
    out = []
    for layer in range(n_layers):
        out += [f"a{layer}.h{h}" for h in range(n_heads)]
        if has_mlp:
            out.append(f"m{layer}")
    return out


def model_components(model) -> list[str]:
    return components(model.cfg.n_layers, model.cfg.n_heads, not model.cfg.attn_only)


@dataclass(frozen=True)
class Site:
    """Where a component's activation lives: a hook name and, for heads, the head index."""

    hook: str
    head: int | None


def site_of(node: str) -> Site:
    m = _HEAD.match(node)
    if m:
        return Site(z_hook(int(m[1])), int(m[2]))
    m = _MLP.match(node)
    if m:
        return Site(mlp_out_hook(int(m[1])), None)
    raise ValueError(f"{node!r} is not an attention head or MLP node")


def source_activations(model, source: torch.Tensor, nodes) -> dict[str, torch.Tensor]:
    """Activations of ``source`` at every hook the given nodes need (no gradients)."""
    hooks = {site_of(n).hook for n in nodes}
    with torch.no_grad():
        _, cache = model.run_with_cache(source, names_filter=lambda name: name in hooks)
    return {h: cache[h] for h in hooks}


def run_interchanged(model, base: torch.Tensor, source_cache: dict[str, torch.Tensor],
                     masks: dict[str, torch.Tensor | bool]) -> torch.Tensor:
    """Reference implementation through TransformerLens hooks: ``model`` on ``base`` with each node
    in ``masks`` interchanged from the source (``masks[node]`` True or a ``[batch]`` bool tensor)."""
    by_hook: dict[str, list[tuple[int | None, torch.Tensor | bool]]] = {}
    for node, mask in masks.items():
        site = site_of(node)
        by_hook.setdefault(site.hook, []).append((site.head, mask))

    def make_hook(hook_name):
        entries = by_hook[hook_name]
        src = source_cache[hook_name]

        def hook(act, hook=None):
            out = act
            for head, mask in entries:
                if isinstance(mask, bool):
                    if not mask:
                        continue
                    sel = torch.ones(act.shape[0], dtype=torch.bool, device=act.device)
                else:
                    sel = mask.to(torch.bool)
                if head is None:
                    out = torch.where(sel.view(-1, *([1] * (act.dim() - 1))), src, out)
                else:
                    patched = torch.where(sel.view(-1, 1, 1), src[:, :, head], out[:, :, head])
                    out = torch.cat([out[:, :, :head], patched.unsqueeze(2), out[:, :, head + 1:]], dim=2)
            return out

        return hook

    return model.run_with_hooks(base, fwd_hooks=[(h, make_hook(h)) for h in by_hook])
