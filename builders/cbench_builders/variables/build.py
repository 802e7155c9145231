"""``cbench build variables``: build, gate and write the variables tier's models.

Each design (:mod:`cbench_builders.variables.designs`) becomes a model artifact with
``model_kind: "variables"``: its hand-set weights; ``meta.json`` with the high-level model
(``high_level``, :mod:`cbench.tasks.variables`) and the gate figures; ``circuit.json`` with the
circuit's edges and ``variables`` (each variable's kind, true location, the orthonormal basis of
its subspace per component, the locations that hold it, what it shares a component with, and
whether it can separate featurizers); ``saes.safetensors``, one small SAE per hidden vector (every
candidate location's node and residual layer, trained on the train split's inputs) for the
DBM-over-SAE featurizer; and a card. A model is written only when every gate holds
(:func:`cbench.verify.variables.verify_variables`, ``cbench verify``'s own code).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click
from cbench.cli.options import check_out_tree
from cbench.errors import BuildError, UsageError

if TYPE_CHECKING:  # the designs import torch; `cbench build variables --help` must not
    from cbench_builders.variables.designs import Design

SAE_SEED = 0
SAE_TRAIN_PAIRS = 2048


def meta_of(d: Design, gates: dict | None = None) -> dict:
    k = d.kit
    return {
        "schema": "cbench/model-meta/v1", "case": d.name, "model_kind": "variables", "task_type": "categorical",
        "description": d.description, "input_tokens": ["BOS", *k.vocab], "bos_token": "BOS", "pad_token": None,
        "output_classes": list(k.vocab), "min_seq_len": k.n_ctx, "max_seq_len": k.n_ctx, "causal": False,
        "seed": d.seed, "training": None, "metrics": None, "dataset_revision": None, "training_time_s": None,
        "hardware": None, "high_level": d.high_level(), "construction": "hand-set weights",
        **({"gates": gates} if gates is not None else {}),
    }


def circuit_of(d: Design, graph) -> dict:
    edges, marks = set(), {}
    reads = {}
    for v in d.variables:
        for layer in v.layers:
            for r in v.reads:
                reads.setdefault(r, set()).add(layer)
            edges.add(f"m{layer}->m{d.out_layer}" if layer != d.out_layer else None)
    edges.discard(None)
    for i, layers in reads.items():
        edges.add(f"input->a0.h{i}<v>")
        for qk in ("q", "k"):
            e = f"input->a0.h{i}<{qk}>"
            edges.add(e)
            marks[e] = {"signal": False, "why": "reads position only (every query attends to a fixed position), "
                                                "which base and source share"}
        for layer in layers:
            edges.add(f"a0.h{i}->m{layer}")
    edges.add(f"m{d.out_layer}->logits")
    edges = sorted(edges)
    nodes = set()
    for e in edges:
        src, dst = e.split("->")
        nodes |= {src, dst.split("<")[0]}
    return {
        "schema": "cbench/circuit/v1", "case": d.name, "model_kind": "variables", "granularity": "qkv",
        "graph": {"n_layers": graph.n_layers, "n_heads": graph.n_heads, "has_mlp": graph.has_mlp,
                  "parallel_attn_mlp": graph.parallel_attn_mlp},
        "nodes": sorted(nodes, key=lambda n: (n != "input", n == "logits", n)), "edges": edges,
        "edge_signal": dict(sorted(marks.items())), "variables": d.records,
    }


def train_saes(model, meta: dict) -> tuple[dict, dict]:
    """One SAE per candidate location's hidden vector (nodes and residual layers), trained on the
    vectors of the train split's inputs at every position."""
    import torch

    from cbench.localization.pyvene_adapter import collect
    from cbench.localization.sae import site_key, train_sae
    from cbench.localization.variables import candidate_locations, parse_location
    from cbench.tasks.variables import variables_pairs

    data = variables_pairs(meta, "train", SAE_TRAIN_PAIRS)
    inputs = torch.cat([data.base, data.source])
    saes, stats = {}, {}
    for name in candidate_locations(model.cfg):
        site = parse_location(name, model.cfg).parts[0].site
        acts = collect(model, site, inputs)
        sae, st = train_sae(acts.reshape(-1, acts.shape[-1]), seed=SAE_SEED)
        saes[site_key(site)] = sae
        stats[name] = st
    return saes, stats


