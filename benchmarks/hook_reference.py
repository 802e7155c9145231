"""A straightforward hook-based reference for edge patching, ACDC and EAP-IG.

This is the way the original ACDC did it: a forward pass with TransformerLens hooks, where every
patched edge is one Python-level operation in the hook of its destination (the destination's
input minus the edge's contribution in this run plus its ablated contribution). It exists to
check :mod:`cbench.runtime` (tests use it as the correctness oracle) and to time the batched
implementations against it (``bench_discovery.py``). It is deliberately simple, not fast.
"""

from __future__ import annotations

import torch

from cbench import transformer_lens_adapter as tla
from cbench.graph import Graph


def node_output_caches(model, tokens) -> dict[str, torch.Tensor]:
    """Every canonical node's output on an unpatched run, by node name ([B, P, D])."""
    g = Graph.from_config(model.cfg)
    names = {tla.resid_pre_hook(0)} | {tla.head_output_hook(l) for l in range(g.n_layers)}
    if g.has_mlp:
        names |= {tla.mlp_out_hook(l) for l in range(g.n_layers)}
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, names_filter=lambda n: n in names)
    out = {}
    for node in g.forward_nodes:
        hook, head = tla.node_output_hook(node)
        out[node] = cache[hook] if head is None else cache[hook][:, :, head]
    return out


def hooked_patched_run(model, tokens, ablated: dict[str, torch.Tensor], edges_weights: dict[str, float],
                       grad_targets: dict | None = None, input_override: torch.Tensor | None = None):
    """Run ``model`` on ``tokens`` where each edge ``e`` with weight ``w = edges_weights[e]``
    contributes ``w * current + (1 - w) * ablated`` to its destination (edges not listed: 1).

    ``ablated``: node name -> [B|1, P|1, D] ablated output. ``grad_targets`` (optional dict) is
    filled with destination-input tensors (retain_grad) keyed by (node, qkv) for EAP-IG.
    ``input_override``: replaces ``blocks.0.hook_resid_pre`` (the input node's output).
    """
    g = Graph.from_config(model.cfg)
    current: dict[str, torch.Tensor] = {}
    fwd_hooks = []

    def save_input(x, hook):
        if input_override is not None:
            x = input_override
        current["input"] = x
        return x

    fwd_hooks.append((tla.resid_pre_hook(0), save_input))
    for layer in range(g.n_layers):
        def save_heads(x, hook, layer=layer):
            for h in range(g.n_heads):
                current[f"a{layer}.h{h}"] = x[:, :, h]
            return x
        fwd_hooks.append((tla.head_output_hook(layer), save_heads))
        if g.has_mlp:
            def save_mlp(x, hook, layer=layer):
                current[f"m{layer}"] = x
                return x
            fwd_hooks.append((tla.mlp_out_hook(layer), save_mlp))

    by_dst: dict[tuple[str, str | None], list[tuple[str, float]]] = {}
    for name, w in edges_weights.items():
        e = g.edge(name)
        by_dst.setdefault((e.dst, e.qkv), []).append((e.src, w))

    def patch(x, dst, qkv, head):
        # one operation per patched edge, the ACDC way
        for src, w in by_dst.get((dst, qkv), []):
            delta = (1.0 - w) * (current[src] - ablated[src])
            if head is None:
                x = x - delta
            else:
                x = x.clone()
                x[:, :, head] = x[:, :, head] - delta
        return x

    def track(x, key):
        if grad_targets is not None:
            x = x + 0.0
            x.retain_grad()
            grad_targets[key] = x
        return x

    for layer in range(g.n_layers):
        for qkv in ("q", "k", "v"):
            def hq(x, hook, layer=layer, qkv=qkv):
                for h in range(g.n_heads):
                    x = patch(x, f"a{layer}.h{h}", qkv, h)
                return track(x, (layer, qkv))
            fwd_hooks.append((tla.qkv_input_hook(layer, qkv), hq))
        if g.has_mlp:
            fwd_hooks.append((tla.mlp_in_hook(layer),
                              lambda x, hook, layer=layer: track(patch(x, f"m{layer}", None, None), f"m{layer}")))
    fwd_hooks.append((tla.final_resid_hook(g.n_layers), lambda x, hook: track(patch(x, "logits", None, None), "logits")))
    return model.run_with_hooks(tokens, fwd_hooks=fwd_hooks)


def _grad_of(g: Graph, targets: dict, dst: str, qkv: str | None) -> torch.Tensor:
    if dst == "logits" or qkv is None:
        return targets[dst].grad
    node = g.node(dst)
    return targets[(node.layer, qkv)].grad[:, :, node.head]


def reference_acdc(model, base, source, metric, threshold: float):
    """Sequential ACDC with one hooked forward pass per candidate edge (the original way).

    Same visiting order and rule as :mod:`cbench.discovery.acdc`. Returns (scores dict,
    kept edge set)."""
    g = Graph.from_config(model.cfg)
    ablated = node_output_caches(model, source)
    removed: dict[str, float] = {}
    with torch.no_grad():
        m_cur = float(metric(hooked_patched_run(model, base, ablated, removed)))
    scores = {}
    dsts = list(reversed(g.backward_slots))
    for node, qkv in dsts:
        cands = sorted((e for e in g.edges if e.dst == node and e.qkv == qkv), key=lambda e: -e.forward)
        if node != "logits":
            outgoing = [e.name for e in g.edges if e.src == node]
            if all(n in removed for n in outgoing):
                for e in cands:
                    removed[e.name] = 0.0
                    scores[e.name] = 0.0
                continue
        for e in cands:
            trial = dict(removed)
            trial[e.name] = 0.0
            with torch.no_grad():
                m_new = float(metric(hooked_patched_run(model, base, ablated, trial)))
            delta = m_new - m_cur
            scores[e.name] = delta
            if delta < threshold:
                removed = trial
                m_cur = m_new
    kept = {e.name for e in g.edges if e.name not in removed}
    return scores, kept


def reference_eap_ig_inputs(model, base, source, metric, steps: int = 5):
    """EAP-IG (inputs) with hooks: one hooked forward and backward pass per step, then one
    Python-level product per edge. Returns the scores dict (loss increase convention)."""
    g = Graph.from_config(model.cfg)
    clean = node_output_caches(model, base)
    ablated = node_output_caches(model, source)
    grads: dict = {}
    for k in range(0, steps):  # alpha = k / Z, k = 0 .. Z-1, as in the public EAP-IG code
        alpha = k / steps
        override = (ablated["input"] + alpha * (clean["input"] - ablated["input"])).requires_grad_(True)
        targets: dict = {}
        out = hooked_patched_run(model, base, ablated, {}, grad_targets=targets, input_override=override)
        metric(out).backward()
        for node, qkv in g.backward_slots:
            gr = _grad_of(g, targets, node, qkv).detach()
            grads[(node, qkv)] = grads.get((node, qkv), 0) + gr / steps
        model.zero_grad(set_to_none=True)
    scores = {}
    for e in g.edges:
        diff = clean[e.src] - ablated[e.src]
        scores[e.name] = -float((diff * grads[(e.dst, e.qkv)]).sum())
    return scores
