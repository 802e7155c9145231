"""``cbench build stress``: build, gate and write the stress tier's models.

Each design (:mod:`cbench_builders.stress.designs`) becomes a model artifact with
``model_kind: "stress"``: its hand-set weights, ``circuit.json`` with every ground-truth edge's
class, the edges without signal marked, and the mechanism's gates; ``meta.json`` with the gate
figures and the predictions written before any bench run; and a card. A model is written only
when every gate holds (``cbench verify``'s own code, :func:`cbench.verify.mechanisms.verify_stress`,
on the validation pairs and on fresh ones).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from cbench.cli.options import check_out_tree
from cbench.errors import BuildError, UsageError
if TYPE_CHECKING:  # the designs import torch; `cbench build stress --help` must not
    from cbench_builders.stress.designs import StressDesign

SEED = 20261126  # the fresh pairs the build's gates use (cbench verify draws its own)


def meta_of(d: StressDesign, gates: dict | None = None) -> dict:
    k = d.kit
    return {
        "schema": "cbench/model-meta/v1", "case": d.name, "model_kind": "stress", "task_type": "categorical",
        "description": d.description, "input_tokens": ["BOS", *k.vocab], "bos_token": "BOS", "pad_token": None,
        "output_classes": list(k.vocab), "min_seq_len": k.n_ctx - 1, "max_seq_len": k.n_ctx, "causal": False,
        "seed": None, "training": None, "metrics": None, "dataset_revision": None, "training_time_s": None,
        "hardware": None, "high_level": {"kind": "stress", "mechanism": d.mechanism},
        "construction": d.construction,
        "predictions": {m: {"expect": p.expect, "why": p.why} for m, p in sorted(d.predictions.items())},
        **({"gates": gates} if gates is not None else {}),
    }


def circuit_of(d: StressDesign, graph) -> dict:
    edges = sorted(set(d.edges) | set(d.marked))
    nodes = set()
    for e in edges:
        src, dst = e.split("->")
        nodes |= {src, dst.split("<")[0]}
    return {
        "schema": "cbench/circuit/v1", "case": d.name, "model_kind": "stress", "granularity": "qkv",
        "graph": {"n_layers": graph.n_layers, "n_heads": graph.n_heads, "has_mlp": graph.has_mlp,
                  "parallel_attn_mlp": graph.parallel_attn_mlp},
        "nodes": sorted(nodes, key=lambda n: (n != "input", n == "logits", n)), "edges": edges,
        "edge_signal": {e: {"signal": False, "why": w} for e, w in sorted(d.marked.items())},
        "edge_classes": {e: c for e, c in sorted(d.edges.items())},
        "mechanism": {"kind": d.mechanism, "gates": d.gates, **({"contexts": d.contexts} if d.contexts else {})},
        **({"floor": d.floor} if d.floor else {}),
    }


def gate_design(d: StressDesign, n_pairs: int = 1000):
    """The model, its circuit and meta, and the verify report on validation and fresh pairs."""
    from cbench.runtime import CircuitRuntime
    from cbench.tasks.data import sample_pairs
    from cbench.tasks.stress import stress_pairs
    from cbench.verify.mechanisms import verify_stress

    model = d.kit.model()
    graph = CircuitRuntime(model).graph
    circuit = circuit_of(d, graph)
    meta = meta_of(d)
    missing = [e for e in circuit["edges"] if not graph.has_edge(e)]
    if missing:
        raise BuildError(f"{d.name}: circuit edges not in the model's graph: {', '.join(missing)}")
    report = verify_stress(model, meta, circuit, {"validation": stress_pairs(meta, "validation", n_pairs),
                                                  "fresh": sample_pairs(meta, n_pairs, seed=SEED)})
    return model, circuit, meta, report


def card(d: StressDesign, meta: dict, circuit: dict, report, config: dict) -> str:
    from cbench_builders.release.cards import render_card

    classes: dict[str, list[str]] = {}
    for e, c in circuit["edge_classes"].items():
        classes.setdefault(c, []).append(e)
    return render_card("stress_model", {"repo": f"cbench/{d.name}", "design": d, "meta": meta, "circuit": circuit,
                                        "classes": classes, "gates": report.summary(), "config": config})


def build_one(d: StressDesign, out: Path, n_pairs: int = 1000, overwrite: bool = False):
    from cbench.artifacts.model import write_model_artifact
    from cbench.artifacts.transformer_lens_adapter import config_to_json

    t0 = time.perf_counter()
    model, circuit, meta, report = gate_design(d, n_pairs)
    if not report.passed:
        raise BuildError(f"{d.name}: gates do not hold, not written:\n{report.format()}")
    meta = meta_of(d, report.summary())
    readme = card(d, meta, circuit, report, config_to_json(model.cfg))
    art = write_model_artifact(out / d.name, model, meta, circuit, readme=readme, overwrite=overwrite)
    return art, report, time.perf_counter() - t0


@click.command("stress")
@click.option("--out", "out_dir", default="build/stress", type=click.Path(path_type=Path), show_default=True, callback=check_out_tree,
              help="where the models are written, one directory each")
@click.option("--only", default=None, help="comma-separated model names (default: every stress model)")
@click.option("--n-pairs", default=1000, show_default=True, type=click.IntRange(50, 100_000),
              help="pairs per set for the gates")
@click.option("--overwrite", is_flag=True, help="replace models already in --out")
def build_stress_cmd(out_dir: Path, only: str | None, n_pairs: int, overwrite: bool):
    """Build the stress tier: hand-set models that plant one mechanism each, written only when
    their node, edge and mechanism gates hold."""
    from cbench.runtime.threads import use_cpu_threads
    from cbench_builders.stress.registry import DESIGNS

    use_cpu_threads()
    names = list(DESIGNS) if only is None else [s.strip() for s in only.split(",") if s.strip()]
    unknown = [n for n in names if n.removeprefix("stress-") not in DESIGNS]
    if not names or unknown:
        raise UsageError(f"--only {only!r}: unknown model(s) {', '.join(unknown) or '(none given)'}; "
                         f"the stress models are {', '.join(DESIGNS)}")
    out_dir.mkdir(parents=True, exist_ok=True)
    failed = []
    for i, name in enumerate(names, 1):
        d = DESIGNS[name.removeprefix("stress-")]()
        if (out_dir / d.name / "meta.json").is_file() and not overwrite:  # resumable: built ones stay
            click.echo(f"[{i}/{len(names)}] {d.name}: already built in {out_dir / d.name} (--overwrite rebuilds)")
            continue
        try:
            art, report, secs = build_one(d, out_dir, n_pairs, overwrite)
        except BuildError as exc:
            failed.append(d.name)
            click.echo(f"[{i}/{len(names)}] {exc}", err=True)
            continue
        click.echo(f"[{i}/{len(names)}] {d.name} ({d.mechanism}): {len(report.gates)} gates hold, "
                   f"written to {out_dir / d.name} in {secs:.1f} s")
    if failed:
        raise BuildError(f"{len(failed)} model(s) failed their gates and were not written: {', '.join(failed)}")
