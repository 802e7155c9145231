"""``cbench build siit``: train SIIT (and IIT) models from compiled Tracr cases, verify, write artifacts.

For each case: read the Tracr artifact (``<tracr-dir>/tracr-case-<id>``), derive the low-level
architecture and the correspondence, train (hyperparameters from the case spec's ``training``
block, overridable on the command line), verify the release gates (validation IIA and SIIA
>= 99.5 %, no out-of-circuit node with a resample effect above 1 %), and write the model
artifact ``<out>/case-<id>`` (or ``<out>/iit-case-<id>`` with ``--iit``) with the Tracr model as
``tracr/``, ``correspondence.json``, the mapped ``circuit.json`` and a card with the node-effect
table. A model that misses a gate is written only with ``--keep-failed`` and is marked so.

IIT models (``--iit``, strictness weight 0) are the comparison set of the paper's RQ1: they are
expected to fail the strictness gates, so only the IIA gate applies to them.

Node effects come from :func:`cbench.scoring.ablation.node_effects` (the one implementation shared with
``cbench ablate``), run on the final validation pairs with the high-level model's labels.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import click

import cbench
from cbench.cli.executor_opts import executor_options
from cbench.cli.options import (MAX_COUNT, MAX_EXAMPLES, MAX_SECONDS, MAX_WEIGHT, SEED_TYPE, check_out_tree, counts,
                                floats)
from cbench.errors import BuildError, CbenchError, UsageError
from cbench.tasks.labels import NONE_LABEL
from cbench_builders.siit.config import EDGE_SAMPLINGS, KEEPS

RELEASE_MIN_IIA = 0.995
RELEASE_MIN_SIIA = 0.995
RELEASE_MAX_OUT_EFFECT = 0.01
INVARIANT_WHY = ("the program ignores it under resample ablation (it carries position, which base and source "
                 "share); trained to be ignored too, like the edges outside the circuit")
FINAL_EVAL_FACTOR = 2  # the final validation uses twice the per-epoch pairs, fresh ones


@dataclass
class SIITOutcome:
    case: str
    kind: str
    path: Path | None
    metrics: dict
    epochs: int
    seconds: float
    max_out_effect: float
    mean_out_effect: float
    released: bool
    reason: str = ""
    effects: list = field(default_factory=list)


def correspondence_document(case: str, mapping: dict[str, str], hl_circuit: dict, ll_shape: dict,
                            hl_shape: dict, seed: int) -> dict:
    """The ``cbench/correspondence/v1`` document: one entry per (high-level op, component), with the
    low-level node, the hook where it is interchanged and the head index."""
    from cbench_builders.siit.interchange import site_of

    ops_by_component: dict[str, list[str]] = {}
    for op in (hl_circuit.get("high_level") or {}).get("ops", []):
        comps = op.get("components") or ([op["component"]] if op.get("component") else [])
        for comp in comps:
            ops_by_component.setdefault(comp, []).append(op["name"])
    entries = []
    for hl, ll in mapping.items():
        lls = [ll] if isinstance(ll, str) else list(ll)
        low = [{"node": n, "hook": site_of(n).hook, "head": site_of(n).head} for n in lls]
        for op in sorted(ops_by_component.get(hl, [])) or [hl]:
            entries.append({"high_level": op, "high_level_node": hl, "low_level": low})
    return {"schema": "cbench/correspondence/v1", "case": case, "graph": ll_shape, "high_level_graph": hl_shape,
            "seed": seed, "nodes": entries,
            "notes": "Interchange interventions act on whole components: a head at blocks.L.attn.hook_z[head] "
                     "(equivalent to its hook_result), an MLP at blocks.L.hook_mlp_out."}


def verify_node_effects(model, pairs, labels, task_type: str, circuit_nodes: set[str],
                        kinds=("resample", "mean", "zero")) -> list[dict]:
    """Per head and MLP: in_circuit, effect under each ablation kind and the normalized KL (resample),
    from :func:`cbench.scoring.ablation.node_effects`, averaged over the length buckets of ``pairs``
    (weighted by the number of pairs). ``labels[i]`` are the high-level labels of ``pairs[i]``'s
    bases (``[B, P-1]``)."""
    import torch

    from cbench.scoring.ablation import node_effects
    from cbench.tasks.data import TaskData
    from cbench.tasks.labels import NO_CLASS

    acc: dict[str, dict] = {}
    total = 0
    for (base, source), y in zip(pairs, labels):
        B, P = base.shape
        full = torch.zeros(B, P, dtype=y.dtype)
        valid = torch.ones(B, P, dtype=torch.bool)
        valid[:, 0] = False
        if task_type == "categorical":  # positions without a high-level class (RASP None) are not scored
            valid[:, 1:] = y != NO_CLASS
            y = y.clamp(min=0)
        full[:, 1:] = y
        data = TaskData(base, source, full, valid, task_type, split="validation",
                        info={"origin": "siit validation pairs"})
        for e in node_effects(model, data, kinds=kinds):
            row = acc.setdefault(e.node, {"node": e.node, "in_circuit": e.node in circuit_nodes})
            row[e.kind] = row.get(e.kind, 0.0) + e.effect * B
            if e.kind == "resample":
                nkl = e.normalized_kl
                row["normalized_kl"] = row.get("normalized_kl", 0.0) + (nkl if nkl == nkl else 0.0) * B
        total += B
    rows = []
    for row in acc.values():
        for k in (*kinds, "normalized_kl"):
            if k in row:
                row[k] = row[k] / total
        row.setdefault("normalized_kl", float("nan"))
        rows.append(row)
    return rows


def train_case(case: str, tracr_dir: Path, out_dir: Path, *, iit: bool = False, overrides: dict | None = None,
               progress: bool = True, keep_failed: bool = False, failed_dir: Path | None = None,
               log=None, gate_pairs: int | None = None, checkpoint_dir: Path | None = None) -> SIITOutcome:
    import torch

    from cbench.verify.gates import MAX_COMPLEMENT_EFFECT, MIN_EDGE_CHANGED, MIN_ORACLE_AUROC
    from cbench.artifacts.model import read_model_artifact, write_model_artifact
    from cbench.artifacts.transformer_lens_adapter import build_model, config_to_json
    from cbench_builders.cases.specs import load_case
    from cbench_builders.siit.architecture import low_level_for_case, make_correspondence, map_circuit_edges
    from cbench_builders.siit.config import TrainingConfig
    from cbench_builders.siit.data import make_input_set
    from cbench_builders.siit.interventions import invariant_edges
    from cbench_builders.siit.trainer import SIITTrainer

    src = Path(tracr_dir) / f"tracr-case-{case}"
    if not src.is_dir():
        raise BuildError(f"case {case}: no compiled Tracr model at {src}; run `cbench build tracr --cases {case}` first")
    hl_art = read_model_artifact(src)
    meta, hl_circuit = hl_art.meta, hl_art.circuit
    if hl_circuit is None:
        raise BuildError(f"case {case}: {src} has no circuit.json")
    spec = load_case(case)
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    if iit:
        overrides["siit_weight"] = 0.0
    seed = int(spec.seed if spec.seed is not None else (meta.get("seed") or 0))
    try:
        cfg = TrainingConfig.from_spec(spec.training, **{"seed": seed, **overrides})
    except (TypeError, ValueError) as e:
        raise BuildError(f"case {case}: bad training hyperparameters: {e}") from None
    kind = cfg.kind
    name = f"{'iit-' if kind == 'iit' else ''}case-{case}"
    hl_model = hl_art.load_model()

    hl_nodes = [n for n in hl_circuit["nodes"] if n not in ("input", "logits")]
    low_level = spec.spec.get("low_level") or {}
    try:
        ll_config = low_level_for_case(hl_art.config, case, low_level, seed=cfg.seed, model_name=f"cbench-{name}")
        mapping = make_correspondence(hl_nodes, ll_config["n_heads"], seed=cfg.seed,
                                      policy=low_level.get("correspondence", "random"), heads=low_level.get("heads"))
    except ValueError as e:
        raise BuildError(f"case {case}: bad low_level block: {e}") from None
    data = make_input_set(meta, cfg.train_size, cfg.seed)
    none_class = _none_class(hl_model, meta, data, low_level)
    if none_class is not None:  # RASP None is an explicit extra output class the model must compute
        ll_config["d_vocab_out"] = none_class + 1
    ll_model = build_model(ll_config)
    ll_model.train()
    truth_edges = map_circuit_edges(hl_circuit["edges"], mapping)
    invariant = []
    if cfg.edge_strict and cfg.invariant_edges:  # e.g. position-only q/k: resample-ablated in training too
        invariant = map_circuit_edges(invariant_edges(hl_model, hl_circuit["edges"], data.train, meta["task_type"],
                                                      seed=cfg.seed), mapping)

    try:
        trainer = SIITTrainer(hl_model, ll_model, mapping, meta["task_type"], cfg, none_class=none_class,
                              truth_edges=truth_edges, invariant_edges=invariant)
    except ValueError as e:  # e.g. --iit-node-weight naming a node the program does not have
        raise BuildError(f"case {case}: {e}") from None
    checkpoint = Path(checkpoint_dir) / f"{name}.pt" if checkpoint_dir is not None else None
    result = trainer.train(data, progress=progress, log=log, checkpoint=checkpoint)

    # final validation: fresh pairs (another seed), metrics and node effects on the same pairs
    pairs = trainer.eval_pairs(data.val, FINAL_EVAL_FACTOR * cfg.eval_pairs, seed=cfg.seed + 2,
                               weighting=cfg.length_weighting)
    m = trainer.evaluate_pairs(pairs)
    with torch.no_grad():
        labels = [trainer._target(trainer.hl_f(b)) for b, _ in pairs]
    ll_nodes = sorted({mapping.get(n, n) for n in hl_circuit["nodes"]})
    circuit_components = {n for n in ll_nodes if n not in ("input", "logits")}
    effects = verify_node_effects(result.model, pairs, labels, meta["task_type"], circuit_components)
    out_effects = [e["resample"] for e in effects if not e["in_circuit"]]
    max_out = max(out_effects, default=0.0)
    mean_out = sum(out_effects) / len(out_effects) if out_effects else 0.0

    shape = {"n_layers": ll_config["n_layers"], "n_heads": ll_config["n_heads"], "has_mlp": True,
             "parallel_attn_mlp": False}
    hl_shape = {"n_layers": hl_art.config["n_layers"], "n_heads": hl_art.config["n_heads"],
                "has_mlp": not hl_art.config.get("attn_only", False), "parallel_attn_mlp": False}
    circuit = {
        "schema": "cbench/circuit/v1", "case": case, "model_kind": kind, "granularity": "qkv",
        "graph": shape, "nodes": ll_nodes, "edges": truth_edges,
    }
    if hl_circuit.get("high_level"):
        hl_ops = []
        for op in hl_circuit["high_level"].get("ops", []):
            op = dict(op)
            if op.get("components"):
                op["components"] = [mapping.get(c, c) for c in op["components"]]
            hl_ops.append(op)
        circuit["high_level"] = {**hl_circuit["high_level"], "ops": hl_ops}
    corr = correspondence_document(case, mapping, hl_circuit, shape, hl_shape, cfg.seed)

    # the release gates, recomputed through hooks and the graph runtime (cbench.verify.gates), on the
    # pair sets `cbench verify` uses (the counterfactuals dataset's validation split and its fresh
    # pairs, same count and seed), so a released model passes its own verification; ground-truth
    # edges without signal get marked
    base_meta = {k: v for k, v in meta.items() if k != "files"}
    base_meta["model_kind"] = kind
    if none_class is not None:
        base_meta.update(none_class=none_class, output_classes=list(meta["output_classes"]) + [NONE_LABEL])
    result.model.eval()
    if invariant and kind == "siit":  # declared from the program, checked by the marked-edge gate
        circuit["edge_signal"] = {e: {"signal": False, "why": INVARIANT_WHY} for e in invariant}
    report = _release_gates(case, result.model, base_meta, circuit, corr, hl_model, gate_pairs)
    marks = report.no_signal_marks()
    if marks and kind == "siit":
        circuit["edge_signal"] = marks
        report.accept_marks()
    reasons = [f"{g.name} {g.value:.4f} ({g.pairs}{'; ' + g.detail if g.detail else ''}) fails {g.op} {g.threshold:g}"
               for g in report.failures() if kind == "siit" or g.name in ("iia", "accuracy")]
    released = not reasons
    path = None
    if released or keep_failed:
        metrics = {"accuracy": m["accuracy"], "iia": m["iia"], "siia": m["siia"]}
        training = cfg.to_json()
        training.update({
            "data": data.describe(),
            "interventions": "per-example masks over whole components (head hook_z, MLP hook_mlp_out); "
                             + ("source activations with gradients" if cfg.source_gradients else
                                "source activations once per batch without gradients")
                             + ("; edge strictness: per-example resample ablation of edges outside the ground "
                                "truth through the graph runtime"
                                + (", source activations with gradients" if cfg.source_gradients else "")
                                if cfg.edge_strict else ""),
            "invariant_edges": invariant,
            "epochs_trained": result.epochs, "reached_target": result.reached_target, "kept_epoch": result.best_epoch,
            "training_cpu_s": round(result.training_cpu_s, 3),
            "high_level_variables": "the Tracr circuit's heads and MLPs",
            "architecture": _architecture_note(low_level),
            "correspondence": low_level.get("correspondence", "random"),
        })
        if low_level.get("deviation"):
            training["architecture_deviation"] = low_level["deviation"]
        if (spec.training or {}).get("deviation"):  # a case trained otherwise than the main cases, and why
            training["deviation"] = spec.training["deviation"]
        new_meta = dict(base_meta)
        new_meta.update({
            "model_kind": kind, "seed": cfg.seed, "training": training, "metrics": metrics,
            "training_time_s": round(result.training_time_s, 3), "hardware": result.hardware,
            "cbench_version": cbench.__version__, "dataset_revision": None,
            "released": released, "release_gate_failures": reasons,
            "release_gates": {"min_iia": RELEASE_MIN_IIA, "min_siia": RELEASE_MIN_SIIA,
                              "max_out_of_circuit_resample_effect": RELEASE_MAX_OUT_EFFECT,
                              "max_complement_edge_effect": MAX_COMPLEMENT_EFFECT,
                              "min_edge_changed": MIN_EDGE_CHANGED,
                              "min_edge_score": "above every edge outside the ground truth",
                              "min_oracle_edge_auroc": MIN_ORACLE_AUROC,
                              "pairs": "cbench verify's: " + ", ".join(f"{k} {v}" for k, v in report.n_pairs.items())
                                       + " (the counterfactuals validation split; fresh pairs with verify's seed)"},
            "gates": report.summary(), "edge_signals": [asdict(e) for e in report.edges],
            "validation": {"n_pairs": sum(len(b) for b, _ in pairs), "min_siia_node": m["min_siia_node"],
                           "max_out_of_circuit_resample_effect": max_out,
                           "mean_out_of_circuit_resample_effect": mean_out},
            "node_effects": effects,
            "history": [{k: h[k] for k in ("epoch", "accuracy", "iia", "siia", "min_siia_node", "edge_siia",
                                           "elapsed_s")} for h in result.history],
        })
        from cbench_builders.release.cards import render_card

        readme = render_card("siit_model", {
            "case": case, "kind": kind, "meta": new_meta, "config": config_to_json(ll_model.cfg),
            "correspondence": corr, "circuit": circuit, "effects": sorted(effects, key=_node_order),
            "released": released, "reasons": reasons, "repo": f"cbench/{name}",
            "gates": new_meta["release_gates"], "verify": report,
        })
        path = (Path(out_dir) if released or failed_dir is None else Path(failed_dir)) / name
        write_model_artifact(path, result.model, new_meta, circuit=circuit, correspondence=corr, readme=readme,
                             subartifacts={"tracr": src}, overwrite=True)
    return SIITOutcome(case, kind, path, {k: m[k] for k in ("accuracy", "iia", "siia")}, result.epochs,
                       result.training_time_s, max_out, mean_out, released, "; ".join(reasons), effects)


@dataclass(frozen=True)
class SIITTask:
    """One case to train: the unit of work of ``cbench build siit``, serial or on Ray workers."""

    case: str
    tracr_dir: Path
    out_dir: Path
    iit: bool
    overrides: dict
    keep_failed: bool
    failed_dir: Path | None
    progress: bool
    checkpoint_dir: Path | None = None


def train_task(task: SIITTask) -> SIITOutcome:
    return train_case(task.case, task.tracr_dir, task.out_dir, iit=task.iit, overrides=task.overrides,
                      keep_failed=task.keep_failed, failed_dir=task.failed_dir, progress=task.progress,
                      checkpoint_dir=task.checkpoint_dir)


def _none_class(hl_model, meta: dict, data, low_level: dict) -> int | None:
    """The extra output class of RASP ``None`` for a categorical case whose Tracr model gives no
    class somewhere on the training inputs (``low_level: {"none_class": false}`` turns it off)."""
    import torch

    from cbench.tasks.labels import NO_CLASS, high_level_classes
    from cbench_builders.siit.interchange import ComponentForward

    if meta["task_type"] != "categorical" or low_level.get("none_class") is False:
        return None
    f = ComponentForward(hl_model)
    with torch.no_grad():
        ties = any(bool((high_level_classes(f(x)[:, 1:]) == NO_CLASS).any()) for x in data.train.values())
    return len(meta["output_classes"]) if ties else None


def _release_gates(case: str, model, meta: dict, circuit: dict, corr: dict, hl_model, n_pairs: int | None):
    """Every gate of ``cbench verify`` on its own pair sets (:func:`cbench.verify.artifact.verification_sets`:
    the counterfactuals validation split and the fresh pairs, at verify's count and seed unless
    ``n_pairs`` says otherwise), at verify's thread count."""
    import torch

    from cbench.runtime.threads import use_cpu_threads
    from cbench.verify.artifact import VERIFY_PAIRS, verification_sets
    from cbench.verify.gates import verify_model

    prev = torch.get_num_threads()
    use_cpu_threads()
    try:
        try:
            sets = verification_sets(case, meta, n_pairs or VERIFY_PAIRS)
        except CbenchError as exc:
            raise BuildError(f"case {case}: the release gates run on the pairs `cbench verify` uses, and {exc}") from None
        return verify_model(model, meta, circuit, corr, hl_model, sets)
    finally:
        torch.set_num_threads(prev)


