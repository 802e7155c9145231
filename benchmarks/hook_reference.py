"""A straightforward hook-based reference for edge patching, ACDC and EAP-IG.

This is the way the original ACDC did it: a forward pass with TransformerLens hooks, where every
patched edge is one Python-level operation in the hook of its destination (the destination's
input minus the edge's contribution in this run plus its ablated contribution). It exists to
check :mod:`cbench.runtime` (tests use it as the correctness oracle) and to time the batched
implementations against it (``bench_discovery.py``). It is deliberately simple, not fast.
"""

from __future__ import annotations

import torch

from cbench.artifacts import transformer_lens_adapter as tla
from cbench.graph.graph import Graph


def post_norm(model) -> bool:
    """Whether ``model`` normalizes its attention output (Gemma-2's ``ln1_post``): a head's output
    is then its share ``w * result_h / scale`` of ``ln1_post`` (docs/real-models.md)."""
    return bool(getattr(model.cfg, "use_normalization_before_and_after", False))


def post_scale_hook(layer: int) -> str:
    return f"blocks.{layer}.ln1_post.hook_scale"


def head_shares(model, layer: int, result: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """Each head's share of ``ln1_post`` from ``hook_result [B, P, H, D]`` and the norm's
    ``hook_scale [B, P, 1]`` (TransformerLens's RMSNorm arithmetic, per head)."""
    return (result / scale[:, :, None]).to(result.dtype) * model.blocks[layer].ln1_post.w


def head_output_hooks(model, layer: int, fn) -> list:
    """Forward hooks that apply ``fn`` to layer ``layer``'s per-head outputs ``[B, P, H, D]``
    (``fn(x, hook)`` returns their replacement): on ``hook_result``, or, with a post-norm, on
    the heads' shares of ``ln1_post``, whose sum then replaces ``hook_attn_out`` (no b_O)."""
    if not post_norm(model):
        return [(tla.head_output_hook(layer), fn)]
    saved: dict = {}

    def save(x, hook):
        saved["result"] = x
        return x

    def scale(x, hook):
        saved["scale"] = x
        return x

    def attn_out(x, hook):
        return fn(head_shares(model, layer, saved["result"], saved["scale"]), hook).sum(2)

    return [(tla.head_output_hook(layer), save), (post_scale_hook(layer), scale),
            (f"blocks.{layer}.hook_attn_out", attn_out)]


def node_output_caches(model, tokens) -> dict[str, torch.Tensor]:
    """Every canonical node's output on an unpatched run, by node name ([B, P, D])."""
    g = Graph.from_config(model.cfg)
    names = {tla.resid_pre_hook(0)} | {tla.head_output_hook(l) for l in range(g.n_layers)}
    if g.has_mlp:
        names |= {tla.mlp_out_hook(l) for l in range(g.n_layers)}
    if post_norm(model):
        names |= {post_scale_hook(l) for l in range(g.n_layers)}
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, names_filter=lambda n: n in names)
    out = {}
    for node in g.forward_nodes:
        hook, head = tla.node_output_hook(node)
        if head is None:
            out[node] = cache[hook]
        elif post_norm(model):
            layer = g.node(node).layer
            with torch.no_grad():
                out[node] = head_shares(model, layer, cache[hook], cache[post_scale_hook(layer)])[:, :, head]
        else:
            out[node] = cache[hook][:, :, head]
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
    results: dict[int, torch.Tensor] = {}
    for layer in range(g.n_layers):
        def save_heads(x, hook, layer=layer):
            results[layer] = x
            if not post_norm(model):
                for h in range(g.n_heads):
                    current[f"a{layer}.h{h}"] = x[:, :, h]
            return x
        fwd_hooks.append((tla.head_output_hook(layer), save_heads))
        if post_norm(model):  # each head's share of ln1_post, once the norm's scale is known
            def save_shares(scale, hook, layer=layer):
                shares = head_shares(model, layer, results[layer], scale)
                for h in range(g.n_heads):
                    current[f"a{layer}.h{h}"] = shares[:, :, h]
                return scale
            fwd_hooks.append((post_scale_hook(layer), save_shares))
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


# ---------------------------------------------------------------------------- MIB's other baselines
def _node_output_hooks(g: Graph):
    """(hook name, node names it carries, head axis?) for every forward node's output."""
    out = [(tla.resid_pre_hook(0), ["input"], False)]
    for layer in range(g.n_layers):
        out.append((tla.head_output_hook(layer), [f"a{layer}.h{h}" for h in range(g.n_heads)], True))
        if g.has_mlp:
            out.append((tla.mlp_out_hook(layer), [f"m{layer}"], False))
    return out


