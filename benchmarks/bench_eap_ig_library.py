"""cbench's EAP and EAP-IG against the EAP-IG library (github.com/hannamw/EAP-IG) on the same
models and pairs, in one process: the scores (max difference relative to the largest) and the
wall time and peak memory of each (ratio library / cbench).

The library is never a dependency: pass ``--eap-src DIR``, a directory holding its ``eap``
package (``git clone https://github.com/hannamw/EAP-IG`` then ``DIR=EAP-IG/src``). It allocates its
score matrices on ``cuda`` unconditionally; on a machine without a GPU this script gives its
module a ``torch`` whose ``zeros`` puts them where the model is (nothing else is changed).

Models (``--shapes``): random-weight Hugging Face checkpoints made here (and a BPE tokenizer
trained here, as the library tokenizes text), loaded by ``cbench.artifacts.pretrained.load_model``:

* ``tiny-*``: the families of tests/test_real_models_loading.py (GPT-2, Pythia, Qwen-2.5, Llama-3.1;
  Gemma-2 with its soft-caps, local attention and post-norms);
* ``gpt2-small``: GPT-2 small's shape (12 layers x 12 heads, d_model 768, d_mlp 3072);
* ``pythia-160m``: Pythia-160m's (the same widths, parallel blocks, rotary_dim 16);
* ``llama-8b-slice``: two layers at Llama-3.1-8B's width (32 query / 8 key-value heads of 128,
  d_mlp 14336), a small vocabulary (1.7 GB of weights in float32). It is loaded economically: the
  checkpoint is written and the ``transformers`` model that wrote it freed before cbench loads it
  (``load_model`` frees its own ``transformers`` copy once TransformerLens holds the weights), and
  the resident memory after loading and the load's peak are recorded.

Methods (``--methods``): ``eap``, ``eap-ig-inputs`` and ``eap-ig-activations`` (the library's
``EAP``, ``EAP-IG-inputs``, ``EAP-IG-activations``). The library's EAP-IG-activations is not
cbench's: for each node group (the input, a layer's heads, an MLP) and step it replaces the group's
outputs by a constant interpolation and adds, at every destination, the gradient times the
activation difference of *every* source, dividing by steps x groups; cbench (as MIB's appendix
E.2 describes it) scores the edges leaving a group with the gradients of that group's own
interpolation. The row records the difference; ``lib_def_rel_diff`` checks the library against a
transcription of its definition with TransformerLens hooks (:func:`library_definition`; for EAP
too, which on Gemma-2 differs from cbench's: the library takes a head's output before the post-norm
and the input as ``hook_embed``).

TransformerLens 3.9, with ``use_attn_result`` (which the library needs), computes every head's
result as a broadcast product ``[batch, pos, heads, d_head, d_model]`` before summing: at
Llama-3.1-8B's width 11.8 GB for 8 pairs of 22 tokens, so there ``--library-batch`` feeds the
library fewer pairs at a time and ``--library-memory-gb`` turns an allocation over it into the row's
``library_error``. The limit bounds new mappings only, not resident memory in regions the process
had mapped before: the library's EAP in batches of 1 pair still grew to 24 GB resident there and was
ended by the kernel's out-of-memory killer. Check ``free -g`` before running that shape.

Pairs: ``--n-examples`` IOI-like sentence pairs of one length, metric the logit difference at
the last position (summed over the batch for the library, whose scores are divided by the number
of examples; a mean for cbench: the same scores). Timings: the best of ``--repeat`` calls, one
torch thread; peak memory: the process's resident high-water mark reset before each call
(Linux ``/proc/self/clear_refs``), as ``benchmarks/scale_measure.py`` does, less the resident
memory before it ("added").

    .venv/bin/python benchmarks/bench_eap_ig_library.py --eap-src /tmp/EAP-IG/src --shapes tiny-llama3.1,gpt2-small
"""

from __future__ import annotations

import argparse
import csv
import gc
import json
import os
import random
import sys
import tempfile
import time
import types
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

WORDS = "the a cat dog sat on mat and ran to house when Mary John gave book".split()