def _architecture_note(low_level: dict) -> str:
    if low_level.get("architecture") == "interpbench":
        return ("InterpBench's make_ll_cfg: n_heads = max(4, H), n_layers = max(2, L), gelu, d_mlp = 4 * d_model; "
                "residual compression d_model = max(2, d_model_H // r), d_head = max(1, d_model // n_heads), else "
                "d_head = max(1, d_head_H // r), d_model = n_heads * d_head (r per case, 2 by default)")
    return ("n_heads = max(4, H), n_layers = max(2, L), d_head = max(d_head_H // 2, ceil(d_model_H / 2 / n_heads)), "
            "d_model = n_heads * d_head, d_mlp = 4 * d_model")


def _node_order(e: dict):
    n = e["node"]
    if n.startswith("a"):
        layer, head = n[1:].split(".h")
        return (int(layer), 0, int(head))
    return (int(n[1:]), 1, 0)


def _parse_cases(cases: str | None, main: bool) -> list[str]:
    from cbench_builders.cases.specs import MAIN_CASES, resolve_case_ids

    if main and cases:
        raise UsageError("choose the cases with --cases IDS or --main, not both")
    if main:
        return [str(c) for c in MAIN_CASES]
    if not cases:
        raise UsageError("say which cases to train: --cases 3,33 or --main")
    return resolve_case_ids(cases)


