"""Run under TransformerLens 4.x (the ``.venv-tl4`` interpreter, ``/work/main/client`` on
``PYTHONPATH``): cbench's runtime on a ``TransformerBridge`` against the bridge itself.

Usage: ``python tests/tl4_bridge_equality.py [--all-methods] DIR FAMILY [FAMILY ...]``. For each
family it writes a random-weight Hugging Face checkpoint (the configs of
tests/test_real_models_loading.py, with random biases and norm weights so every parameter
matters) and a BPE tokenizer trained here into ``DIR``, boots it with ``TransformerBridge.boot_transformers`` (offline), and measures

* ``logits``: cbench's all-ones masked forward (``CircuitRuntime.run``) against ``bridge(tokens)``;
* ``eap`` and ``eap_ig``: cbench's EAP and EAP-IG (inputs, 2 steps) scores through the Python API
  (``resolve_model(bridge, pairs.csv)``) against a reference computed here with the bridge's own
  hooks (``hook_resid_pre``, ``attn.hook_result``, ``hook_mlp_out``, ``hook_{q,k,v}_input``,
  ``ln2.hook_in``, ``ln_final.hook_in``; Gemma-2's heads as their shares of ``ln1_post``);
* ``patched``: single-edge and random-mask patched runs (``CircuitRuntime.run`` with an edge mask)
  against the bridge patched edge by edge in those hooks (:func:`patched_run`);
* ``eap-ig-activations`` and ``activation-patching``: cbench's scores against the same kind of
  reference (:func:`patched_and_method_checks`).

With grouped-query attention the bridge's ``hook_k_input``/``hook_v_input`` hold one input per
key/value head, cbench's graph one per query head (docs/real-models.md): the gradient at a shared
input is the sum of its copies', so cbench's k and v edge scores summed over the query heads of a
key/value head are compared with the reference's score at that head; q, MLP and logits edges
edge by edge. For the same reason a patch of the k (v) edges of the query heads sharing a key/value
head takes one weight for all of them, and activation patching is compared on the other edges.
``--all-methods``: also every discovery method's edge scores on the bridge
(``methods``), which the test compares with the same checkpoint loaded from its directory. Writes
``DIR/out.json``: ``{"transformer_lens": version, "tl3_imported": bool, "results": {family: {...}}}``.
"""

from __future__ import annotations

import csv
import json
import random
import sys
import warnings
from pathlib import Path

import torch

V = 320
ALL_METHODS = False  # --all-methods: also every method's scores (the slow test)
METHOD_PARAMS = {m: {"steps": 2} for m in ("eap-ig-inputs", "eap-ig-activations", "nap-ig", "sp", "edge-sp", "ugs")}
WORDS = "the a cat dog sat on mat and ran to house when Mary John gave book".split()


def configs(T) -> dict:
    return {
        "gpt2": T.GPT2Config(n_embd=32, n_layer=2, n_head=4, n_positions=64, n_ctx=64, vocab_size=V),
        "pythia": T.GPTNeoXConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=256,
                                  rotary_pct=0.25, use_parallel_residual=True, max_position_embeddings=64,
                                  vocab_size=V),
        "qwen2.5": T.Qwen2Config(hidden_size=56, num_attention_heads=7, num_key_value_heads=1, intermediate_size=96,
                                 num_hidden_layers=2, rope_theta=1e6, tie_word_embeddings=True,
                                 max_position_embeddings=64, vocab_size=V),
        "llama3.1": T.LlamaConfig(hidden_size=64, num_attention_heads=4, num_key_value_heads=1, intermediate_size=112,
                                  num_hidden_layers=2, rope_theta=500000.0,
                                  rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
                                  max_position_embeddings=256, vocab_size=V),
        "gemma2": T.Gemma2Config(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                 intermediate_size=64, num_hidden_layers=2, sliding_window=3, query_pre_attn_scalar=12,
                                 attn_logit_softcapping=1.5, final_logit_softcapping=2.0,
                                 max_position_embeddings=64, vocab_size=V),
    }