def reference_nap(model, base, source, metric, steps: int | None = None) -> dict[str, torch.Tensor]:
    """NAP (``steps=None``) or NAP-IG with hooks: per-neuron scores ``{node: [d_model]}`` in the
    loss-increase convention. NAP: one hooked pass, the gradient kept at every node's output.
    NAP-IG: for each group of nodes (the input; one layer's heads; one MLP) and each step
    alpha = k / Z, k = 1 .. Z, one hooked pass with that group's outputs interpolated between
    ablated and clean, the gradient kept at them."""
    g = Graph.from_config(model.cfg)
    clean = node_output_caches(model, base)
    ablated = node_output_caches(model, source)
    hooks = _node_output_hooks(g)
    grads: dict[str, torch.Tensor] = {}

    def one_pass(group_hook: str | None, alpha: float, scale: float):
        kept: dict[str, torch.Tensor] = {}

        def make(hook_name, nodes, heads):
            def fn(x, hook):
                if group_hook is not None and hook_name != group_hook:
                    return x
                if group_hook is not None:
                    abl = torch.stack([ablated[n] for n in nodes], 2) if heads else ablated[nodes[0]]
                    x = abl + alpha * (x - abl)
                else:
                    x = x + 0.0
                if not x.requires_grad:  # a frozen model: the gradient starts here
                    x = x.detach().requires_grad_(True)
                x.retain_grad()
                kept[hook_name] = x
                return x
            return fn

        fwd = []
        for h, nodes, heads in hooks:
            if heads:
                fwd += head_output_hooks(model, g.node(nodes[0]).layer, make(h, nodes, heads))
            else:
                fwd.append((h, make(h, nodes, heads)))
        out = model.run_with_hooks(base, fwd_hooks=fwd)
        metric(out).backward()
        for h, nodes, heads in hooks:
            if h in kept:
                for i, n in enumerate(nodes):
                    gr = kept[h].grad[:, :, i] if heads else kept[h].grad
                    grads[n] = grads.get(n, 0) + gr.detach() * scale
        model.zero_grad(set_to_none=True)

    if steps is None:
        one_pass(None, 1.0, 1.0)
    else:
        for h, _nodes, _heads in hooks:
            for k in range(1, steps + 1):
                one_pass(h, k / steps, 1.0 / steps)
    return {n: -((clean[n] - ablated[n]) * grads[n]).sum((0, 1)) for n in g.forward_nodes}


def destination_input_caches(model, tokens) -> dict[tuple[str, str | None], torch.Tensor]:
    """Every destination's input on an unpatched run, keyed by backward slot (node, qkv)."""
    g = Graph.from_config(model.cfg)
    names = {tla.final_resid_hook(g.n_layers)}
    for layer in range(g.n_layers):
        names |= {tla.qkv_input_hook(layer, q) for q in ("q", "k", "v")}
        if g.has_mlp:
            names.add(tla.mlp_in_hook(layer))
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, names_filter=lambda n: n in names)
    out = {}
    for node, qkv in g.backward_slots:
        n = g.node(node)
        if n.kind == "logits":
            out[(node, qkv)] = cache[tla.final_resid_hook(g.n_layers)]
        elif n.kind == "mlp":
            out[(node, qkv)] = cache[tla.mlp_in_hook(n.layer)]
        else:
            out[(node, qkv)] = cache[tla.qkv_input_hook(n.layer, qkv)][:, :, n.head]
    return out


def reference_ifr(model, tokens, valid) -> dict[str, float]:
    """IFR (MIB eq. 5) edge by edge: per (example, position) the normalized proximity of each
    source's output to the destination's input, averaged over the valid positions."""
    g = Graph.from_config(model.cfg)
    acts = node_output_caches(model, tokens)
    inputs = destination_input_caches(model, tokens)
    w = torch.as_tensor(valid, dtype=torch.float32)
    scores = {}
    for slot, a_v in inputs.items():
        edges = [e for e in g.edges if (e.dst, e.qkv) == slot]
        prox = {e.name: (a_v.abs().sum(-1) - (acts[e.src] - a_v).abs().sum(-1)).clamp(min=0) for e in edges}
        total = sum(prox.values())
        for e in edges:
            imp = torch.where(total > 0, prox[e.name] / torch.where(total > 0, total, torch.ones_like(total)), 0.0)
            scores[e.name] = float((imp * w).sum() / w.sum())
    return scores


def reference_ugs(model, base, source, metric, steps: int, lr: float, lambda_reg: float, init: float,
                  seed: int) -> torch.Tensor:
    """UGS, full-batch steps, with hooks: each step draws alpha per (example, edge) from one
    generator (u then v, as the method does), runs the hooked patched pass with per-example edge
    weights, and steps Adam on the edge logits with the sampled-entry gradient estimate.
    Returns theta [n_edges]."""
    g = Graph.from_config(model.cfg)
    ablated = node_output_caches(model, source)
    B = base.shape[0]
    E = g.n_edges
    logits = torch.full((E,), float(init), requires_grad=True)
    opt = torch.optim.Adam([logits], lr=lr)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        theta = torch.sigmoid(logits.detach())
        w = theta * (1 - theta)
        u = torch.rand(B, E, generator=gen)
        v = torch.rand(B, E, generator=gen)
        sampled = u < w
        one = (~sampled) & (u < w + theta - 0.5 * w)
        alpha = torch.where(sampled, v, one.float())
        weights = {e.name: alpha[:, e.index].reshape(B, 1, 1).clone().requires_grad_(True) for e in g.edges}
        metric(hooked_patched_run(model, base, ablated, weights)).backward()
        est = torch.stack([(weights[e.name].grad.reshape(B) * sampled[:, e.index]).sum() for e in g.edges])
        model.zero_grad(set_to_none=True)
        opt.zero_grad()
        logits.grad = est + lambda_reg * w / E
        opt.step()
    return torch.sigmoid(logits.detach())


def reference_node_replacement_loss(model, tokens, node: str, vector: torch.Tensor, metric) -> float:
    """The loss with ``node``'s output replaced by ``vector`` at every position (one hooked pass)."""
    hook_name, head = tla.node_output_hook(node)

    def fn(x, hook):
        x = x.clone()
        if head is None:
            x[:] = vector
        else:
            x[:, :, head] = vector
        return x

    fwd = [(hook_name, fn)] if head is None else head_output_hooks(model, int(hook_name.split(".")[1]), fn)
    with torch.no_grad():
        return float(metric(model.run_with_hooks(tokens, fwd_hooks=fwd)))