def card(d: Design, meta: dict, circuit: dict, report, config: dict, sae_stats: dict) -> str:
    from cbench_builders.release.cards import render_card

    return render_card("variables_model", {"repo": f"cbench/{d.name}", "design": d, "meta": meta, "circuit": circuit,
                                           "gates": report.summary(), "config": config, "sae_stats": sae_stats})


def build_one(d: Design, out: Path, n_pairs: int = 1000, overwrite: bool = False):
    from cbench.artifacts.model import write_model_artifact
    from cbench.artifacts.transformer_lens_adapter import config_to_json
    from cbench.localization.sae import SAE_FILE, save_saes
    from cbench.runtime import CircuitRuntime
    from cbench.verify.variables import verify_variables

    t0 = time.perf_counter()
    model = d.kit.model()
    graph = CircuitRuntime(model).graph
    circuit = circuit_of(d, graph)
    missing = [e for e in circuit["edges"] if not graph.has_edge(e)]
    if missing:
        raise BuildError(f"{d.name}: circuit edges not in the model's graph: {', '.join(missing)}")
    meta = meta_of(d)
    report = verify_variables(model, meta, circuit, n_pairs)
    if not report.passed:
        raise BuildError(f"{d.name}: gates do not hold, not written:\n{report.format()}")
    meta = meta_of(d, report.summary())
    saes, sae_stats = train_saes(d.kit.model(), meta)
    readme = card(d, meta, circuit, report, config_to_json(model.cfg), sae_stats)
    with tempfile.TemporaryDirectory(prefix="cbench-saes-") as tmp:
        sae_path = save_saes(Path(tmp) / SAE_FILE, saes)
        art = write_model_artifact(out / d.name, model, meta, circuit, readme=readme,
                                   subartifacts={SAE_FILE: sae_path}, overwrite=overwrite)
    return art, report, time.perf_counter() - t0


@click.command("variables")
@click.option("--out", "out_dir", default="build/variables", type=click.Path(path_type=Path), show_default=True, callback=check_out_tree,
              help="where the models are written, one directory each")
@click.option("--only", default=None, help="comma-separated model names (default: all nine)")
@click.option("--n-pairs", default=1000, show_default=True, type=click.IntRange(50, 100_000),
              help="pairs per set for the gates")
@click.option("--overwrite", is_flag=True, help="replace models already in --out")
def build_variables_cmd(out_dir: Path, only: str | None, n_pairs: int, overwrite: bool):
    """Build the variables tier: hand-set models whose causal variables share components, sit in
    a rotated basis or are spread over components, written only when their gates hold."""
    from cbench.runtime.threads import use_cpu_threads
    from cbench_builders.variables.designs import DESIGN_NAMES, design

    use_cpu_threads()
    names = list(DESIGN_NAMES) if only is None else [s.strip() for s in only.split(",") if s.strip()]
    unknown = [n for n in names if n not in DESIGN_NAMES]
    if not names or unknown:
        raise UsageError(f"--only {only!r}: unknown model(s) {', '.join(unknown) or '(none given)'}; "
                         f"the variables models are {', '.join(DESIGN_NAMES)}")
    out_dir.mkdir(parents=True, exist_ok=True)
    failed = []
    for i, name in enumerate(names, 1):
        if (out_dir / name / "meta.json").is_file() and not overwrite:  # resumable: built ones stay
            click.echo(f"[{i}/{len(names)}] {name}: already built in {out_dir / name} (--overwrite rebuilds)")
            continue
        d = design(name)
        try:
            _art, report, secs = build_one(d, out_dir, n_pairs, overwrite)
        except BuildError as exc:
            failed.append(name)
            click.echo(f"[{i}/{len(names)}] {exc}", err=True)
            continue
        click.echo(f"[{i}/{len(names)}] {name} ({d.kind}): {len(report.gates)} gates hold, "
                   f"written to {out_dir / name} in {secs:.1f} s")
    if failed:
        raise BuildError(f"{len(failed)} model(s) failed their gates and were not written: {', '.join(failed)}")