def tokenizer(T):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    r = random.Random(0)
    corpus = [" ".join(r.choice(WORDS) for _ in range(12)) for _ in range(300)]
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>"],
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return T.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|endoftext|>",
                                     unk_token="<|endoftext|>")


def write_checkpoint(T, family: str, cfg, tok, d: Path, seed: int) -> None:
    torch.manual_seed(seed)
    model = T.AutoModelForCausalLM.from_config(cfg).eval()
    gen = torch.Generator().manual_seed(seed + 100)
    with torch.no_grad():  # random biases and norm weights (the published init makes them 0 and 1)
        for mod in model.modules():
            if "Norm" in type(mod).__name__ and getattr(mod, "weight", None) is not None:
                mod.weight.add_(0.3 * torch.randn(mod.weight.shape, generator=gen))
            bias = getattr(mod, "bias", None)
            if isinstance(bias, torch.nn.Parameter):
                bias.copy_(0.2 * torch.randn(bias.shape, generator=gen))
    model.save_pretrained(d)
    tok.save_pretrained(d)


def write_pairs(tok, path: Path, n: int = 4) -> Path:
    """IOI-like pairs of equal token length in the EAP-IG library's CSV layout."""
    r = random.Random(1)
    mary, john = tok(" Mary")["input_ids"][0], tok(" John")["input_ids"][0]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["clean", "corrupted", "correct_idx", "incorrect_idx"])
        k = 0
        while k < n:
            words = " ".join(r.choice(WORDS[:12]) for _ in range(r.randint(2, 4)))
            clean, corrupted = f"When Mary and John {words} gave a book to", f"When Mary and Mary {words} gave a book to"
            if len(tok(clean)["input_ids"]) == len(tok(corrupted)["input_ids"]):
                w.writerow([clean, corrupted, mary, john])
                k += 1
    return path


