"""The IOI model (``cbench/ioi`` model repo): a 6-layer, 4-head transformer trained with SIIT against
the hand-written IOI causal model (:mod:`cbench.tasks.ioi_high_level`), InterpBench section 4.

* Low level: 6 layers, 4 heads, d_model 64, d_head 16, d_mlp 256, gelu, no normalization, over
  cbench's word-level IOI vocabulary (:mod:`cbench_builders.ioi.vocab`; no GPT-2 tokenizer is
  reachable offline), input and output vocabularies equal.
* Correspondence: duplicate-token head -> ``a1.h1``, S-inhibition -> ``a2.h1``, name mover ->
  ``a4.h1`` (one head of its layer each; InterpBench's ``hook_z`` sites).
* Ground truth: the high-level edges mapped through the correspondence, each head edge at q, k
  and v (input -> each head, a1.h1 -> a2.h1, a2.h1 -> a4.h1, a4.h1 -> logits); a q/k/v edge
  that carries no signal after training is marked in ``circuit.json`` by the release gates.
* Loss (:class:`LastTokenObjective`): IIT, node strictness and edge strictness on the last token
  (the answer), next-token cross-entropy on every other position, the last token weighted 10x.
  The trainer is :class:`cbench_builders.siit.trainer.SIITTrainer` (the Tracr cases' trainer) with this
  objective and the IOI high-level model plugged in.
* Data: (base, counterfactual) pairs from the IOI generator's counterfactual columns
  (:mod:`cbench_builders.ioi.dataset`), one pair per row and counterfactual type, bucketed by length
  (a counterfactual has its base's length: names are single words). The training rows come from
  the generator of every split with the training seed, not from the released dataset's rows: a
  word-level model trained from scratch has no embedding for a word it never saw, and the
  dataset's splits use disjoint names, places and objects. The released splits therefore test
  unseen sentences, not unseen words (recorded in the card).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from cbench.tasks.ioi_high_level import EDGES as HL_EDGES, HIGH_LEVEL_KIND, IOIHighLevel, NODES as HL_NODES
from cbench.tasks.labels import NO_CLASS, high_level_classes
from cbench_builders.ioi import dataset as ioi, vocab as ioi_vocab

CASE = "ioi"
CORRESPONDENCE = {"a0.h0": "a1.h1", "a1.h0": "a2.h1", "a2.h0": "a4.h1"}
LAST_TOKEN_WEIGHT = 10.0
TRAIN_SEED = 7_2024  # the training rows' generator seed (the released dataset uses ioi.DEFAULT_SEED)
VAL_SEED = 7_2025
IOI_DATASET_VERSION = "v1.0.0"  # the cbench/ioi release the gates and the client's pairs read
from cbench_builders.ioi.architecture import PAPER_ARCHITECTURE  # noqa: E402,F401 - its name here before 0.2


class LastTokenObjective:
    """IOI's loss: the intervention target on the last position, next-token cross-entropy elsewhere.

    Targets ``[B, P-1]`` for output positions ``1..P-1``: the next input token at positions
    ``1..P-2`` and the high-level model's class at ``P-1`` (``NO_CLASS`` where its logits tie).
    Loss: mean CE over the other positions + ``weight`` x mean CE on the last. Agreement (the
    accuracy / IIA / SIIA metrics): the last position only."""

    def __init__(self, weight: float = LAST_TOKEN_WEIGHT):
        self.weight = float(weight)

    def target(self, hl_out: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        last = high_level_classes(hl_out[:, -1])
        return torch.cat([tokens[:, 2:], last[:, None]], dim=1)

    def loss(self, ll_out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        out = ll_out[:, 1:]
        V = out.shape[-1]
        last = F.cross_entropy(out[:, -1], target[:, -1], ignore_index=NO_CLASS)
        if out.shape[1] < 2:
            return self.weight * last
        other = F.cross_entropy(out[:, :-1].reshape(-1, V), target[:, :-1].reshape(-1))
        return other + self.weight * torch.nan_to_num(last)

    def agree(self, ll_out: torch.Tensor, target: torch.Tensor) -> float:
        t = target[:, -1]
        labelled = t != NO_CLASS
        n = int(labelled.sum())
        if n == 0:
            return 1.0
        return float(((ll_out[:, -1].argmax(-1) == t) & labelled).sum()) / n


# ---------------------------------------------------------------------------- vocabulary and config
def vocabulary() -> dict:
    return ioi_vocab.build_vocab()


def model_meta(vocab: dict) -> dict:
    """The meta.json fields that describe the task and the high-level model (the client reads them)."""
    return {
        "case": CASE, "task_type": "categorical", "causal": True,
        "input_tokens": list(vocab["tokens"]), "output_classes": list(vocab["tokens"]),
        "bos_token": vocab["bos_token"], "pad_token": vocab["pad_token"],
        "description": "Indirect object identification: predict the indirect object at the end of an IOI "
                       "sentence (word-level vocabulary).",
        "high_level": {"kind": HIGH_LEVEL_KIND, "name_tokens": list(vocab["name_tokens"]),
                       "nodes": dict(HL_NODES), "edges": list(HL_EDGES),
                       "scored_positions": "last"},
        "dataset": {"repo": "cbench/ioi", "revision": IOI_DATASET_VERSION, "split_pattern": vocab["split_pattern"]},
    }


def low_level_config(vocab: dict, n_ctx: int, seed: int, arch: dict | None = None) -> dict:
    a = {**PAPER_ARCHITECTURE, **(arch or {})}
    V = len(vocab["tokens"])
    return {"model_name": "cbench-ioi", "n_layers": a["n_layers"], "n_heads": a["n_heads"],
            "d_model": a["d_model"], "d_head": a["d_head"], "d_mlp": a["d_mlp"], "act_fn": "gelu",
            "n_ctx": int(n_ctx), "d_vocab": V, "d_vocab_out": V, "attention_dir": "causal",
            "positional_embedding_type": "standard", "normalization_type": None, "attn_only": False,
            "seed": int(seed), "init_weights": True, "default_prepend_bos": True, "dtype": "float32"}


def truth_edges(correspondence: dict[str, str] = CORRESPONDENCE) -> list[str]:
    """The low-level ground truth: each high-level edge mapped, head edges at q, k and v."""
    out = set()
    for e in HL_EDGES:
        src, dst = e.split("->")
        s, d = correspondence.get(src, src), correspondence.get(dst, dst)
        if d.startswith("a"):
            out.update(f"{s}->{d}<{x}>" for x in "qkv")
        else:
            out.add(f"{s}->{d}")
    return sorted(out)


# ---------------------------------------------------------------------------- data
def encode_rows(rows: list[dict], vocab: dict, counterfactuals=ioi.COUNTERFACTUAL_TYPES):
    """(bases, sources) per length: one pair per row and counterfactual type (BOS first)."""
    index = {t: i for i, t in enumerate(vocab["tokens"])}
    bos = index[vocab["bos_token"]]
    by_len: dict[int, tuple[list, list]] = {}
    for r in rows:
        b = [bos] + [index[t] for t in ioi_vocab.tokenize(r["prompt"])]
        for cf in counterfactuals:
            s = [bos] + [index[t] for t in ioi_vocab.tokenize(r[cf]["prompt"])]
            if len(s) != len(b):
                continue
            lb = by_len.setdefault(len(b), ([], []))
            lb[0].append(b)
            lb[1].append(s)
    return ({L: torch.tensor(v[0]) for L, v in sorted(by_len.items())},
            {L: torch.tensor(v[1]) for L, v in sorted(by_len.items())})


def input_set(n_rows: int, seed: int, vocab: dict, n_val_rows: int | None = None):
    """An :class:`cbench_builders.siit.data.InputSet` of counterfactual pairs from every split's generator."""
    from cbench_builders.siit.data import InputSet

    def rows(n, s):
        out = []
        for split in ioi_vocab.SPLITS:
            out += ioi.generate_split(split, max(1, n // len(ioi_vocab.SPLITS)), seed=s)
        return out

    n_val_rows = n_val_rows or max(3, n_rows // 5)
    tb, ts = encode_rows(rows(n_rows, seed), vocab)
    vb, vs = encode_rows(rows(n_val_rows, seed + 1), vocab)
    return InputSet(tb, vb, False, ts, vs,
                    origin=f"IOI generator (cbench_builders.ioi.dataset) rows of every split, seeds {seed} (train) and "
                           f"{seed + 1} (validation); one pair per row and counterfactual type")


# ---------------------------------------------------------------------------- training
@dataclass
class IOITrainSetup:
    trainer: object
    data: object
    ll_model: object
    hl_model: IOIHighLevel
    config: object
    ll_config: dict
    vocab: dict


def zero_outputs(ll_model) -> None:
    """Start every residual write at zero: each MLP's ``W_out``/``b_out`` and each head's ``W_O``/``b_O``.

    Every component then starts out silent and gets its first gradient through its output
    weights; a component the task does not need has nothing to unlearn before strictness holds."""
    with torch.no_grad():
        for block in ll_model.blocks:
            block.attn.W_O.zero_()
            block.attn.b_O.zero_()
            if getattr(block, "mlp", None) is not None:
                block.mlp.W_out.zero_()
                block.mlp.b_out.zero_()


def setup(cfg, n_rows: int, arch: dict | None = None, init_weights: Path | dict | None = None,
          init: str = "default", check_weights=None) -> IOITrainSetup:
    """The trainer, data and models for one IOI training run (``cfg``: a TrainingConfig; ``init``:
    ``"default"`` or ``"zero-outputs"`` (:func:`zero_outputs`), for a run that starts from scratch;
    ``init_weights``: a checkpoint file or its tensors, first given to ``check_weights(tensors,
    model)`` when that is set)."""
    from cbench.artifacts.transformer_lens_adapter import build_model
    from cbench_builders.siit.trainer import SIITTrainer

    vocab = vocabulary()
    data = input_set(n_rows, cfg.seed + TRAIN_SEED, vocab)
    n_ctx = max(max(data.train), max(data.val))
    ll_config = low_level_config(vocab, n_ctx, cfg.seed, arch)
    ll_model = build_model(ll_config)
    if init == "zero-outputs":
        zero_outputs(ll_model)
    if isinstance(init_weights, dict):  # read by the caller (cbench_builders.ioi.build)
        if check_weights is not None:
            check_weights(init_weights, ll_model)
        ll_model.load_state_dict(init_weights, strict=False)
    elif init_weights is not None and Path(init_weights).is_file():
        from safetensors.torch import load_file

        ll_model.load_state_dict(load_file(str(init_weights)), strict=False)
    ll_model.train()
    hl = IOIHighLevel(len(vocab["tokens"]), [vocab["tokens"].index(n) for n in vocab["name_tokens"]])
    trainer = SIITTrainer(hl, ll_model, CORRESPONDENCE, "categorical", cfg, truth_edges=truth_edges(),
                          objective=LastTokenObjective())
    return IOITrainSetup(trainer, data, ll_model, hl, cfg, ll_config, vocab)


def checkpointer(path: Path, ll_model, every_s: float = 60.0):
    """A per-epoch log callback that saves the weights (safetensors) at most every ``every_s``
    seconds and appends the epoch's metrics to ``<path>.log.jsonl``: a run killed at any time
    resumes from the last save (``--resume``)."""
    from safetensors.torch import save_file

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    last = [0.0]

    def log(metrics: dict):
        with open(path.with_suffix(".log.jsonl"), "a", encoding="utf-8") as fh:
            fh.write(json.dumps({k: v for k, v in metrics.items() if k != "per_node"}) + "\n")
        now = time.monotonic()
        if now - last[0] >= every_s:
            state = {k: v.detach().contiguous() for k, v in ll_model.state_dict().items()
                     if not k.endswith((".attn.mask", ".attn.IGNORE"))}
            tmp = path.with_name(path.name + ".tmp")
            save_file(state, str(tmp))
            tmp.replace(path)
            last[0] = now

    return log
