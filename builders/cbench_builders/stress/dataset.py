"""``cbench build stress-dataset``: the stress tier's counterfactual pairs as a Hugging Face
dataset (``cbench/stress-counterfactuals``, one config per model, splits train, validation and
test).

A stress model reads every token sequence of its length, so its pairs are uniform (base, source)
sequences; each split holds the rows :func:`cbench.tasks.stress.stress_pairs` draws for it (the
rows ``cbench verify`` and ``cbench bench`` used before the dataset existed), and the labels are
the model's own answers, since a hand-set model *is* its mechanism: ``base_label`` and
``source_label`` hold the class index it answers at each position after BOS. The parquet is
byte-deterministic (:mod:`cbench_builders.release.parquet`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from cbench.cli.options import check_out_tree
from cbench.errors import UsageError
from cbench_builders.stress.build import meta_of

if TYPE_CHECKING:  # numpy, pyarrow and the designs (torch) are imported where used: --help needs none
    import numpy as np
    import pyarrow as pa
    import torch

REPO = "cbench/stress-counterfactuals"
SPLITS = ("train", "validation", "test")
ROWS = 1000


def data_file(name: str, split: str) -> str:
    return f"{name}/{split}-00000-of-00001.parquet"


def _answers(model, ids: torch.Tensor) -> np.ndarray:
    import numpy as np
    import torch

    with torch.no_grad():
        return model(ids)[:, 1:].argmax(-1).numpy().astype(np.int8)


def split_table(model, meta: dict, split: str, rows: int = ROWS) -> pa.Table:
    """One split's rows: the tokens (BOS left out), the ids (BOS first) and the model's answers."""
    import numpy as np
    import pyarrow as pa

    from cbench.tasks.stress import stress_pairs

    data = stress_pairs(meta, split, rows)
    tokens = meta["input_tokens"]
    base, source = data.base.numpy(), data.source.numpy()
    schema = pa.schema([
        ("base_tokens", pa.list_(pa.string())), ("source_tokens", pa.list_(pa.string())),
        ("base_ids", pa.list_(pa.int8())), ("source_ids", pa.list_(pa.int8())),
        ("base_label", pa.list_(pa.int8())), ("source_label", pa.list_(pa.int8())),
    ], metadata={b"cbench": json.dumps({"case": meta["case"], "split": split, "rows": rows,
                                        "mechanism": meta["high_level"]["mechanism"],
                                        "sampler": "cbench.tasks.stress.stress_pairs"}, sort_keys=True).encode()})
    return pa.table({
        "base_tokens": [[tokens[i] for i in row[1:]] for row in base],
        "source_tokens": [[tokens[i] for i in row[1:]] for row in source],
        "base_ids": base.astype(np.int8).tolist(), "source_ids": source.astype(np.int8).tolist(),
        "base_label": _answers(model, data.base).tolist(), "source_label": _answers(model, data.source).tolist(),
    }, schema=schema)


def build_stress_dataset(out: Path, names: list[str], rows: int = ROWS, echo=click.echo) -> Path:
    """Write every model's three splits and the card into ``out``; returns the card's path."""
    from cbench_builders.release.cards import render_card, size_category
    from cbench_builders.release.parquet import write_parquet
    from cbench_builders.stress.registry import DESIGNS

    configs = []
    for i, name in enumerate(names, 1):
        d = DESIGNS[name.removeprefix("stress-")]()
        meta = meta_of(d)
        model = d.kit.model()
        for split in SPLITS:
            write_parquet(split_table(model, meta, split, rows), out / data_file(d.name, split))
        configs.append({"name": d.name, "mechanism": d.mechanism, "description": d.description,
                        "splits": [{"name": s, "path": data_file(d.name, s), "rows": rows} for s in SPLITS]})
        echo(f"[{i}/{len(names)}] {d.name}: {len(SPLITS)} x {rows} pairs")
    text = render_card("dataset_stress", {"repo": REPO, "configs": configs, "rows": rows,
                                          "size_category": size_category(rows * len(SPLITS) * len(configs)),
                                          "vocab": list(DESIGNS["or-1"]().kit.vocab)}, data_root=out)
    card = out / "README.md"
    card.write_text(text)
    return card


def _latest(root: Path) -> Path:
    return max((d for d in root.iterdir() if d.is_dir() and d.name.startswith("v")),
               key=lambda d: tuple(int(x) for x in d.name[1:].split(".")))


def extend_release(out: Path, built: Path, names: list[str], zoo: Path, echo=click.echo) -> Path:
    """``cbench/stress-counterfactuals`` with every config of its newest release (copied byte for
    byte) and one config per model in ``built`` named in ``names`` (a hand-set design or a trained
    counterpart: the splits' rows as :func:`split_table` draws them, labelled with that model's answers)."""
    import json
    import shutil

    from cbench.artifacts.model import read_model_artifact
    from cbench_builders.release.cards import render_card, size_category
    from cbench_builders.release.parquet import write_parquet

    released = _latest(zoo / "releases" / "datasets" / REPO)
    models = zoo / "releases" / "models" / "cbench"
    configs = []
    order = [line.split(":", 1)[1].strip() for line in (released / "README.md").read_text().splitlines()
             if line.strip().startswith("- config_name:")]  # the release's own order (its first is the default)
    order = list(dict.fromkeys(order))  # (each config is named twice: configs and dataset_info)
    for name in order:
        d = released / name
        if name in names or not d.is_dir():
            continue
        shutil.copytree(d, out / d.name, dirs_exist_ok=True)
        meta = json.loads((_latest(models / d.name) / "meta.json").read_text())
        configs.append({"name": d.name, "mechanism": meta["high_level"]["mechanism"], "description": meta["description"],
                        "splits": [{"name": s, "path": data_file(d.name, s), "rows": ROWS} for s in SPLITS]})
    for name in names:
        art = read_model_artifact(Path(built) / name)
        model = art.load_model(tokenizer=False)
        for split in SPLITS:
            write_parquet(split_table(model, art.meta, split, ROWS), out / data_file(name, split))
        configs.append({"name": name, "mechanism": art.meta["high_level"]["mechanism"],
                        "description": art.meta["description"],
                        "splits": [{"name": s, "path": data_file(name, s), "rows": ROWS} for s in SPLITS]})
        echo(f"{name}: {len(SPLITS)} x {ROWS} pairs")
    vocab = [t for t in json.loads((_latest(models / "stress-or-1") / "meta.json").read_text())["input_tokens"]
             if t != "BOS"]
    text = render_card("dataset_stress", {"repo": REPO, "configs": configs, "rows": ROWS,
                                          "size_category": size_category(ROWS * len(SPLITS) * len(configs)),
                                          "vocab": vocab}, data_root=out)
    card = out / "README.md"
    card.write_text(text)
    echo(f"{REPO}: {len(configs)} configs ({released.name}'s and {len(names)} new) in {out}")
    return card


@click.command("stress-dataset")
@click.option("--out", "out_dir", default="build/stress-dataset/stress-counterfactuals", show_default=True,
              type=click.Path(path_type=Path), callback=check_out_tree,
              help="the dataset's directory (card and parquet files)")
@click.option("--only", default=None, help="comma-separated model names (default: every stress model)")
@click.option("--rows", default=ROWS, show_default=True, type=click.IntRange(10, 100_000), help="pairs per split")
@click.option("--extend-release", "built", default=None, type=click.Path(path_type=Path, file_okay=False),
              help="instead: the newest release's configs byte for byte plus one per --only model built in this "
                   "directory (by `cbench build stress --out`)")
def build_stress_dataset_cmd(out_dir: Path, only: str | None, rows: int, built: Path | None):
    """Write the stress tier's counterfactual pairs as a Hugging Face dataset, one config per model."""
    from cbench.hub.zoo import zoo_dir
    from cbench_builders.stress.registry import DESIGNS

    if built is not None:
        names = [s.strip() for s in (only or "").split(",") if s.strip()]
        missing = [n for n in names if not (built / n / "meta.json").is_file()]
        if not names or missing:
            raise UsageError(f"--extend-release {built}: name the models to add with --only; not built there: "
                             f"{', '.join(missing) or '(none given)'}")
        extend_release(out_dir, built, names, Path(zoo_dir()))
        return

    names = list(DESIGNS) if only is None else [s.strip().removeprefix("stress-") for s in only.split(",") if s.strip()]
    unknown = [n for n in names if n not in DESIGNS]
    if not names or unknown:
        raise UsageError(f"--only {only!r}: unknown model(s) {', '.join(unknown) or '(none given)'}; "
                         f"the stress models are {', '.join(DESIGNS)}")
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"--out {out_dir}: exists and is not a directory")
    card = build_stress_dataset(out_dir, names, rows)
    click.echo(f"{REPO}: {len(names)} configs written to {card.parent}")