def shapes():
    import transformers as T

    V = 320
    return {
        "tiny-gpt2": T.GPT2Config(n_embd=32, n_layer=2, n_head=4, n_positions=64, n_ctx=64, vocab_size=V),
        "tiny-pythia": T.GPTNeoXConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=256,
                                       rotary_pct=0.25, use_parallel_residual=True, max_position_embeddings=64,
                                       vocab_size=V),
        "tiny-qwen2.5": T.Qwen2Config(hidden_size=56, num_attention_heads=7, num_key_value_heads=1, intermediate_size=96,
                                      num_hidden_layers=2, rope_theta=1e6, max_position_embeddings=64, vocab_size=V),
        "tiny-llama3.1": T.LlamaConfig(hidden_size=64, num_attention_heads=4, num_key_value_heads=1,
                                       intermediate_size=112, num_hidden_layers=2, rope_theta=500000.0,
                                       rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                     "high_freq_factor": 4.0,
                                                     "original_max_position_embeddings": 8192},
                                       max_position_embeddings=256, vocab_size=V),
        "tiny-gemma2": T.Gemma2Config(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                      intermediate_size=64, num_hidden_layers=2, sliding_window=3,
                                      query_pre_attn_scalar=12, attn_logit_softcapping=1.5,
                                      final_logit_softcapping=2.0, max_position_embeddings=64, vocab_size=V),
        "gpt2-small": T.GPT2Config(n_embd=768, n_layer=12, n_head=12, n_positions=64, n_ctx=64, vocab_size=V),
        "pythia-160m": T.GPTNeoXConfig(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                                       intermediate_size=3072, rotary_pct=0.25, use_parallel_residual=True,
                                       max_position_embeddings=64, vocab_size=V),
        "llama-8b-slice": T.LlamaConfig(hidden_size=4096, num_attention_heads=32, num_key_value_heads=8,
                                        intermediate_size=14336, num_hidden_layers=2, rope_theta=500000.0,
                                        max_position_embeddings=64, vocab_size=V),
    }


def tokenizer():
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    r = random.Random(0)
    corpus = [" ".join(r.choice(WORDS) for _ in range(12)) for _ in range(300)]
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>"],
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>",
                                                eos_token="<|endoftext|>", unk_token="<|endoftext|>",
                                                pad_token="<|endoftext|>")


def pairs(tok, n: int, path: Path):
    """``n`` clean/corrupted pairs of one token length, with answer ids, as EAP-IG's CSV."""
    r = random.Random(1)
    mary, john = tok(" Mary")["input_ids"][0], tok(" John")["input_ids"][0]
    rows, length = [], None
    while len(rows) < n:
        words = [r.choice(WORDS[:12]) for _ in range(5)]
        clean = "When Mary and John " + " ".join(words) + " gave a book to"
        corrupted = "When Mary and Mary " + " ".join(words) + " gave a book to"
        lc, lk = len(tok(clean)["input_ids"]), len(tok(corrupted)["input_ids"])
        if lc == lk and (length is None or lc == length):
            length = lc
            rows.append((clean, corrupted, mary, john))
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["clean", "corrupted", "correct_idx", "incorrect_idx"])
        w.writerows(rows)
    return rows


def reset_peak() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def peak_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def timed(fn, repeat: int):
    """(result, best wall seconds, peak MB added over the resident memory before the call)."""
    best, out, added = float("inf"), None, 0.0
    for _ in range(repeat):
        out = None
        before = rss_mb()
        reset_peak()
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
        added = max(added, peak_mb() - before)
    return out, best, added


