"""Train the small language model by ordinary next-token prediction (not SIIT) on the generated
corpus (:mod:`cbench_builders.lm.corpus`), and measure it on held-out task prompts.

The model is GPT-2 shaped (``transformers.GPT2LMHeadModel``: learned positions, LayerNorm, GELU
MLPs), a few layers, trained on one CPU thread with AdamW and a cosine schedule; the loss is the
cross-entropy of every next token of every document (padding excluded). Written as a Hugging
Face checkpoint directory (``config.json``, ``model.safetensors``, the tokenizer), so that
``cbench discover --model DIR`` and ``transformers`` read it as they read any GPT-2.

Beside it: ``ioi.csv`` and ``greater-than.csv`` (held-out prompts in the EAP-IG library's CSV
layout: ``clean``, ``corrupted``, ``correct_idx``, ``incorrect_idx``), ``corpus.txt`` and
``training.json`` (the recipe, the loss curve, the accuracy per task, the time).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from cbench_builders.lm.corpus import Prompt, corpus, held_out_prompts, train_tokenizer


@dataclass(frozen=True)
class Recipe:
    """The recipe of the released model (attempt 7 in docs/real-models.md): 2 layers, a fifth of
    the documents filler only, the rest one task sentence each (80 % IOI-like), lr 1e-3."""
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 128
    n_positions: int = 64
    vocab_size: int = 1024
    n_documents: int = 60_000
    ioi_share: float = 0.8
    max_filler: int = 0
    filler_before: bool = True
    filler_share: float = 0.2
    steps: int = 3_000
    batch_size: int = 64
    lr: float = 1e-3
    warmup: int = 100
    weight_decay: float = 0.01
    seed: int = 0
    n_held_out: int = 500
    threads: int = 1
    eval_every: int = 250  # held-out accuracy of both tasks on 100 prompts every this many steps (0: never)


def _encode(tok, docs, n_positions: int) -> torch.Tensor:
    bos = tok.bos_token_id
    rows = [[bos] + tok(d)["input_ids"][: n_positions - 1] for d in docs]
    width = max(len(r) for r in rows)
    out = torch.full((len(rows), width), -1, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(r)
    return out


def answer_ids(tok, prompts: list[Prompt]) -> tuple[list[int], list[int]]:
    """The one-token ids of each prompt's correct and incorrect answer (refused otherwise)."""
    good, bad = [], []
    for p in prompts:
        a, b = tok(p.correct)["input_ids"], tok(p.incorrect)["input_ids"]
        if len(a) != 1 or len(b) != 1:
            raise ValueError(f"an answer is not one token: {p.correct!r} -> {a}, {p.incorrect!r} -> {b}")
        good.append(a[0])
        bad.append(b[0])
    return good, bad


@torch.no_grad()
def accuracy(model, tok, prompts: list[Prompt]) -> dict:
    """Share of prompts whose logit difference (correct - incorrect) at the last position is > 0,
    and the mean difference."""
    good, bad = answer_ids(tok, prompts)
    diffs = []
    for p, g, b in zip(prompts, good, bad):
        ids = torch.tensor([[tok.bos_token_id] + tok(p.clean)["input_ids"]])
        logits = model(ids).logits[0, -1]
        diffs.append(float(logits[g] - logits[b]))
    return {"n": len(diffs), "accuracy": sum(d > 0 for d in diffs) / len(diffs),
            "mean_logit_diff": sum(diffs) / len(diffs)}


def write_pairs(path: Path, tok, prompts: list[Prompt]) -> int:
    """The prompts whose clean and corrupted texts tokenize to the same length, in the EAP-IG
    library's CSV layout; returns how many were written."""
    good, bad = answer_ids(tok, prompts)
    n = 0
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["clean", "corrupted", "correct_idx", "incorrect_idx"])
        for p, g, b in zip(prompts, good, bad):
            if len(tok(p.clean)["input_ids"]) == len(tok(p.corrupted)["input_ids"]):
                w.writerow([p.clean, p.corrupted, g, b])
                n += 1
    return n