def _budget_of(task: SIITTask) -> float:
    """A case's time budget from its spec (``training.time_limit_s``, else ``cpu_limit_s``): the
    order in which parallel workers take the cases (a longest-processing-time-first schedule)."""
    from cbench_builders.cases.specs import load_case

    training = load_case(task.case).training
    return float(training.get("time_limit_s") or training.get("cpu_limit_s") or 0.0)


def format_table(rows: list[SIITOutcome]) -> str:
    lines = [f"{'case':>6} {'kind':>5} {'epochs':>6} {'time_s':>8} {'acc':>7} {'iia':>7} {'siia':>7} "
             f"{'max_out':>8} {'mean_out':>8}  released"]
    for o in rows:
        lines.append(f"{o.case:>6} {o.kind:>5} {o.epochs:>6} {o.seconds:>8.1f} {o.metrics['accuracy']:>7.4f} "
                     f"{o.metrics['iia']:>7.4f} {o.metrics['siia']:>7.4f} {o.max_out_effect:>8.4f} "
                     f"{o.mean_out_effect:>8.4f}  {'yes' if o.released else 'no: ' + o.reason}")
    return "\n".join(lines)


def _named_weights(ctx, param, values) -> dict[str, float] | None:
    """``--iit-node-weight a0.h1=4`` or ``--invariant-edge-weight 'input->a0.h1<q>=8'`` (repeatable) as
    {name: weight}; None when not given. The weight follows the last ``=`` (edge names hold none)."""
    what = "EDGE" if param.name == "invariant_edge_weights" else "NODE"
    example = "'input->a0.h1<q>=8'" if what == "EDGE" else "a0.h1=4"
    out: dict[str, float] = {}
    for v in values:
        name, sep, w = v.rpartition("=")
        try:
            weight = float(w)
        except ValueError:
            weight = float("nan")
        if not sep or not name.strip() or not (0 < weight < MAX_WEIGHT):
            raise click.BadParameter(f"{v!r}: expected {what}=W with W a number above 0 and below {MAX_WEIGHT:g} "
                                     f"(e.g. {example})")
        out[name.strip()] = weight
    return out or None