def library_definition(model, tokens, corrupted, metric, method: str, steps: int) -> dict:
    """The library's EAP or EAP-IG-activations as its code computes them (``get_scores_eap``,
    ``get_scores_ig_activations``), written with TransformerLens hooks. Its node outputs are
    ``hook_embed`` (the input), ``attn.hook_result`` (a layer's heads, before any post-norm) and
    ``hook_mlp_out``; its destinations ``hook_{q,k,v}_input``, ``hook_mlp_in`` and the last
    ``hook_resid_post``. EAP: the gradient at every destination on the clean run. EAP-IG-activations:
    for each node group (the input, a layer's heads, an MLP) and alpha = k / Z, k = 1 .. Z, one run
    with the group's outputs replaced by the constant ``alpha clean + (1 - alpha) corrupted``, the
    gradients (none where nothing upstream needs one: its backward hooks then never run) summed over
    groups and steps and divided by steps x groups. Edge (u, v) scores ``(corrupted_u - clean_u) .
    grad_v`` over the number of examples; ``metric`` takes the logits and sums over examples."""
    from cbench.graph.graph import Graph

    g = Graph.from_config(model.cfg)
    out_hooks = {"input": "hook_embed"}
    for layer in range(g.n_layers):
        out_hooks.update({f"a{layer}.h{h}": f"blocks.{layer}.attn.hook_result" for h in range(g.n_heads)})
        out_hooks[f"m{layer}"] = f"blocks.{layer}.hook_mlp_out"

    def outputs(t):
        with torch.no_grad():
            _, cache = model.run_with_cache(t, names_filter=lambda n: n in set(out_hooks.values()))
        return {n: cache[h][:, :, g.node(n).head] if g.node(n).kind == "head" else cache[h]
                for n, h in out_hooks.items()}
    clean, corr = outputs(tokens), outputs(corrupted)
    if method == "eap":
        groups, steps = [(None, None)], 1
    else:
        groups = [("hook_embed", ["input"])]
        for layer in range(g.n_layers):
            groups.append((f"blocks.{layer}.attn.hook_result", [f"a{layer}.h{h}" for h in range(g.n_heads)]))
            groups.append((f"blocks.{layer}.hook_mlp_out", [f"m{layer}"]))
    grads: dict = {}
    for hook_name, nodes in groups:
        for k in range(1, steps + 1):
            hooks = []
            if hook_name is not None:
                c = torch.stack([clean[n] for n in nodes], 2) if len(nodes) > 1 else clean[nodes[0]]
                a = torch.stack([corr[n] for n in nodes], 2) if len(nodes) > 1 else corr[nodes[0]]
                const = (k / steps * c + (1 - k / steps) * a).detach()
                hooks.append((hook_name, lambda x, hook, const=const: const))
            targets: dict = {}

            def track(key):
                def fn(x, hook):
                    if x.requires_grad:
                        x = x + 0.0
                        x.retain_grad()
                        targets[key] = x
                    return x
                return fn
            for layer in range(g.n_layers):
                hooks += [(f"blocks.{layer}.hook_{q}_input", track((layer, q))) for q in "qkv"]
                hooks.append((f"blocks.{layer}.hook_mlp_in", track(f"m{layer}")))
            hooks.append((f"blocks.{g.n_layers - 1}.hook_resid_post", track("logits")))
            metric(model.run_with_hooks(tokens, fwd_hooks=hooks)).backward()
            model.zero_grad(set_to_none=True)
            for dst, qkv in g.backward_slots:
                n = g.node(dst)
                t = targets.get(dst if qkv is None else (n.layer, qkv))
                if t is None or t.grad is None:
                    continue
                gr = t.grad if qkv is None else t.grad[:, :, n.head]
                grads[(dst, qkv)] = grads.get((dst, qkv), 0) + gr.detach()
    n = tokens.shape[0] * steps * len(groups)
    return {e.name: float(((corr[e.src] - clean[e.src]) * grads.get((e.dst, e.qkv), 0.0)).sum()) / n
            for e in g.edges}


class address_space_limit:
    """Within the block, the process may map at most ``gb`` GB more than it has mapped now
    (``RLIMIT_AS``; no limit when ``gb`` is None): a new mapping over it fails in Python. It does not
    bound resident memory in what the process had mapped before (see the module docstring)."""

    def __init__(self, gb: float | None):
        self.gb = gb

    def __enter__(self):
        if self.gb is not None:
            import resource

            with open("/proc/self/status") as f:
                vm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
            self.old = resource.getrlimit(resource.RLIMIT_AS)
            resource.setrlimit(resource.RLIMIT_AS, (vm + int(self.gb * 2**30), self.old[1]))
        return self

    def __exit__(self, *exc):
        if self.gb is not None:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, self.old)
        return False


