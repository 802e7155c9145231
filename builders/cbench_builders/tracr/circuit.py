"""Ground-truth circuits of compiled Tracr models, read from the compiled craft graph.

Nothing here is written by hand. From the craft model Tracr assembled:

* **writers**: every residual direction is written by one component: token and index directions
  (and the constant ``one``) by ``input`` (the embeddings), the output space of a head's OV
  circuit by that head ``a{L}.h{H}``, the output space of an MLP's second layer by ``m{L}``;
* **readers**: a head's query reads the rows of its QK matrix that are not all zero, its key the
  non-zero columns, its value the non-zero rows of its OV matrix; an MLP reads the non-zero
  rows of its first layer; ``logits`` read the output space;
* the constant ``one`` direction and the BOS token direction are ignored (they are the same on
  every input: the bias and the attention sink);
* each (writer, reader) pair through a shared direction is an edge ``src->dst`` (``<q>``,
  ``<k>``, ``<v>`` for heads); the nodes are the edges' ends.

The high-level graph (``high_level.ops``) lists every RASP expression of the program with its
type, parents and the components computing it: for an MLP op also the hidden neurons it owns
inside its layer's MLP (Tracr concatenates the MLPs of one layer; ``hidden_neurons`` is
``[start, end)``) and the residual dimensions it writes.

:func:`check_circuit` tests the circuit on a model: resample-patching every edge outside it
leaves the outputs unchanged, and also patching its edges into ``logits`` changes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from cbench.errors import BuildError
from cbench.graph.graph import Graph, edge_name

from cbench_builders.tracr.compile import CompiledCase
from cbench_builders.tracr.convert import json_class

CHECK_ATOL = 1e-4  # numerical outputs; categorical compares argmax where the top-1 margin is clear
_MARGIN = 1e-3
CHECK_MAX_INPUTS = 2_000  # the circuit check uses the test set, or a seeded 2,000-input subset of it


@dataclass
class _Component:
    node: str
    kind: str  # "head" | "mlp"
    layer: int
    block: Any


def _components(compiled: CompiledCase) -> list[_Component]:
    """Every head and MLP of the compiled model, with its canonical node name."""
    from tracr.craft import transformers

    out: list[_Component] = []
    for block, module in zip(compiled.craft_model.blocks, compiled.module_names):
        layer = int(module.split("/")[1].removeprefix("layer_"))
        if isinstance(block, transformers.MLP):
            out.append(_Component(f"m{layer}", "mlp", layer, block))
        else:
            for h, head in enumerate(block.as_multi().heads()):
                out.append(_Component(f"a{layer}.h{h}", "head", layer, head))
    return out


def _nonzero(space, matrix: np.ndarray, axis: int) -> list:
    mask = np.any(np.abs(np.asarray(matrix)) > 0, axis=axis)
    return [d for d, keep in zip(space.basis, mask) if keep]


def derive_circuit(compiled: CompiledCase) -> dict:
    """circuit.json (``cbench/circuit/v1``) for a compiled case."""
    from tracr.craft import bases

    case = compiled.case
    cfg = compiled.assembled.model_config
    graph = Graph(cfg.num_layers, cfg.num_heads, has_mlp=True)
    one = bases.BasisDirection("one")
    bos = bases.BasisDirection("tokens", case.bos)
    ignored = {one, bos}

    writers: dict = {}
    for d in list(compiled.tokens_space.basis) + list(compiled.indices_space.basis) + [one]:
        writers.setdefault(d, set()).add("input")
    comps = _components(compiled)
    for c in comps:
        space = c.block.snd.output_space if c.kind == "mlp" else c.block.w_ov.output_space
        for d in space.basis:
            writers.setdefault(d, set()).add(c.node)

    reads: list[tuple[str, str | None, list]] = []
    for c in comps:
        if c.kind == "mlp":
            reads.append((c.node, None, _nonzero(c.block.fst.input_space, c.block.fst.matrix, axis=1)))
        else:
            qk, ov = c.block.w_qk, c.block.w_ov
            reads.append((c.node, "q", _nonzero(qk.left_space, qk.matrix, axis=1)))
            reads.append((c.node, "k", _nonzero(qk.right_space, qk.matrix, axis=0)))
            reads.append((c.node, "v", _nonzero(ov.input_space, ov.matrix, axis=1)))
    reads.append(("logits", None, list(compiled.output_space.basis)))

    edges: set[str] = set()
    for dst, qkv, dirs in reads:
        for d in dirs:
            if d in ignored:
                continue
            # only writers that run before the reader count (an MLP may also write a direction
            # it reads, e.g. SelectorWidth's MLP cleaning up its attention output)
            names = [edge_name(src, dst, qkv) for src in writers.get(d, ())]
            names = [n for n in names if graph.has_edge(n)]
            if not names:
                raise BuildError(f"case {case.id}: {dst} reads residual direction {d} that nothing before it writes")
            edges.update(names)
    if not any(e.endswith("->logits") for e in edges):
        raise BuildError(f"case {case.id}: no component writes the output space")
    edge_list = sorted(edges, key=graph.edge_index)
    nodes = sorted(graph.nodes_of(edge_list), key=lambda n: graph.node(n).index)
    return {
        "schema": "cbench/circuit/v1",
        "case": case.id,
        "model_kind": "tracr",
        "granularity": "qkv",
        "graph": {"n_layers": graph.n_layers, "n_heads": graph.n_heads, "has_mlp": True,
                  "parallel_attn_mlp": False},
        "nodes": nodes,
        "edges": edge_list,
        "high_level": {"ops": high_level_ops(compiled, comps), "output_op": compiled.output_label},
        "provenance": ("derived from the compiled Tracr craft graph: which residual directions each head's "
                       "q/k/v and each MLP read (non-zero weights), and which component writes them; the "
                       "constant 'one' and BOS directions are ignored"),
    }


def high_level_ops(compiled: CompiledCase, comps: list[_Component] | None = None) -> list[dict]:
    """Every RASP expression of the program with its parents and the components computing it."""
    import networkx as nx
    from tracr.craft import transformers
    from tracr.rasp import rasp

    comps = comps if comps is not None else _components(compiled)
    head_of = {id(c.block): c for c in comps if c.kind == "head"}
    mlps = [c for c in comps if c.kind == "mlp"]
    res_index = compiled.residual_space.index_by_direction

    def mlp_info(block) -> tuple[_Component, list[int]]:
        hidden = list(block.fst.output_space.basis)
        for c in mlps:
            combined = c.block.fst.output_space
            if all(d in combined for d in hidden):
                idx = combined.index_by_direction
                return c, sorted(idx[d] for d in hidden)
        raise BuildError(f"case {compiled.case.id}: cannot find the layer MLP holding an op's hidden neurons")

    ops: list[dict] = []
    g = compiled.graph
    users: dict[str, list[str]] = {}
    for label in nx.topological_sort(g):
        node = g.nodes[label]
        expr = node["EXPR"]
        op: dict[str, Any] = {"name": label, "type": type(expr).__name__,
                              "parents": list(dict.fromkeys(c.label for c in expr.children))}
        for parent in op["parents"]:
            users.setdefault(parent, []).append(label)
        components: list[str] = []
        primary = None
        if isinstance(expr, rasp.SOp):
            op["encoding"] = rasp.get_encoding(expr).value
        if expr is rasp.tokens or expr is rasp.indices or label in ("tokens", "indices"):
            components = ["input"]
            primary = "input"
        block = node.get("MODEL_BLOCK")
        if block is not None:
            parts = block.blocks if isinstance(block, transformers.SeriesWithResiduals) else [block]
            mlp_node = head_node = None
            for part in parts:
                if isinstance(part, transformers.MLP):
                    c, neurons = mlp_info(part)
                    components.append(c.node)
                    mlp_node = c.node
                    if neurons == list(range(neurons[0], neurons[-1] + 1)):
                        op["hidden_neurons"] = [neurons[0], neurons[-1] + 1]
                    else:
                        op["hidden_neuron_indices"] = neurons
                else:
                    for head in part.as_multi().heads():
                        c = head_of.get(id(head))
                        if c is None:
                            raise BuildError(f"case {compiled.case.id}: op {label} has a head the model lacks")
                        components.append(c.node)
                        head_node = head_node or c.node
            # the component that writes the op's value: the MLP of an attention+MLP pair
            # (SelectorWidth), else the op's head or MLP
            primary = mlp_node or head_node
        op["components"] = list(dict.fromkeys(components))
        if primary is not None:
            op["component"] = primary
        if isinstance(expr, rasp.SOp) and "OUTPUT_BASIS" in node:
            dims = [res_index[d] for d in node["OUTPUT_BASIS"] if d in res_index]
            op["residual_dims"] = sorted(dims)
        ops.append(op)
    # a selector is computed inside the heads of the ops that use it
    by_name = {op["name"]: op for op in ops}
    for op in ops:
        if op["type"] == "Select" or op["type"].startswith("Selector") and op["type"] != "SelectorWidth":
            heads = [c for user in users.get(op["name"], []) for c in by_name[user]["components"]
                     if c.startswith("a")]
            op["components"] = list(dict.fromkeys(heads))
    return ops


def value_set(compiled: CompiledCase, label: str) -> list:
    """The op's possible values (Tracr's basis inference), as JSON scalars, sorted by text."""
    values = compiled.graph.nodes[label].get("VALUE_SET")
    if values is None:
        return []
    return sorted((json_class(v) for v in values), key=lambda v: (type(v).__name__, str(v)))


# ---------------------------------------------------------------------------- the circuit check
def _slots_to_patch(graph: Graph, keep: set[str]) -> dict[tuple[str, str | None], list[str]]:
    drop: dict[tuple[str, str | None], list[str]] = {}
    for e in graph.edges:
        if e.name not in keep:
            drop.setdefault((e.dst, e.qkv), []).append(e.src)
    return drop


def patched_logits(model, graph: Graph, clean, corrupt, keep: set[str]):
    """Logits on ``clean`` with every edge outside ``keep`` resample-patched from ``corrupt`` (of
    the same length, or longer: then its node outputs at ``clean``'s positions are patched in).

    A straightforward hook-based implementation: the corrupted run's node outputs are cached;
    in the clean run every node input (head q/k/v, MLP input, final residual) is corrected by
    the sum over its dropped incoming edges of (this run's source output - corrupted source
    output). The residual stream is the sum of the node outputs (Tracr has no biases or norms).
    """
    import torch

    from cbench.artifacts import transformer_lens_adapter as tla

    out_hooks = {tla.resid_pre_hook(0): "input"}
    for layer in range(graph.n_layers):
        out_hooks[tla.head_output_hook(layer)] = "heads"
        out_hooks[tla.mlp_out_hook(layer)] = f"m{layer}"
    with torch.no_grad():
        _, cache = model.run_with_cache(corrupt, names_filter=lambda n: n in out_hooks)
    corrupt_out: dict[str, torch.Tensor] = {"input": cache[tla.resid_pre_hook(0)]}
    for layer in range(graph.n_layers):
        res = cache[tla.head_output_hook(layer)]
        for h in range(graph.n_heads):
            corrupt_out[f"a{layer}.h{h}"] = res[:, :, h]
        corrupt_out[f"m{layer}"] = cache[tla.mlp_out_hook(layer)]
    # a longer corrupt input (another length, for a bidirectional model): its node outputs at the
    # clean input's positions
    P = clean.shape[1]
    corrupt_out = {k: v[:, :P] for k, v in corrupt_out.items()}
    drop = _slots_to_patch(graph, keep)
    live: dict[str, torch.Tensor] = {}

    def delta(slot):
        srcs = drop.get(slot, ())
        if not srcs:
            return None
        return sum(live[s] - corrupt_out[s] for s in srcs)

    def record_input(act, hook):
        live["input"] = act.clone()
        return act

    def record_heads(layer):
        def fn(act, hook):
            for h in range(graph.n_heads):
                live[f"a{layer}.h{h}"] = act[:, :, h].clone()
            return act
        return fn

    def record_mlp(layer):
        def fn(act, hook):
            live[f"m{layer}"] = act.clone()
            return act
        return fn

    def patch_qkv(layer, qkv):
        def fn(act, hook):
            act = act.clone()
            for h in range(graph.n_heads):
                d = delta((f"a{layer}.h{h}", qkv))
                if d is not None:
                    act[:, :, h] = act[:, :, h] - d
            return act
        return fn

    def patch_node(slot):
        def fn(act, hook):
            d = delta(slot)
            return act if d is None else act - d
        return fn

    hooks = [(tla.resid_pre_hook(0), record_input)]
    for layer in range(graph.n_layers):
        for qkv in ("q", "k", "v"):
            hooks.append((tla.qkv_input_hook(layer, qkv), patch_qkv(layer, qkv)))
        hooks.append((tla.head_output_hook(layer), record_heads(layer)))
        hooks.append((tla.mlp_in_hook(layer), patch_node((f"m{layer}", None))))
        hooks.append((tla.mlp_out_hook(layer), record_mlp(layer)))
    hooks.append((tla.final_resid_hook(graph.n_layers), patch_node(("logits", None))))
    with torch.no_grad():
        return model.run_with_hooks(clean, fwd_hooks=hooks)


def _changed_with_longer_sources(model, graph, seqs, groups, token_to_id, bos, keep_no_logits, categorical, rng) -> int:
    """(input, position) pairs whose output changes when the circuit's edges into logits are cut
    with corrupt inputs drawn from longer inputs (their outputs at the clean positions)."""
    import torch

    lengths = sorted(groups)
    changed = 0
    for n in lengths:
        longer = [i for m in lengths if m > n for i in groups[m]]
        if not longer:
            continue
        idx = groups[n]
        ids = torch.tensor([[token_to_id[bos]] + [token_to_id[t] for t in seqs[i]] for i in idx], dtype=torch.long)
        pick = rng.choice(len(longer), len(idx))
        by_len: dict[int, list[int]] = {}
        for row, j in enumerate(pick):
            by_len.setdefault(len(seqs[longer[j]]), []).append(row)
        for m, rows in by_len.items():
            src = torch.tensor([[token_to_id[bos]] + [token_to_id[t] for t in seqs[longer[pick[r]]]] for r in rows],
                               dtype=torch.long)
            with torch.no_grad():
                clean_logits = model(ids[rows])[:, 1:].double()
            cut = patched_logits(model, graph, ids[rows], src, keep_no_logits)[:, 1:].double()
            if categorical:
                changed += int((cut.argmax(-1) != clean_logits.argmax(-1)).sum())
            else:
                changed += int(((cut - clean_logits).abs() > CHECK_ATOL).sum())
    return changed


@dataclass
class CircuitCheckResult:
    ok: bool
    n_inputs: int
    complement_max_change: float  # largest output change when everything outside the circuit is patched
    logits_edges_changed: int  # (input, position) pairs whose output changes without the logits edge(s)
    failure: str | None = None

    def as_dict(self) -> dict:
        return {"ok": self.ok, "n_inputs": self.n_inputs, "complement_max_change": self.complement_max_change,
                "outputs_changed_without_logits_edges": self.logits_edges_changed, "failure": self.failure}


def check_circuit(model, circuit: dict, seqs: list[tuple], token_to_id: dict, bos, categorical: bool,
                  seed: int) -> CircuitCheckResult:
    """Resample-patch the circuit's complement (outputs must not change) and then also its edges
    into logits (outputs must change somewhere). Corrupted inputs are the test inputs permuted
    within each length (seeded). A test set larger than CHECK_MAX_INPUTS (an exhaustive one of
    up to 10,000 inputs) is checked on a seeded subset of that size: edge-level patching with
    per-head hooks costs several forward passes per input."""
    import torch

    graph = Graph(circuit["graph"]["n_layers"], circuit["graph"]["n_heads"], has_mlp=circuit["graph"]["has_mlp"])
    keep = set(circuit["edges"])
    keep_no_logits = {e for e in keep if not e.endswith("->logits")}
    rng = np.random.default_rng(seed)
    if len(seqs) > CHECK_MAX_INPUTS:
        seqs = [seqs[i] for i in sorted(rng.choice(len(seqs), CHECK_MAX_INPUTS, replace=False))]
    groups: dict[int, list[int]] = {}
    for i, s in enumerate(seqs):
        groups.setdefault(len(s), []).append(i)
    max_change = 0.0
    changed = 0
    failure = None
    for n, idx in sorted(groups.items()):
        ids = torch.tensor([[token_to_id[bos]] + [token_to_id[t] for t in seqs[i]] for i in idx], dtype=torch.long)
        corrupt = ids[torch.as_tensor(rng.permutation(len(idx)))]
        with torch.no_grad():
            clean_logits = model(ids)
        full = patched_logits(model, graph, ids, corrupt, keep)
        cut = patched_logits(model, graph, ids, corrupt, keep_no_logits)
        clean_logits, full, cut = (t[:, 1:].double() for t in (clean_logits, full, cut))
        if categorical:
            top2 = clean_logits.topk(min(2, clean_logits.shape[-1]), dim=-1).values
            clear = (top2[..., 0] - top2[..., -1] > _MARGIN) if top2.shape[-1] > 1 else torch.ones_like(top2[..., 0], dtype=torch.bool)
            same = full.argmax(-1) == clean_logits.argmax(-1)
            bad = clear & ~same
            diff = float((full - clean_logits).abs().max())
            max_change = max(max_change, diff)
            if bool(bad.any()) and failure is None:
                failure = f"patching outside the circuit changed a predicted class (length {n})"
            changed += int((clear & (cut.argmax(-1) != clean_logits.argmax(-1))).sum())
        else:
            diff = float((full - clean_logits).abs().max())
            max_change = max(max_change, diff)
            if diff > CHECK_ATOL and failure is None:
                failure = f"patching outside the circuit changed an output by {diff:.3g} (length {n})"
            changed += int(((cut - clean_logits).abs() > CHECK_ATOL).sum())
    if failure is None and changed == 0 and getattr(model.cfg, "attention_dir", "causal") == "bidirectional":
        # a length-only program (tracr's make_length): a source of the same length carries the same
        # answer, so cut the logits edges with sources of other (longer) lengths, which a
        # bidirectional model allows (a causal model's prefix of a longer input is just a
        # same-length input)
        changed = _changed_with_longer_sources(model, graph, seqs, groups, token_to_id, bos, keep_no_logits,
                                               categorical, rng)
    if failure is None and changed == 0:
        failure = "patching the circuit's edges into logits changed no output"
    return CircuitCheckResult(ok=failure is None, n_inputs=len(seqs), complement_max_change=max_change,
                              logits_edges_changed=changed, failure=failure)