def train(out: Path, recipe: Recipe = Recipe(), log=print) -> dict:
    import transformers

    torch.manual_seed(recipe.seed)
    torch.set_num_threads(recipe.threads)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    docs = corpus(recipe.n_documents, recipe.seed, recipe.ioi_share, recipe.max_filler, recipe.filler_before,
                  recipe.filler_share)
    tok = train_tokenizer(docs, recipe.vocab_size)
    data = _encode(tok, docs, recipe.n_positions)
    cfg = transformers.GPT2Config(n_layer=recipe.n_layer, n_head=recipe.n_head, n_embd=recipe.n_embd,
                                  n_positions=recipe.n_positions, n_ctx=recipe.n_positions, vocab_size=len(tok),
                                  bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    model = transformers.GPT2LMHeadModel(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=recipe.lr, weight_decay=recipe.weight_decay)
    gen = torch.Generator().manual_seed(recipe.seed)
    losses, curve = [], []
    probes = {task: held_out_prompts(task, 100, seed=2000) for task in ("ioi", "greater-than")}
    model.train()
    for step in range(recipe.steps):
        lr = recipe.lr * min(1.0, (step + 1) / recipe.warmup) * 0.5 * (1 + math.cos(math.pi * step / recipe.steps))
        for g in opt.param_groups:
            g["lr"] = lr
        batch = data[torch.randint(0, len(data), (recipe.batch_size,), generator=gen)]
        keep = batch.ne(-1)
        width = int(keep.sum(1).max())
        batch, keep = batch[:, :width], keep[:, :width]
        ids = batch.clamp(min=0)
        logits = model(ids, attention_mask=keep.long()).logits[:, :-1]
        target = batch[:, 1:]
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1),
                                                 ignore_index=-1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 100 == 0 or step == recipe.steps - 1:
            losses.append([step, round(loss.item(), 4)])
            log(f"step {step} loss {loss.item():.4f} ({time.perf_counter() - t0:.0f} s)")
        if recipe.eval_every and (step + 1) % recipe.eval_every == 0:
            model.eval()
            acc = {task: round(accuracy(model, tok, ps)["accuracy"], 3) for task, ps in probes.items()}
            model.train()
            curve.append([step + 1, acc])
            log(f"step {step + 1} held-out accuracy {acc}")
    train_s = time.perf_counter() - t0
    model.eval()
    results = {}
    for task in ("ioi", "greater-than"):
        prompts = held_out_prompts(task, recipe.n_held_out)
        results[task] = accuracy(model, tok, prompts)
        results[task]["pairs_written"] = write_pairs(out / f"{task}.csv", tok, prompts)
    model.save_pretrained(out / "model")
    tok.save_pretrained(out / "model")
    (out / "corpus.txt").write_text("\n".join(docs) + "\n")
    report = {"recipe": asdict(recipe), "train_seconds": round(train_s, 1), "threads": recipe.threads,
              "parameters": sum(p.numel() for p in model.parameters()), "loss_curve": losses, "accuracy_curve": curve,
              "held_out": results}
    (out / "training.json").write_text(json.dumps(report, indent=1) + "\n")
    return report


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description="train the small language model (next-token prediction)")
    ap.add_argument("--out", type=Path, default=Path("build/lm"))
    ap.add_argument("--steps", type=int, default=Recipe.steps)
    ap.add_argument("--n-layer", type=int, default=Recipe.n_layer)
    ap.add_argument("--lr", type=float, default=Recipe.lr)
    ap.add_argument("--ioi-share", type=float, default=Recipe.ioi_share)
    ap.add_argument("--max-filler", type=int, default=Recipe.max_filler)
    ap.add_argument("--filler-after-only", action="store_true", help="no filler before a document's task sentence")
    ap.add_argument("--filler-share", type=float, default=Recipe.filler_share, help="share of filler-only documents")
    ap.add_argument("--batch-size", type=int, default=Recipe.batch_size)
    ap.add_argument("--n-head", type=int, default=Recipe.n_head)
    ap.add_argument("--threads", type=int, default=Recipe.threads)
    ap.add_argument("--eval-every", type=int, default=Recipe.eval_every)
    args = ap.parse_args(argv)
    report = train(args.out, Recipe(steps=args.steps, n_layer=args.n_layer, lr=args.lr, ioi_share=args.ioi_share,
                                    max_filler=args.max_filler, batch_size=args.batch_size, n_head=args.n_head,
                                    threads=args.threads, eval_every=args.eval_every,
                                    filler_before=not args.filler_after_only, filler_share=args.filler_share))
    print(json.dumps(report["held_out"], indent=1), report["train_seconds"], "s")


if __name__ == "__main__":
    main()