def library(eap_src: str, device):
    sys.path.insert(0, eap_src)
    import eap.attribute as attribute
    from eap.graph import Graph as LibGraph

    if not torch.cuda.is_available():  # its score matrices are made on cuda unconditionally
        shim = types.ModuleType("torch_cpu_scores")
        shim.__dict__.update({k: getattr(torch, k) for k in dir(torch) if not k.startswith("__")})
        shim.zeros = lambda *a, device=None, **k: torch.zeros(*a, device="cpu", **k)
        attribute.torch = shim
    return attribute, LibGraph


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--eap-src", required=True, help="a directory holding the EAP-IG library's eap package")
    ap.add_argument("--shapes", default="tiny-gpt2,tiny-pythia,tiny-qwen2.5,tiny-llama3.1")
    ap.add_argument("--methods", default="eap,eap-ig-inputs", help="of eap, eap-ig-inputs, eap-ig-activations")
    ap.add_argument("--n-examples", type=int, default=16)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--out", default=None, help="append one JSON line per (shape, method) here")
    ap.add_argument("--library-batch", type=int, default=None,
                    help="pairs per batch of the library's data loader (default all in one; its scores are sums over "
                         "batches divided by the number of pairs: the same scores)")
    ap.add_argument("--library-memory-gb", type=float, default=None,
                    help="stop the library's call when it would map this many GB more than the process has (an "
                         "address-space limit during the call; its allocation error is then the row's result)")
    args = ap.parse_args(argv)
    torch.set_num_threads(int(os.environ.get("CBENCH_THREADS", "1")))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import transformers

    from cbench.api.real_models import discover_model
    from cbench.artifacts.pretrained import load_model
    from cbench.graph.graph import Graph

    attribute, LibGraph = library(args.eap_src, None)
    tok = tokenizer()
    all_shapes = shapes()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        data_csv = Path(tmp) / "pairs.csv"
        rows = pairs(tok, args.n_examples, data_csv)
        for name in args.shapes.split(","):
            torch.manual_seed(0)
            d = Path(tmp) / name
            gc.collect()
            rss0 = rss_mb()
            reset_peak()
            t_load = time.perf_counter()
            hf = transformers.AutoModelForCausalLM.from_config(all_shapes[name], dtype=torch.float32)
            hf.save_pretrained(d)
            del hf  # one copy of the weights at a time: the writer is gone before cbench reads them
            gc.collect()
            tok.save_pretrained(d)
            model = load_model(d)
            gc.collect()
            load = {"load_s": round(time.perf_counter() - t_load, 1), "load_peak_mb": round(peak_mb() - rss0),
                    "model_mb": round(rss_mb() - rss0)}
            print(json.dumps({"shape": name, **load}), flush=True)
            model.tokenizer.padding_side = "right"
            labels = torch.tensor([[r[2], r[3]] for r in rows])
            step = args.library_batch or len(rows)
            loader = [([r[0] for r in rows[i:i + step]], [r[1] for r in rows[i:i + step]], labels[i:i + step])
                      for i in range(0, len(rows), step)]

            def metric(logits, clean_logits, input_lengths, label):
                idx = torch.arange(logits.shape[0])
                last = logits[idx, input_lengths - 1]
                return -(last[idx, label[:, 0]] - last[idx, label[:, 1]]).sum()

            g = Graph.from_config(model.cfg)
            names = {"eap": "EAP", "eap-ig-inputs": "EAP-IG-inputs", "eap-ig-activations": "EAP-IG-activations"}
            for ours in args.methods.split(","):
                theirs = names[ours]
                hp = {"steps": args.steps} if ours != "eap" else {}
                run, t_c, m_c = timed(lambda: discover_model(model, ours, data_csv, params=hp), args.repeat)
                cb = np.asarray(run.result.scores, dtype=float)
                row = {"shape": name, "method": ours, "n_edges": g.n_edges, "n_examples": args.n_examples,
                       "positions": len(model.to_tokens(rows[0][0])[0]), "library_batch": step, "steps": hp.get("steps"), "cbench_s": t_c, "cbench_added_mb": m_c, **load,
                       "date": time.strftime("%Y-%m-%d", time.gmtime())}

                def lib_run():
                    lg = LibGraph.from_model(model)
                    attribute.attribute(model, lg, loader, metric, theirs, ig_steps=args.steps if ours != "eap" else None,
                                        quiet=True)
                    return lg
                try:
                    with address_space_limit(args.library_memory_gb):
                        lg, t_l, m_l = timed(lib_run, args.repeat)
                except Exception as exc:  # noqa: BLE001 - what the library does is the result
                    import traceback

                    row["library_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
                    row["library_error_where"] = [f"{f.filename.split('/')[-1]}:{f.lineno} {f.name}"
                                                  for f in traceback.extract_tb(exc.__traceback__)[-6:]]
                    row["library_peak_mb"] = round(peak_mb() - rss_mb())
                    lg = None
                    gc.collect()
                if lg is not None:
                    lib = np.array([float(lg.edges[e.name].score) for e in g.edges])
                    rel = float(np.abs(cb - lib).max() / max(np.abs(lib).max(), 1e-30))
                    row.update(max_rel_diff=rel, library_s=t_l, speedup=t_l / t_c, library_added_mb=m_l)
                    if ours != "eap-ig-inputs":  # the library against a transcription of its own definition
                        tokens = model.to_tokens([r[0] for r in rows], prepend_bos=True, padding_side="right")
                        corrupted = model.to_tokens([r[1] for r in rows], prepend_bos=True, padding_side="right")
                        lengths = torch.full((len(rows),), tokens.shape[1])
                        ref = library_definition(model, tokens, corrupted, lambda out: metric(out, None, lengths, labels),
                                                 ours, args.steps)
                        want = np.array([ref[e.name] for e in g.edges])
                        row["lib_def_rel_diff"] = float(np.abs(lib - want).max() / max(np.abs(want).max(), 1e-30))
                results.append(row)
                print(json.dumps(row), flush=True)
                if args.out:
                    with open(args.out, "a") as f:
                        f.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