@click.command("siit")
@click.option("--cases", help="comma-separated case ids, e.g. 3,33, or main, appendix-h, all")
@click.option("--main", "main_cases", is_flag=True, help="the 16 main cases of the paper")
@click.option("--tracr-dir", default="build/tracr", type=click.Path(path_type=Path), show_default=True)
@click.option("--out", "out_dir", default="build/siit", type=click.Path(path_type=Path), show_default=True, callback=check_out_tree)
@click.option("--iit", is_flag=True, help="plain IIT (strictness weight 0), the comparison set (iit-case-<id>)")
@click.option("--algorithm", type=click.Choice(["algorithm-1", "summed"]), default=None,
              help="Algorithm 1 (three optimizer steps) or appendix H's summed loss [default: the case spec's]")
@click.option("--epochs", type=counts(1, 1_000_000), default=None, help="upper bound on epochs")
@click.option("--siit-weight", type=floats(0, MAX_WEIGHT), default=None)
@click.option("--lr", type=floats(0, 10, low_open=True), default=None)
@click.option("--batch-size", type=counts(1, 1_000_000), default=None)
@click.option("--train-size", type=counts(16, MAX_COUNT), default=None)
@click.option("--seed", type=SEED_TYPE, default=None, help="[default: the case spec's seed]")
@click.option("--target", type=floats(0, 1), default=None, help="early-stop level for acc/IIA/SIIA")
@click.option("--threads", type=counts(1, 1024), default=None, help="torch threads (results depend on it)")
@click.option("--eval-pairs", type=counts(10, MAX_EXAMPLES), default=None, help="validation pairs per epoch")
@click.option("--time-limit", type=floats(0, MAX_SECONDS, low_open=True), default=None,
              help="stop training a case after this many seconds (wall)")
