"""cbench's EAP and EAP-IG against the EAP-IG library (github.com/hannamw/EAP-IG) on the same
models and pairs, in one process: the scores (max difference relative to the largest) and the
wall time and peak memory of each (ratio library / cbench).

The library is never a dependency: pass ``--eap-src DIR``, a directory holding its ``eap``
package (``git clone https://github.com/hannamw/EAP-IG`` then ``DIR=EAP-IG/src``). It allocates its
score matrices on ``cuda`` unconditionally; on a machine without a GPU this script gives its
module a ``torch`` whose ``zeros`` puts them where the model is (nothing else is changed).

Models (``--shapes``): random-weight Hugging Face checkpoints made here (and a BPE tokenizer
trained here, as the library tokenizes text), loaded by ``cbench.artifacts.pretrained.load_model``:

* ``tiny-*``: the families of tests/test_real_models_loading.py (GPT-2, Pythia, Qwen-2.5, Llama-3.1);
* ``gpt2-small``: GPT-2 small's shape (12 layers x 12 heads, d_model 768, d_mlp 3072);
* ``pythia-160m``: Pythia-160m's (the same widths, parallel blocks, rotary_dim 16);
* ``llama-8b-slice``: two layers at Llama-3.1-8B's width (32 query / 8 key-value heads of 128,
  d_mlp 14336), a small vocabulary.

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
    ap.add_argument("--n-examples", type=int, default=16)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--out", default=None, help="append one JSON line per (shape, method) here")
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
            transformers.AutoModelForCausalLM.from_config(all_shapes[name]).save_pretrained(d)
            tok.save_pretrained(d)
            model = load_model(d)
            model.tokenizer.padding_side = "right"
            labels = torch.tensor([[r[2], r[3]] for r in rows])
            loader = [([r[0] for r in rows], [r[1] for r in rows], labels)]

            def metric(logits, clean_logits, input_lengths, label):
                idx = torch.arange(logits.shape[0])
                last = logits[idx, input_lengths - 1]
                return -(last[idx, label[:, 0]] - last[idx, label[:, 1]]).sum()

            g = Graph.from_config(model.cfg)
            for ours, theirs in (("eap", "EAP"), ("eap-ig-inputs", "EAP-IG-inputs")):
                hp = {"steps": args.steps} if ours != "eap" else {}
                run, t_c, m_c = timed(lambda: discover_model(model, ours, data_csv, params=hp), args.repeat)

                def lib_run():
                    lg = LibGraph.from_model(model)
                    attribute.attribute(model, lg, loader, metric, theirs, ig_steps=args.steps if ours != "eap" else None,
                                        quiet=True)
                    return lg
                lg, t_l, m_l = timed(lib_run, args.repeat)
                lib = np.array([float(lg.edges[e.name].score) for e in g.edges])
                cb = np.asarray(run.result.scores, dtype=float)
                rel = float(np.abs(cb - lib).max() / max(np.abs(lib).max(), 1e-30))
                row = {"shape": name, "method": ours, "n_edges": g.n_edges, "n_examples": args.n_examples,
                       "max_rel_diff": rel, "cbench_s": t_c, "library_s": t_l, "speedup": t_l / t_c,
                       "cbench_added_mb": m_c, "library_added_mb": m_l}
                results.append(row)
                print(json.dumps(row), flush=True)
                if args.out:
                    with open(args.out, "a") as f:
                        f.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
