"""The small language model as a hub repository: a Hugging Face checkpoint at the top level (so
``cbench discover --model <snapshot>`` and ``transformers`` read it as any GPT-2), with its
held-out pairs, its training record, its corpus, the code that generated and trained it, and a
card. ``cbench build lm`` trains and packages it; ``cbench build release --lm-dir`` releases it.

A repository is recognised as this kind by :data:`RECORD` (``training.json``) beside an HF
``config.json``: no ``meta.json``, no ground truth.
"""

from __future__ import annotations

import gzip
import json
import shutil
import time
from dataclasses import asdict
from pathlib import Path

import click

from cbench.cli.options import SEED_TYPE, check_out_tree, counts, floats
from cbench.errors import BuildError

RECORD = "training.json"
MODEL_FILES = ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")
PAIR_FILES = ("ioi.csv", "greater-than.csv")
DEFAULT_NAME = "lm-tiny"


def is_lm_repository(directory: Path) -> bool:
    """A packaged language model: the training record beside a Hugging Face config."""
    return (directory / RECORD).is_file() and (directory / "config.json").is_file() \
        and not (directory / "meta.json").exists()


def lm_release_problems(directory: Path) -> list[str]:
    """What keeps a packaged language model from release (empty: releasable): every file the card
    promises, a config ``transformers`` reads as GPT-2, a record with held-out accuracy; on top of
    what every checkpoint repository needs (:func:`cbench.hub.publishing.checkpoint_problems`)."""
    from cbench.hub.publishing import checkpoint_problems

    shared = ("tokenizer.json", "README.md")  # checked there
    problems = checkpoint_problems(directory)
    problems += [f"{name}: missing" for name in (*MODEL_FILES, *PAIR_FILES, RECORD, "corpus.txt.gz",
                                                  "training/corpus.py", "training/train.py")
                 if name not in shared and not (directory / name).is_file()]
    try:
        cfg = json.loads((directory / "config.json").read_text())
        if cfg.get("model_type") != "gpt2":
            problems.append(f"config.json: model_type {cfg.get('model_type')!r}, expected 'gpt2'")
        record = json.loads((directory / RECORD).read_text())
        for task in ("ioi", "greater-than"):
            if not isinstance(record.get("held_out", {}).get(task, {}).get("accuracy"), (int, float)):
                problems.append(f"{RECORD}: no held-out accuracy for {task}")
    except (OSError, ValueError) as exc:
        problems.append(f"unreadable: {exc}")
    return problems


def package(train_dir: Path, out: Path, name: str = DEFAULT_NAME) -> Path:
    """Write the repository ``out/name`` from a :func:`cbench_builders.lm.train.train` directory."""
    from cbench_builders.lm import corpus as corpus_module, train as train_module

    record = json.loads((train_dir / RECORD).read_text())
    repo = out / name
    if repo.exists():
        shutil.rmtree(repo)
    (repo / "training").mkdir(parents=True)
    for f in MODEL_FILES:
        shutil.copyfile(train_dir / "model" / f, repo / f)
    for f in (*PAIR_FILES, RECORD):
        shutil.copyfile(train_dir / f, repo / f)
    # the corpus, gzipped with no timestamp or name in its header: the same corpus, the same bytes
    with open(train_dir / "corpus.txt", "rb") as src, open(repo / "corpus.txt.gz", "wb") as raw, \
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as dst:
        shutil.copyfileobj(src, dst)
    for module in (corpus_module, train_module):
        shutil.copyfile(module.__file__, repo / "training" / Path(module.__file__).name)
    vocab = json.loads((repo / "config.json").read_text())["vocab_size"]
    (repo / "README.md").write_text(card(name, record, vocab))
    problems = lm_release_problems(repo)
    if problems:
        raise BuildError(f"{repo}: " + "; ".join(problems))
    return repo