@click.option("--cpu-limit", type=floats(0, MAX_SECONDS, low_open=True), default=None,
              help="stop training a case after this many seconds of its process's CPU (the specs' cpu_limit_s)")
@click.option("--keep-failed", is_flag=True, help="write models that miss a release gate (marked as such)")
@click.option("--failed-dir", type=click.Path(path_type=Path), default=None, callback=check_out_tree,
              help="with --keep-failed: write those models here instead of --out")
@click.option("--source-gradients/--no-source-gradients", default=None,
              help="differentiate the loss through the low-level source activations [default: the case spec's]")
@click.option("--edge-weight", type=floats(0, MAX_WEIGHT), default=None,
              help="weight of edge-level strictness (0: node strictness only, as InterpBench) [default: the case spec's]")
@click.option("--edge-target", type=floats(0, 1), default=None,
              help="early stop also needs the outputs with every non-ground-truth edge ablated at this "
                   "[default: the case spec's, else --target]")
@click.option("--edge-sampling", type=click.Choice(EDGE_SAMPLINGS), default=None,
              help="which edges outside the ground truth an edge-strictness example ablates: one, a random "
                   "share or all (mixed; mixed-invariant: half the single ones are edges the program ignores), "
                   "or each with the strictness probability (bernoulli) [default: the case spec's]")