# ------------------------------------------------------------------ the hook reference (bridge hooks)
def _head_shares(bridge, layer: int, result: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """Gemma-2: each head's share of ``ln1_post`` (``(1 + w) * result_h / rms``)."""
    w = bridge.original_model.model.layers[layer].post_attention_layernorm.weight
    return (result / scale[:, :, None]) * (1.0 + w.float())


def node_outputs(bridge, tokens, graph, post_norm: bool) -> dict:
    """Every graph node's output ``[B, P, D]`` on an unpatched bridge run, from its hooks."""
    names = {"blocks.0.hook_resid_pre"}
    for layer in range(graph.n_layers):
        names |= {f"blocks.{layer}.attn.hook_result", f"blocks.{layer}.hook_mlp_out", f"blocks.{layer}.ln1_post.hook_scale"}
    with torch.no_grad():
        _, cache = bridge.run_with_cache(tokens, names_filter=lambda n: n in names)
    out = {"input": cache["blocks.0.hook_resid_pre"]}
    for layer in range(graph.n_layers):
        res = cache[f"blocks.{layer}.attn.hook_result"]
        if post_norm:
            with torch.no_grad():  # (the norm's weight is a parameter: no graph through it)
                res = _head_shares(bridge, layer, res, cache[f"blocks.{layer}.ln1_post.hook_scale"])
        for h in range(graph.n_heads):
            out[f"a{layer}.h{h}"] = res[:, :, h]
        out[f"m{layer}"] = cache[f"blocks.{layer}.hook_mlp_out"]
    return out


def destination_grads(bridge, tokens, graph, metric, input_override=None, extra_hooks=()) -> dict:
    """The gradient of ``metric`` at every destination input on one bridge run: ``(layer, qkv)``
    -> ``[B, P, heads, D]`` (key/value heads for k and v), ``m{layer}`` and ``logits`` -> ``[B, P, D]``.
    ``extra_hooks``: forward hooks applied first (e.g. an interpolation of a node group's outputs)."""
    targets: dict = {}

    def track(key):
        def hook(x, hook):
            x = x + 0.0
            x.retain_grad()
            targets[key] = x
            return x
        return hook

    hooks = list(extra_hooks)
    if input_override is not None:
        hooks.append(("blocks.0.hook_resid_pre", lambda x, hook: input_override))
    for layer in range(graph.n_layers):
        for qkv in "qkv":
            hooks.append((f"blocks.{layer}.hook_{qkv}_input", track((layer, qkv))))
        hooks.append((f"blocks.{layer}.ln2.hook_in", track(f"m{layer}")))
    hooks.append(("ln_final.hook_in", track("logits")))
    metric(bridge.run_with_hooks(tokens, fwd_hooks=hooks)).backward()
    bridge.zero_grad(set_to_none=True)
    return {k: v.grad.detach() for k, v in targets.items()}


def reference_scores(graph, clean: dict, ablated: dict, grads: dict, group: int, sources=None) -> dict:
    """``-(clean - ablated) . grad`` per edge; k and v edges per (source, key/value head).
    ``sources``: only the edges leaving these nodes."""
    scores: dict = {}
    for e in graph.edges:
        if sources is not None and e.src not in sources:
            continue
        diff = clean[e.src] - ablated[e.src]
        if e.dst == "logits" or e.qkv is None:
            scores[e.name] = -float((diff * grads[e.dst]).sum())
            continue
        n = graph.node(e.dst)
        head = n.head if e.qkv == "q" else n.head // group
        key = e.name if e.qkv == "q" else (e.src, n.layer, e.qkv, head)
        if key not in scores:
            scores[key] = -float((diff * grads[(n.layer, e.qkv)][:, :, head]).sum())
    return scores


def grouped(graph, cbench_scores: dict, group: int, sources=None) -> dict:
    """cbench's scores keyed as :func:`reference_scores` keys them (k and v summed per group)."""
    out: dict = {}
    for e in graph.edges:
        if sources is not None and e.src not in sources:
            continue
        s = float(cbench_scores[e.name])
        if e.dst == "logits" or e.qkv in (None, "q"):
            out[e.name] = s
        else:
            n = graph.node(e.dst)
            key = (e.src, n.layer, e.qkv, n.head // group)
            out[key] = out.get(key, 0.0) + s
    return out


def compare(got: dict, want: dict) -> tuple[float, float]:
    assert got.keys() == want.keys()
    return (max(abs(got[k] - want[k]) for k in want), max(abs(v) for v in want.values()))


def kv_key(graph, e, group: int):
    """The bridge's input an edge patches: k and v edges of the query heads of one key/value head
    share ``(source, layer, qkv, key/value head)``; other edges are their own."""
    if e.qkv in ("k", "v"):
        n = graph.node(e.dst)
        return (e.src, n.layer, e.qkv, n.head // group)
    return e.name


def patched_run(bridge, tokens, graph, ablated: dict, weights: dict, post_norm: bool, group: int):
    """The bridge on ``tokens`` where each edge ``e`` with weight ``w = weights[e]`` contributes
    ``w * current + (1 - w) * ablated`` of its source to its destination (edges not listed: 1),
    one operation per edge in the hook of its destination (``hook_{q,k,v}_input``, ``ln2.hook_in``,
    ``ln_final.hook_in``), the sources' current outputs from ``hook_resid_pre``, ``attn.hook_result``
    (Gemma-2: the heads' shares of ``ln1_post``) and ``hook_mlp_out`` of this run. The bridge has
    one k and v input per key/value head, so the k (v) edges of the query heads sharing one must
    carry one weight (else ValueError): they patch that shared input once."""
    current: dict = {}
    results: dict = {}
    by_dst: dict = {}
    seen: dict = {}
    for e in graph.edges:
        w = float(weights.get(e.name, 1.0))
        key = kv_key(graph, e, group)
        if key in seen and seen[key] != w:
            raise ValueError(f"{e.name}: the bridge has one {e.qkv} input per key/value head; its query heads' "
                             f"edges need one weight")
        if key in seen or w == 1.0:
            seen[key] = w
            continue
        seen[key] = w
        n = graph.node(e.dst) if e.dst != "logits" else None
        if e.qkv is None:
            by_dst.setdefault((e.dst, None, None), []).append((e.src, w))
        else:
            head = n.head if e.qkv == "q" else n.head // group
            by_dst.setdefault((n.layer, e.qkv, head), []).append((e.src, w))

    def patch(x, key, head=None):
        for src, w in by_dst.get(key, []):
            delta = (1.0 - w) * (current[src] - ablated[src])
            if head is None:
                x = x - delta
            else:
                x = x.clone()
                x[:, :, head] = x[:, :, head] - delta
        return x

    def save_input(x, hook):
        current["input"] = x
        return x

    hooks = [("blocks.0.hook_resid_pre", save_input)]
    for layer in range(graph.n_layers):
        def heads(x, hook, layer=layer):
            results[layer] = x
            if not post_norm:
                for h in range(graph.n_heads):
                    current[f"a{layer}.h{h}"] = x[:, :, h]
            return x

        def shares(scale, hook, layer=layer):
            sh = _head_shares(bridge, layer, results[layer], scale)
            for h in range(graph.n_heads):
                current[f"a{layer}.h{h}"] = sh[:, :, h]
            return scale

        def save_mlp(x, hook, layer=layer):
            current[f"m{layer}"] = x
            return x

        def qkv_in(x, hook, layer=layer, qkv="q"):
            for head in range(x.shape[2]):
                x = patch(x, (layer, qkv, head), head)
            return x

        hooks.append((f"blocks.{layer}.attn.hook_result", heads))
        if post_norm:
            hooks.append((f"blocks.{layer}.ln1_post.hook_scale", shares))
        hooks.append((f"blocks.{layer}.hook_mlp_out", save_mlp))
        for qkv in "qkv":
            hooks.append((f"blocks.{layer}.hook_{qkv}_input", lambda x, hook, layer=layer, qkv=qkv: qkv_in(x, hook, layer, qkv)))
        hooks.append((f"blocks.{layer}.ln2.hook_in", lambda x, hook, layer=layer: patch(x, (f"m{layer}", None, None))))
    hooks.append(("ln_final.hook_in", lambda x, hook: patch(x, ("logits", None, None))))
    return bridge.run_with_hooks(tokens, fwd_hooks=hooks)


def interpolation_hooks(bridge, graph, nodes: list, ablated: dict, alpha: float, post_norm: bool):
    """Forward hooks putting the outputs of one node group (the input, a layer's heads, an MLP) at
    ``ablated + alpha (x - ablated)``, ``x`` their output in this run; with a post-norm a layer's
    heads as their shares of ``ln1_post``, whose sum then replaces ``hook_attn_out``."""
    n0 = graph.node(nodes[0])
    if n0.kind == "input":
        return [("blocks.0.hook_resid_pre", lambda x, hook: ablated["input"] + alpha * (x - ablated["input"]))]
    if n0.kind == "mlp":
        a = ablated[nodes[0]]
        return [(f"blocks.{n0.layer}.hook_mlp_out", lambda x, hook: a + alpha * (x - a))]
    a = torch.stack([ablated[n] for n in nodes], 2)
    if not post_norm:
        return [(f"blocks.{n0.layer}.attn.hook_result", lambda x, hook: a + alpha * (x - a))]
    saved: dict = {}

    def keep(name):
        def hook(x, hook):
            saved[name] = x
            return x
        return hook

    def attn_out(x, hook):
        sh = _head_shares(bridge, n0.layer, saved["result"], saved["scale"])
        return (a + alpha * (sh - a)).sum(2)

    return [(f"blocks.{n0.layer}.attn.hook_result", keep("result")),
            (f"blocks.{n0.layer}.ln1_post.hook_scale", keep("scale")),
            (f"blocks.{n0.layer}.hook_attn_out", attn_out)]


def node_groups_by_name(graph) -> list:
    """[input], the heads of layer 0, MLP 0, the heads of layer 1, ... (EAP-IG-activations' groups)."""
    groups = [["input"]]
    for layer in range(graph.n_layers):
        groups.append([f"a{layer}.h{h}" for h in range(graph.n_heads)])
        if graph.has_mlp:
            groups.append([f"m{layer}"])
    return groups


def patched_and_method_checks(bridge, rm, clean: dict, ablated: dict, post_norm: bool, group: int) -> dict:
    """Single-edge and random-mask patched runs, EAP-IG (activations) and activation patching
    against the bridge-hook references above: ``{"patched": [[err, scale, effect], ...],
    "eap-ig-activations": [err, scale], "activation-patching": [err, scale, n_edges_compared]}``."""
    from cbench.api.discovering import discovery_hyperparameters
    from cbench.api.real_models import run_model_discovery
    from cbench.discovery.base import prepare

    rt, data = rm.runtime, rm.data
    g = rt.graph
    base, source = data.base, data.source
    with torch.no_grad():
        plain = bridge(base)
    H = g.n_heads
    # one edge into each kind of destination: q, k and v of the last head of layer 1 (under GQA the
    # k and v edges of every query head of its key/value head, which share one bridge input), an MLP,
    # the logits; then a random mask and a random 0/1 mask, one value per shared k/v input
    picks = [[g.edge_index(f"a0.h{H - 1}->a1.h{H - 1}<q>")]]
    for x in "kv":
        first = (H - 1) // group * group
        picks.append([g.edge_index(f"a0.h{H - 1}->a1.h{h}<{x}>") for h in range(first, first + group)])
    picks += [[g.edge_index("input->logits")], [g.edge_index("a0.h0->m1")]]
    masks = []
    for idx in picks:
        m = torch.ones(rt.n_edges)
        m[idx] = 0.0
        masks.append(m)
    gen = torch.Generator().manual_seed(3)
    for binary in (False, True):
        r = torch.rand(rt.n_edges, generator=gen)
        r = (r > 0.5).float() if binary else r
        first_of: dict = {}
        for e in g.edges:
            r[e.index] = r[first_of.setdefault(kv_key(g, e, group), e.index)]
        masks.append(r)
    out: dict = {"patched": []}
    for m in masks:
        got = rt.run(base, source, edge_mask=m).output
        with torch.no_grad():
            ref = patched_run(bridge, base, g, ablated, {e.name: float(m[e.index]) for e in g.edges
                                                          if m[e.index] != 1}, post_norm, group)
        out["patched"].append([float((got - ref).abs().max()), float(ref.abs().max()),
                               float((ref - plain).abs().max())])
    # EAP-IG (activations, 2 steps): per node group and alpha = k / Z, k = 1 .. Z, one bridge run with
    # that group's outputs interpolated; the gradients at the destinations score the group's edges
    steps = 2
    run = run_model_discovery(rm, None, "eap-ig-activations", discovery_hyperparameters("eap-ig-activations",
                                                                                       {"steps": steps}))
    metric = prepare(rt, data, "eap-ig-activations", metric=rm.answer_metric).metric
    ref: dict = {}
    for nodes in node_groups_by_name(g):
        grads: dict = {}
        for k in range(1, steps + 1):
            hooks = interpolation_hooks(bridge, g, nodes, ablated, k / steps, post_norm)
            for key, v in destination_grads(bridge, base, g, metric, extra_hooks=hooks).items():
                grads[key] = grads.get(key, 0) + v / steps
        ref.update(reference_scores(g, clean, ablated, grads, group, sources=set(nodes)))
    out["eap-ig-activations"] = list(compare(grouped(g, run.result.edge_scores(), group), ref))
    # activation patching: the metric with one edge patched minus the unpatched metric, edge by
    # edge, for every edge the bridge can patch alone (all but the k and v edges of a shared head)
    run = run_model_discovery(rm, None, "activation-patching", discovery_hyperparameters("activation-patching", {}))
    metric = prepare(rt, data, "activation-patching", metric=rm.answer_metric).metric
    got = run.result.edge_scores()
    errs, scale, n = 0.0, 0.0, 0
    with torch.no_grad():
        full = float(metric(plain))
        for e in g.edges:
            if group > 1 and e.qkv in ("k", "v"):
                continue
            want = float(metric(patched_run(bridge, base, g, ablated, {e.name: 0.0}, post_norm, group))) - full
            errs, scale, n = max(errs, abs(got[e.name] - want)), max(scale, abs(want)), n + 1
    out["activation-patching"] = [errs, scale, n]
    return out


def run_family(family: str, d: Path, pairs: Path) -> dict:
    from transformer_lens.model_bridge import TransformerBridge

    from cbench.api.real_models import resolve_model, run_model_discovery
    from cbench.api.discovering import discovery_hyperparameters
    from cbench.artifacts.pretrained import load_model
    from cbench.discovery.base import prepare
    from cbench.errors import UnsupportedModelError

    bridge = TransformerBridge.boot_transformers(str(d), device="cpu")
    bridge.set_use_attn_result(True)
    bridge.set_use_split_qkv_input(True)
    rm = resolve_model(bridge, str(pairs))
    rt, data = rm.runtime, rm.data
    out = {"model_type": type(rm.model).__name__, "n_edges": rt.n_edges, "n_examples": data.n_examples}
    # (a) the all-ones masked forward against the bridge's logits
    with torch.no_grad():
        want = bridge(data.base)
    got = rt.run(data.base, data.source, edge_mask=torch.ones(rt.n_edges)).output
    out["logits"] = [float((got - want).abs().max()), float(want.abs().max())]
    # (b) EAP and EAP-IG (inputs) through the Python API against the bridge-hook reference
    g = rt.graph
    cfg = rm.model.cfg
    group = cfg.n_heads // (cfg.n_key_value_heads or cfg.n_heads)
    post_norm = bool(cfg.use_normalization_before_and_after)
    clean, ablated = node_outputs(bridge, data.base, g, post_norm), node_outputs(bridge, data.source, g, post_norm)
    for method, params in (("eap", {}), ("eap-ig-inputs", {"steps": 2})):
        run = run_model_discovery(rm, None, method, discovery_hyperparameters(method, params))
        metric = prepare(rt, data, method, metric=rm.answer_metric).metric
        if method == "eap":
            grads = destination_grads(bridge, data.base, g, metric)
        else:
            grads = {}
            for k in range(params["steps"]):  # alpha = k / steps, as the public EAP-IG code
                alpha = k / params["steps"]
                x = (ablated["input"] + alpha * (clean["input"] - ablated["input"])).detach().requires_grad_(True)
                for key, v in destination_grads(bridge, data.base, g, metric, input_override=x).items():
                    grads[key] = grads.get(key, 0) + v / params["steps"]
        ref = reference_scores(g, clean, ablated, grads, group)
        out[method] = list(compare(grouped(g, run.result.edge_scores(), group), ref))
    out["metric"] = rm.answer_metric
    out.update(patched_and_method_checks(bridge, rm, clean, ablated, post_norm, group))
    if ALL_METHODS:  # every method's scores, for the main process to compare with its directory load
        from cbench.discovery import METHODS

        out["methods"] = {}
        for method in sorted(METHODS):
            hp = discovery_hyperparameters(method, METHOD_PARAMS.get(method, {}))
            out["methods"][method] = run_model_discovery(rm, None, method, hp).result.edge_scores()
    # a bridge with processed weights is refused in one line
    bridge.enable_compatibility_mode()
    try:
        load_model(bridge)
        out["processed"] = "loaded"
    except UnsupportedModelError as e:
        out["processed"] = str(e)
    return out


def main(root: str, *families: str) -> int:
    from importlib.metadata import version

    import transformers as T

    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    root_path = Path(root)
    tok = tokenizer(T)
    pairs = write_pairs(tok, root_path / "pairs.csv")
    all_configs = configs(T)
    results = {}
    for i, family in enumerate(families):
        d = root_path / family
        write_checkpoint(T, family, all_configs[family], tok, d, seed=i)
        try:
            results[family] = run_family(family, d, pairs)
        except Exception as exc:  # noqa: BLE001 - reported per family to the test
            import traceback

            results[family] = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-2000:]}
    tl3 = any(name == "transformer_lens.HookedTransformer" for name in sys.modules)
    (root_path / "out.json").write_text(json.dumps({"transformer_lens": version("transformer-lens"),
                                                    "tl3_imported": tl3, "results": results}))
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    if "--all-methods" in args:
        args.remove("--all-methods")
        ALL_METHODS = True
    sys.exit(main(*args))