def card(name: str, record: dict, vocab: int) -> str:
    """The model card: Hugging Face front matter, then what the model is, how it was trained, how
    well it does the two tasks on held-out prompts, and how to run cbench on it. ``vocab``: the
    tokenizer's size (BPE stops below the recipe's cap when the corpus has no more merges)."""
    r = record["recipe"]
    ho = record["held_out"]
    acc = lambda t: f"{100 * ho[t]['accuracy']:.1f} % of {ho[t]['n']}"  # noqa: E731
    minutes = record["train_seconds"] / 60
    return f"""---
library_name: transformers
license: mit
pipeline_tag: text-generation
tags:
- cbench
- interpretability
- gpt2
- indirect-object-identification
- greater-than
model-index:
- name: {name}
  results:
  - task: {{type: text-generation, name: IOI-like prompts (held-out name pairs)}}
    metrics:
    - {{type: accuracy, value: {ho['ioi']['accuracy']:.4f}, name: logit difference above 0}}
  - task: {{type: text-generation, name: greater-than-like prompts (fresh draws)}}
    metrics:
    - {{type: accuracy, value: {ho['greater-than']['accuracy']:.4f}, name: logit difference above 0}}
---

# cbench/{name}

A {r['n_layer']}-layer GPT-2-shaped language model ({record['parameters']:,} parameters; {r['n_head']} heads,
d_model {r['n_embd']}, context {r['n_positions']}, vocabulary {vocab}) trained here by ordinary
next-token prediction (not SIIT) on a generated corpus of IOI-like sentences ("When Mary and John
went to the store, John gave a drink to Mary") and greater-than-like sentences ("The war lasted
from the year 1732 to the year 1758") among filler text, with a byte-level BPE
tokenizer trained on the same corpus (years split into two-digit pieces, so every answer is one
token). It is cbench's offline stand-in for a real LLM: the whole real-model path runs on it with
meaningful numbers. **It has no ground-truth circuit.**

## How well it does the two tasks

Held-out prompts: IOI-like ones on name pairs the corpus never pairs, greater-than-like ones
drawn fresh. A prompt counts as answered when the logit of the right answer exceeds the wrong
one's (the indirect object over the subject; a later year over an earlier one).

| task | answered | mean logit difference |
| --- | --- | --- |
| IOI-like | {acc('ioi')} | {ho['ioi']['mean_logit_diff']:.2f} |
| greater-than-like | {acc('greater-than')} | {ho['greater-than']['mean_logit_diff']:.2f} |

`ioi.csv` ({ho['ioi']['pairs_written']} pairs) and `greater-than.csv` ({ho['greater-than']['pairs_written']}
pairs) hold those prompts whose counterfactual tokenizes to the same length, in the EAP-IG
library's layout (`clean`, `corrupted`, `correct_idx`, `incorrect_idx`).

## Training

{r['steps']:,} steps of {r['batch_size']} documents (AdamW, lr {r['lr']:g} with {r['warmup']} warm-up steps and a
cosine decay, weight decay {r['weight_decay']:g}, gradient norm clipped at 1), seed {r['seed']}, on
{record['threads']} CPU thread(s): **{record['train_seconds']:.0f} s ({minutes:.1f} min)** including corpus generation and
tokenizer training. The corpus (`corpus.txt.gz`): {r['n_documents']:,} documents, {_corpus_mix(r)}. `training.json` has the recipe, the loss curve and the held-out accuracy during
training; `training/` has the code that generated the corpus and trained the model. Rebuild:
`cbench build lm --out DIR` (the same recipe by default).

## Use

```
cbench pull {name}                        # prints the snapshot's path on its last line
M=$(cbench pull {name} | tail -1)
cbench discover --model $M --task $M/ioi.csv -m eap-ig-inputs --out scores.json
cbench bench --model $M --task $M/greater-than.csv --out bench/
```

```python
import transformers
model = transformers.AutoModelForCausalLM.from_pretrained(M)
tok = transformers.AutoTokenizer.from_pretrained(M)
```
"""


def _corpus_mix(r: dict) -> str:
    share = r.get("filler_share", 0.0)
    parts = []
    if share:
        parts.append(f"{100 * share:.0f} % filler only (1-3 sentences naming no one)")
    rest = "the rest" if share else "all"
    task = f"{rest} one task sentence each, {100 * r['ioi_share']:.0f} % of them IOI-like and the others greater-than-like"
    if r.get("max_filler"):
        where = "on either side" if r.get("filler_before", True) else "after it"
        task += f", with 0-{r['max_filler']} filler sentences {where}"
    return "; ".join(parts + [task])


@click.command("lm")
@click.option("--out", default="build/lm-release", type=click.Path(path_type=Path), show_default=True,
              callback=check_out_tree, help="where the repository <out>/<name> is written")
@click.option("--name", default=DEFAULT_NAME, show_default=True, help="the repository's name")
@click.option("--work-dir", default=None, type=click.Path(path_type=Path),
              help="where training writes its own files [default: <out>/.train]")
@click.option("--steps", type=counts(1, 10_000_000), default=None, help="optimisation steps [default: the recipe's]")
@click.option("--lr", type=floats(0, 10, low_open=True), default=None, help="peak learning rate [default: the recipe's]")
@click.option("--seed", type=SEED_TYPE, default=0, show_default=True)
@click.option("--threads", type=counts(1, 256), default=1, show_default=True, help="torch threads")
def build_lm_cmd(out, name, work_dir, steps, lr, seed, threads):
    """Train the small language model (next-token prediction on the generated corpus) and write
    it as a hub repository with its pairs, corpus, training code and card."""
    from cbench_builders.lm.train import Recipe, train

    recipe = Recipe(seed=seed, threads=threads, **{k: v for k, v in (("steps", steps), ("lr", lr)) if v is not None})
    work = work_dir or out / ".train"
    t0 = time.perf_counter()
    report = train(work, recipe, log=lambda line: click.echo(line, err=True))
    repo = package(work, out, name)
    click.echo(json.dumps({"repository": str(repo), "held_out": report["held_out"],
                           "train_seconds": report["train_seconds"],
                           "total_seconds": round(time.perf_counter() - t0, 1), "recipe": asdict(recipe)}, indent=1))