@click.option("--iit-node-weight", "iit_node_weights", multiple=True, callback=_named_weights, metavar="NODE=W",
              help="draw this high-level node for W times its share of the IIT examples (repeatable; "
                   "other nodes weigh 1) [default: every node equally]")
@click.option("--invariant-edge-weight", "invariant_edge_weights", multiple=True, callback=_named_weights,
              metavar="EDGE=W",
              help="with --edge-sampling mixed-invariant: draw this ground-truth edge the program ignores for W "
                   "times its share of those examples (repeatable; others weigh 1) [default: each equally]")
@click.option("--keep", type=click.Choice(KEEPS), default=None,
              help="keep the weights of the best validation epoch, or of the last epoch trained [default: best]")
@click.option("--no-progress", is_flag=True, help="no progress bar")
@click.option("--resume", is_flag=True, help="skip cases whose model is already in --out (from an earlier run)")
@click.option("--checkpoint-dir", type=click.Path(path_type=Path), default=None, callback=check_out_tree,
              help="save each case's training state here after every epoch (<name>.pt) and continue from it "
                   "when it is there: a stopped run resumes where it was")
@executor_options
def build_siit_cmd(cases, main_cases, tracr_dir, out_dir, iit, algorithm, epochs, siit_weight, lr, batch_size,
                   train_size, seed, target, threads, eval_pairs, time_limit, cpu_limit, keep_failed, failed_dir,
                   source_gradients,
                   edge_weight, edge_target, edge_sampling, iit_node_weights, invariant_edge_weights, keep, no_progress, resume, checkpoint_dir, executor, ray_address, workers):
    """Train SIIT (or --iit) models for Tracr cases, verify the release gates, write artifacts."""
    if iit and siit_weight:
        raise UsageError("--iit means strictness weight 0; do not pass --siit-weight with it")
    overrides = {"algorithm": algorithm, "epochs": epochs, "siit_weight": siit_weight, "train_size": train_size,
                 "target": target, "lr": lr, "batch_size": batch_size, "seed": seed, "threads": threads,
                 "eval_pairs": eval_pairs, "time_limit_s": time_limit, "cpu_limit_s": cpu_limit,
                 "source_gradients": source_gradients,
                 "edge_weight": edge_weight, "edge_target": edge_target, "edge_sampling": edge_sampling,
                 "iit_node_weights": iit_node_weights, "invariant_edge_weights": invariant_edge_weights,
                 "keep": keep}
    rows, failed = [], []
    from cbench.cli.executor_opts import make_cli_executor

    ex = make_cli_executor(executor, ray_address, workers)
    tasks = []
    for case in _parse_cases(cases, main_cases):
        done = Path(out_dir) / f"{'iit-' if iit else ''}case-{case}" / "meta.json"
        if resume and done.is_file():
            click.echo(f"case {case}: already trained ({done.parent}; --resume)", err=True)
            continue
        src = Path(tracr_dir) / f"tracr-case-{case}"
        if not src.is_dir():  # before torch and the trainer load (6 s): train_case says the same
            raise BuildError(f"case {case}: no compiled Tracr model at {src}; run `cbench build tracr --cases {case}` first")
        tasks.append(SIITTask(case, Path(tracr_dir).resolve(), Path(out_dir).resolve(), iit, overrides, keep_failed,
                              None if failed_dir is None else Path(failed_dir).resolve(),
                              not no_progress and ex.name == "local",
                              None if checkpoint_dir is None else Path(checkpoint_dir).resolve()))
    order = [t.case for t in tasks]  # the table's order: the cases as asked for
    if ex.name != "local":  # longest first, so the longest case does not start last on a busy worker
        tasks.sort(key=_budget_of, reverse=True)
    errors = []

    def on_result(task, outcome, n, total):
        if not outcome.ok:  # a local run stops at the first error as before; on Ray the others finish
            if ex.name == "local":
                raise (BuildError if outcome.cbench_error else RuntimeError)(outcome.error)
            click.echo(f"case {task.case}: failed on {outcome.where} ({outcome.error})", err=True)
            errors.append(f"case {task.case}: {outcome.error}")
            return
        o = outcome.value
        rows.append(o)
        click.echo(f"{f'[{n}/{total}] ' if ex.name != 'local' else ''}case {o.case} ({o.kind}): {o.epochs} epochs, "
                   f"{o.seconds:.1f} s, acc {o.metrics['accuracy']:.4f} "
                   f"IIA {o.metrics['iia']:.4f} SIIA {o.metrics['siia']:.4f}, max out-of-circuit effect "
                   f"{o.max_out_effect:.4f} -> {'released: ' + str(o.path) if o.released else 'NOT released: ' + o.reason}",
                   err=True)
        sys.stderr.flush()
        if not o.released:
            failed.append(o)

    try:
        ex.map(train_task, tasks, on_result)
    finally:
        ex.close()
    rows.sort(key=lambda o: order.index(o.case))
    click.echo(format_table(rows))
    if errors:
        raise BuildError(f"{len(errors)} case(s) failed to train: " + "; ".join(errors))
    if failed:
        raise BuildError(f"{len(failed)} case(s) missed a release gate: "
                         + ", ".join(f"case {o.case} ({o.reason})" for o in failed))
