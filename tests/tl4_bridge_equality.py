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
  ``ln2.hook_in``, ``ln_final.hook_in``; Gemma-2's heads as their shares of ``ln1_post``).

With grouped-query attention the bridge's ``hook_k_input``/``hook_v_input`` hold one input per
key/value head, cbench's graph one per query head (docs/real-models.md): the gradient at a shared
input is the sum of its copies', so cbench's k and v edge scores summed over the query heads of a
key/value head are compared with the reference's score at that head; q, MLP and logits edges
edge by edge. ``--all-methods``: also every discovery method's edge scores on the bridge
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
            res = _head_shares(bridge, layer, res, cache[f"blocks.{layer}.ln1_post.hook_scale"])
        for h in range(graph.n_heads):
            out[f"a{layer}.h{h}"] = res[:, :, h]
        out[f"m{layer}"] = cache[f"blocks.{layer}.hook_mlp_out"]
    return out


def destination_grads(bridge, tokens, graph, metric, input_override=None) -> dict:
    """The gradient of ``metric`` at every destination input on one bridge run: ``(layer, qkv)``
    -> ``[B, P, heads, D]`` (key/value heads for k and v), ``m{layer}`` and ``logits`` -> ``[B, P, D]``."""
    targets: dict = {}

    def track(key):
        def hook(x, hook):
            x = x + 0.0
            x.retain_grad()
            targets[key] = x
            return x
        return hook

    hooks = []
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


def reference_scores(graph, clean: dict, ablated: dict, grads: dict, group: int) -> dict:
    """``-(clean - ablated) . grad`` per edge; k and v edges per (source, key/value head)."""
    scores: dict = {}
    for e in graph.edges:
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


def grouped(graph, cbench_scores: dict, group: int) -> dict:
    """cbench's scores keyed as :func:`reference_scores` keys them (k and v summed per group)."""
    out: dict = {}
    for e in graph.edges:
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
