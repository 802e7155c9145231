"""Trained counterparts of stress models (``stress-<design>-siit-<n>``, issue 45 item 4): the same
mechanism, planted by SIIT in a denser low-level model instead of written by hand.

The **high-level model** is a hand-set stress design (:mod:`cbench_builders.stress.designs`) with its
floor silenced (the distractor heads' outputs set to zero: a trained model gets its own floor from
training), so it computes exactly the mechanism. Each of its circuit components (heads, MLPs) maps
to a low-level component of a differently shaped transformer (by default six heads of width 10 per
layer and a residual stream of 60, which is no multiple of the designs' 8-wide slots) through a
seeded random correspondence of the same layer; the low-level model is trained with the zoo's
edge-strict SIIT recipe through the general path (:mod:`cbench_builders.siit.hooked`), with two
choices the Tracr cases do not need, recorded in meta.json ``training``:

* the objective is the high-level model's output *distribution*
  (:class:`~cbench_builders.siit.losses.DistributionObjective`): a negative head or a share of a
  distributed variable changes the logits' size, not the answer, and a class target would not
  pass it on;
* IIT interchanges sets of high-level nodes as well as single ones (``iit_sets: "mixed"``):
  redundant paths or a primary and its backup change the answer only together.
* edge-level IIT (``edge_iit``): half of the edge-strictness examples also ablate a random set of
  the circuit's edges, with the high-level model's output under the same ablation as the target.
  Node IIT alone let the negative head's effect run through an edge outside the circuit and back
  (its edge to the logits patched at 0.017 against the design's 0.55), which the gates caught.

The low-level ground truth is the design's circuit mapped through the correspondence, every edge
with its class; the design's mechanism gates are translated the same way. A counterpart is written
only when every gate holds on the pairs ``cbench verify`` uses (the stress dataset's validation
rows and 1,000 fresh pairs with verify's seed): the hand-set tier's gates (complement, floor,
circuit over floor, the mechanism's) and the SIIT release gates against the high-level model,
which the artifact carries as ``high_level/`` (accuracy, IIA, SIIA, out-of-circuit node effect:
:mod:`cbench.verify.trained_stress`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from cbench.cli.options import check_out_tree, floats
from cbench.errors import BuildError, UsageError

if TYPE_CHECKING:  # torch and the designs load where used: `cbench build stress-siit --help` needs neither
    from cbench_builders.stress.designs import StressDesign

#: the zoo's edge-strict recipe (appendix H's summed loss, node and edge strictness, source
#: gradients, mixed edge sampling), with the two choices above
TRAINING = {
    "algorithm": "summed", "lr": 5e-3, "lr_end": 1e-3, "lr_decay_epochs": 150, "betas": [0.9, 0.9],
    "batch_size": 256, "epochs": 150, "iit_weight": 1.0, "siit_weight": 1.0, "behavior_weight": 1.0,
    "strict_prob": 0.5, "edge_weight": 1.0, "edge_sampling": "mixed", "source_gradients": True,
    "target": 1.0, "edge_target": 1.0, "eval_pairs": 1000, "iit_sets": "mixed", "min_epochs": 40,
    "train_size": 4096, "pairs_per_epoch": 4096, "edge_iit": 0.5,
}
DEVIATION = ("a stress design as the high-level model, not a Tracr program: the objective is the high-level "
             "output distribution (KL), IIT interchanges sets of high-level nodes as well as single ones, and half "
             "of the edge-strictness examples also ablate circuit edges, with the high-level model's output under "
             "the same ablation as the target (edge-level IIT)")


@dataclass(frozen=True)
class Counterpart:
    """One trained counterpart: its name, the design it counterparts, the low-level shape, the seed."""

    name: str
    design: str  # a key of cbench_builders.stress.registry.DESIGNS
    n_heads: int = 6
    d_head: int = 10
    d_model: int = 60
    d_mlp: int = 96
    seed: int = 1
    training: dict = field(default_factory=dict)


COUNTERPARTS = {c.name: c for c in (
    Counterpart("stress-or-siit-1", "or-1"),
    Counterpart("stress-backup-siit-1", "backup-1"),
    Counterpart("stress-neg-siit-1", "neg-1"),
    Counterpart("stress-cancel-siit-1", "cancel-1"),
    Counterpart("stress-dist-siit-1", "dist-1"),
    Counterpart("stress-and-siit-1", "and-2"),
)}


# ---------------------------------------------------------------------------- the high-level model
def design_of(c: Counterpart) -> StressDesign:
    from cbench_builders.stress.registry import DESIGNS

    return DESIGNS[c.design]()


def circuit_edges(d: StressDesign) -> list[str]:
    return sorted(set(d.edges) | set(d.marked))


def high_level_model(d: StressDesign):
    """The design's model with every head and MLP outside its circuit silenced (output weights 0)."""
    import torch

    from cbench_builders.siit.hooked import circuit_components

    model = d.kit.model()
    keep = set(circuit_components(circuit_edges(d)))
    with torch.no_grad():
        for layer, blk in enumerate(model.blocks):
            for h in range(model.cfg.n_heads):
                if f"a{layer}.h{h}" not in keep:
                    blk.attn.W_O[h].zero_()
            if f"m{layer}" not in keep:
                blk.mlp.W_out.zero_()
                blk.mlp.b_out.zero_()
    return model.eval()


def translate(doc: Any, mapping: dict[str, str]) -> Any:
    """``doc`` (a gate spec, an edge-class table) with every node name and every edge name in it,
    as a string or a key, mapped through ``mapping``; other strings and numbers as they are."""
    from cbench.graph.graph import edge_name, parse_edge_name

    def one(s: str) -> str:
        if s in mapping:
            return mapping[s]
        if "->" in s:
            try:
                src, dst, qkv = parse_edge_name(s)
            except Exception:  # noqa: BLE001 - not an edge name: left as it is
                return s
            return edge_name(mapping.get(src, src), mapping.get(dst, dst), qkv)
        return s

    if isinstance(doc, str):
        return one(doc)
    if isinstance(doc, dict):
        return {one(k) if isinstance(k, str) else k: translate(v, mapping) for k, v in doc.items()}
    if isinstance(doc, (list, tuple)):
        return [translate(v, mapping) for v in doc]
    return doc


# ---------------------------------------------------------------------------- documents
def meta_of(c: Counterpart, d: StressDesign, training: dict | None = None, metrics: dict | None = None,
            gates: dict | None = None, extra: dict | None = None) -> dict:
    from cbench_builders.stress.build import meta_of as design_meta

    meta = design_meta(d, gates)
    meta.update(case=c.name, seed=c.seed, training=training, metrics=metrics,
                description=f"SIIT-trained counterpart of {d.name}: {d.description}",
                construction=f"trained with SIIT against {d.name} (its floor silenced) through a correspondence",
                high_level={"kind": "stress", "mechanism": d.mechanism, "trained": "siit", "design": d.name})
    meta.update(extra or {})
    return meta


def circuit_of(c: Counterpart, d: StressDesign, mapping: dict[str, str], graph) -> dict:
    from cbench_builders.stress.build import circuit_of as design_circuit

    hl = design_circuit(d, graph)
    out = translate(hl, mapping)  # every node and edge name in it, whatever fields the design writes
    edges = sorted(out["edges"])
    nodes = set()
    for e in edges:
        src, dst = e.split("->")
        nodes |= {src, dst.split("<")[0]}
    out.update(case=c.name, edges=edges, nodes=sorted(nodes, key=lambda n: (n != "input", n == "logits", n)),
               edge_signal=dict(sorted(out["edge_signal"].items())),
               edge_classes=dict(sorted(out["edge_classes"].items())),
               graph={"n_layers": graph.n_layers, "n_heads": graph.n_heads, "has_mlp": graph.has_mlp,
                      "parallel_attn_mlp": graph.parallel_attn_mlp})
    return out


def verification_sets(meta: dict, n_pairs: int = 1000) -> dict:
    """The pair sets ``cbench verify`` gates a stress model on: the stress dataset's validation rows
    (:func:`cbench.tasks.stress.stress_pairs`, the rows the dataset holds) and fresh pairs with
    verify's seed."""
    from cbench.tasks.data import sample_pairs
    from cbench.tasks.stress import stress_pairs
    from cbench.verify.artifact import VERIFY_SEED

    return {"validation": stress_pairs(meta, "validation", n_pairs), "fresh": sample_pairs(meta, n_pairs, seed=VERIFY_SEED)}


def card(c: Counterpart, d: StressDesign, meta: dict, circuit: dict, report, config: dict, mapping: dict,
         bridge_problem: str | None = None) -> str:
    """The counterpart's model card, its "Load without cbench" section last (``bridge_problem``: why
    the model has no TransformerLens 4 form, None when ``bridge/`` holds it)."""
    from cbench_builders.release.cards import loading_section

    classes: dict[str, list[str]] = {}
    for e, cls in circuit["edge_classes"].items():
        classes.setdefault(cls, []).append(e)
    t = meta["training"] or {}
    lines = [
        "---", "license: mit", "library_name: transformer-lens", "tags:", "- mechanistic-interpretability",
        "- circuit-discovery", "- cbench", "- stress-tier", "- siit", f"- {d.mechanism}", "pipeline_tag: other", "---", "",
        f"# cbench/{c.name}: stress tier, {d.mechanism}, trained with SIIT", "",
        meta["description"], "",
        f"The **trained counterpart** of `cbench/{d.name}`: the same mechanism, planted by strict interchange "
        "intervention training (SIIT, the zoo's edge-strict recipe) in a denser, differently shaped transformer "
        f"instead of written by hand. The high-level model is {d.name} with its floor silenced (shipped as "
        "`high_level/`); each of its circuit components maps to one component of this model "
        "(`correspondence.json`), and the ground truth is the design's circuit mapped through that correspondence, "
        f"every edge with its class. `cbench verify {c.name}` reruns every gate below.", "",
        "Training choices beyond the Tracr cases' recipe: the objective is the high-level output distribution "
        "(KL), since a negative head or a share of a distributed variable changes the logits' size and not the "
        "answer; IIT interchanges sets of high-level nodes as well as single ones, since redundant paths or a "
        "primary and its backup change the answer only together; and (where `training.edge_iit` is above 0) part of "
        "the edge-strictness examples also ablate circuit edges, with the high-level model's output under the same "
        "ablation as the target, so each circuit edge carries what its high-level edge carries.", "",
        "## Architecture", "",
        "| n_layers | n_heads | d_head | d_model | d_mlp | act_fn | normalization |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        f"| {config['n_layers']} | {config['n_heads']} | {config['d_head']} | {config['d_model']} | {config['d_mlp']} "
        f"| {config['act_fn']} | none |", "",
        "## Correspondence", "", "| high-level node | low-level node |", "| --- | --- |",
        *[f"| {h} | {l} |" for h, l in sorted(mapping.items())], "",
        f"## Ground truth: {len(circuit['edges'])} edges, by class", "",
        *[f"* **{cls}**: " + ", ".join(f"`{e}`" for e in sorted(es)) for cls, es in sorted(classes.items())],
        *([f"* **marked without signal**: " + ", ".join(f"`{e}`" for e in sorted(circuit["edge_signal"]))]
          if circuit.get("edge_signal") else []), "",
        "## Gates (the worse over validation and fresh pairs)", "",
        "| gate | value | threshold | held |", "| --- | --- | --- | --- |",
    ]
    for name, g in report.summary().items():
        vals = [v for k, v in g.items() if k in ("validation", "fresh", "all")]
        worst = (min(vals) if g["op"] in (">=", ">") else max(vals)) if vals else float("nan")
        lines.append(f"| {name} | {worst:.4g} | {g['op']} {g['threshold']:g} | {'yes' if g['passed'] else 'no'} |")
    lines += ["", "## Training", "",
              f"{t.get('epochs_trained')} epochs (kept epoch {t.get('kept_epoch')}), {meta.get('training_time_s')} s of "
              f"wall time, {t.get('training_cpu_s')} s of CPU; {meta.get('hardware')}.", "",
              "## Predictions", "",
              f"Inherited from `{d.name}`, written before any bench run of either model: whether each robust "
              "verdict survives training is what this model tests.", "",
              *[f"* `{m}`: {p['expect']} ({p['why']})" for m, p in sorted(meta["predictions"].items())], "",
              loading_section(meta, f"cbench/{c.name}", bridge_problem), ""]
    return "\n".join(lines)


def _bridge_problem(model) -> str | None:
    """Why ``model`` has no TransformerLens 4 form (None: the artifact's ``bridge/`` holds it)."""
    from cbench.artifacts.native_bridge import bridge_problem
    from cbench.artifacts.transformer_lens_adapter import config_to_json, model_state_dict

    return bridge_problem(config_to_json(model.cfg), model_state_dict(model))


def _hl_artifact(d: StressDesign, hl_model, where: Path, repo: str) -> Path:
    """The silenced high-level model as an artifact directory (the counterpart's ``high_level/``),
    its card with front matter and a "Load without cbench" section (``repo``: the counterpart's)."""
    from cbench.artifacts.model import write_model_artifact
    from cbench.runtime import CircuitRuntime
    from cbench_builders.release.cards import loading_section, model_front_matter
    from cbench_builders.stress.build import circuit_of as design_circuit, meta_of as design_meta

    meta = design_meta(d)
    meta["construction"] = "hand-set weights, the floor heads silenced (the high-level model of a SIIT counterpart)"
    circuit = design_circuit(d, CircuitRuntime(hl_model).graph)
    readme = (f"---\n{model_front_matter(meta)}---\n\n# {d.name}, floor silenced\n\nThe high-level model a SIIT "
              f"counterpart was trained against: the hand-set `cbench/{d.name}` with every head and MLP outside its "
              f"circuit silenced.\n\n{loading_section(meta, repo, _bridge_problem(hl_model))}\n")
    return write_model_artifact(where / d.name, hl_model, meta, circuit, readme=readme, overwrite=True).path


# ---------------------------------------------------------------------------- build
@dataclass
class Outcome:
    name: str
    passed: bool
    path: Path | None
    epochs: int
    wall_s: float
    cpu_s: float
    report: Any
    failures: list[str]


def train_counterpart(c: Counterpart, out: Path, checkpoint_dir: Path | None = None, overrides: dict | None = None,
                      n_pairs: int = 1000, keep_failed: bool = False, log=None) -> Outcome:
    """Train one counterpart, gate it and write it (only when every gate holds, or ``keep_failed``)."""
    import tempfile

    import torch

    from cbench.artifacts.model import write_model_artifact
    from cbench.artifacts.transformer_lens_adapter import config_to_json
    from cbench.runtime import CircuitRuntime
    from cbench.runtime.threads import use_cpu_threads
    from cbench.verify.trained_stress import verify_trained_stress
    from cbench_builders.siit.architecture import make_correspondence
    from cbench_builders.siit.build import correspondence_document
    from cbench_builders.siit.config import TrainingConfig
    from cbench_builders.siit.hooked import circuit_components, low_level_shape, train_hooked, whole_space
    from cbench_builders.siit.losses import DistributionObjective
    from cbench_builders.siit.trainer import hardware_description

    d = design_of(c)
    hl = high_level_model(d)
    edges = circuit_edges(d)
    comps = circuit_components(edges)
    meta0 = meta_of(c, d)
    hl_cfg = config_to_json(hl.cfg)
    ll_config = low_level_shape(hl_cfg, n_heads=c.n_heads, d_head=c.d_head, d_model=c.d_model, d_mlp=c.d_mlp,
                                seed=c.seed, model_name=f"cbench-{c.name}")
    mapping = make_correspondence(comps, c.n_heads, seed=c.seed, policy="random")
    try:
        cfg = TrainingConfig.from_spec({**TRAINING, **c.training}, seed=c.seed, **(overrides or {}))
    except (TypeError, ValueError) as e:
        raise BuildError(f"{c.name}: bad training hyperparameters: {e}") from None
    data = whole_space(meta0["input_tokens"], meta0["bos_token"], int(meta0["max_seq_len"]) - 1)
    ckpt = Path(checkpoint_dir) / f"{c.name}.pt" if checkpoint_dir is not None else None
    run = train_hooked(hl, ll_config, mapping, edges, data, cfg, invariant_hl_edges=sorted(d.marked),
                       objective=DistributionObjective(), checkpoint=ckpt, log=log)
    res = run.result
    model = res.model.eval()
    graph = CircuitRuntime(model).graph
    circuit = circuit_of(c, d, mapping, graph)
    hl_shape = {"n_layers": hl.cfg.n_layers, "n_heads": hl.cfg.n_heads, "has_mlp": True, "parallel_attn_mlp": False}
    ll_shape = {"n_layers": graph.n_layers, "n_heads": graph.n_heads, "has_mlp": True, "parallel_attn_mlp": False}
    corr = correspondence_document(c.name, mapping, {}, ll_shape, hl_shape, c.seed)
    with torch.no_grad():  # how far silencing the floor moved the design's answers (whole input space)
        x = data.train[int(meta0["max_seq_len"]) - 1]
        moved = float((hl(x)[:, 1:].argmax(-1) != d.kit.model()(x)[:, 1:].argmax(-1)).float().mean())
    training = cfg.to_json()
    training.update({
        "data": data.describe(), "objective": "the high-level output distribution (KL per position after BOS)",
        "deviation": DEVIATION, "high_level_model": f"{d.name} with the heads and MLPs outside its circuit silenced "
                                                    f"(answers moved on {100 * moved:.2f} % of positions)",
        "invariant_edges": run.invariant_edges, "epochs_trained": res.epochs, "reached_target": res.reached_target,
        "kept_epoch": res.best_epoch, "training_cpu_s": round(res.training_cpu_s, 3),
        "correspondence": "seeded random head of the same layer; MLP to the same layer's MLP",
        "history": [{k: h.get(k) for k in ("epoch", "accuracy", "iia", "siia", "min_siia_node", "edge_siia", "edge_iia",
                                           "loss_iit", "loss_strict", "loss_edge", "elapsed_s")} for h in res.history],
    })
    metrics = {k: res.metrics.get(k) for k in ("accuracy", "iia", "siia")}
    meta = meta_of(c, d, training, metrics, extra={"training_time_s": round(res.training_time_s, 3),
                                                    "hardware": hardware_description(cfg.threads)})
    prev = torch.get_num_threads()
    use_cpu_threads()
    try:
        with tempfile.TemporaryDirectory(prefix="cbench-stress-siit-") as tmp:
            hl_dir = _hl_artifact(d, hl, Path(tmp), f"cbench/{c.name}")
            report = verify_trained_stress(model, meta, circuit, corr, hl, verification_sets(meta, n_pairs))
            failures = [f"{g.name} {g.pairs} {g.value:.4g} fails {g.op} {g.threshold:g}" for g in report.failures()]
            path = None
            if report.passed or keep_failed:
                meta = meta_of(c, d, training, metrics, report.summary(),
                               extra={"training_time_s": round(res.training_time_s, 3),
                                      "hardware": hardware_description(cfg.threads),
                                      "released": report.passed, "release_gate_failures": failures})
                readme = card(c, d, meta, circuit, report, config_to_json(model.cfg), mapping, _bridge_problem(model))
                art = write_model_artifact(Path(out) / c.name, model, meta, circuit, correspondence=corr,
                                           readme=readme, subartifacts={"high_level": hl_dir}, overwrite=True)
                path = art.path
    finally:
        torch.set_num_threads(prev)
    return Outcome(c.name, report.passed, path, res.epochs, res.training_time_s, res.training_cpu_s, report, failures)


@click.command("stress-siit")
@click.option("--out", "out_dir", default="build/stress", type=click.Path(path_type=Path), show_default=True,
              callback=check_out_tree, help="where the trained models are written (beside the hand-set ones)")
@click.option("--only", default=None, help="comma-separated counterpart names (default: every one)")
@click.option("--checkpoint-dir", type=click.Path(path_type=Path), default=None, callback=check_out_tree,
              help="save each training's state here after every epoch and continue from it when it is there")
@click.option("--epochs", type=click.IntRange(1, 100_000), default=None, help="upper bound on epochs")
@click.option("--min-epochs", type=click.IntRange(0, 100_000), default=None, help="no early stop before this epoch")
@click.option("--lr", type=floats(0, 10, low_open=True), default=None, help="learning rate (decays to its fifth)")
@click.option("--keep-failed", is_flag=True, help="write a model whose gates do not all hold (marked so)")
@click.option("--n-pairs", default=1000, show_default=True, type=click.IntRange(50, 100_000),
              help="pairs per set for the gates")
@click.option("--dataset-out", type=click.Path(path_type=Path), default=None, callback=check_out_tree,
              help="instead of training: write cbench/stress-counterfactuals here, the newest release's configs "
                   "and one per counterpart already in --out")
def build_stress_siit_cmd(out_dir: Path, only: str | None, checkpoint_dir: Path | None, epochs: int | None,
                          min_epochs: int | None, lr: float | None, keep_failed: bool, n_pairs: int,
                          dataset_out: Path | None):
    """Train the stress tier's SIIT counterparts (a hand-set design as the high-level model), gate
    them like the hand-set models plus the SIIT release gates, and write those that pass."""
    names = list(COUNTERPARTS) if only is None else [s.strip() for s in only.split(",") if s.strip()]
    unknown = [n for n in names if n not in COUNTERPARTS]
    if not names or unknown:
        raise UsageError(f"--only {only!r}: unknown counterpart(s) {', '.join(unknown) or '(none given)'}; "
                         f"known: {', '.join(COUNTERPARTS)}")
    if dataset_out is not None:
        from cbench.hub.zoo import zoo_dir

        have = [n for n in names if (out_dir / n / "meta.json").is_file()]
        if not have:
            raise UsageError(f"--dataset-out: no counterpart is built in {out_dir}")
        from cbench_builders.stress.dataset import extend_release

        extend_release(dataset_out, out_dir, have, Path(zoo_dir()))
        return
    overrides = {"epochs": epochs, "min_epochs": min_epochs, "lr": lr, "lr_end": None if lr is None else lr / 5}
    out_dir.mkdir(parents=True, exist_ok=True)
    failed = []
    for i, name in enumerate(names, 1):
        t0 = time.perf_counter()

        def log(m, name=name):
            click.echo(f"  {name} epoch {m['epoch']}: acc {m['accuracy']:.4f} IIA {m['iia']:.4f} SIIA {m['siia']:.4f} "
                       f"min node {m['min_siia_node']:.4f} edge {m['edge_siia']:.4f} edge IIA {m['edge_iia']:.4f} loss iit {m['loss_iit']:.4g} "
                       f"edge {m['loss_edge']:.4g} ({m['elapsed_s']:.0f} s)", err=True)

        o = train_counterpart(COUNTERPARTS[name], out_dir, checkpoint_dir, overrides, n_pairs, keep_failed, log)
        click.echo(f"[{i}/{len(names)}] {name}: {o.epochs} epochs, training {o.wall_s:.0f} s wall / {o.cpu_s:.0f} s CPU "
                   f"(earlier runs of a resumed training included), this run {time.perf_counter() - t0:.0f} s: "
                   + ("every gate holds, written to " + str(o.path) if o.passed else
                      "NOT released: " + "; ".join(o.failures) + (f" (written to {o.path})" if o.path else "")))
        click.echo(o.report.format(), err=True)
        if not o.passed:
            failed.append(name)
    if failed:
        raise BuildError(f"{len(failed)} counterpart(s) missed a gate: {', '.join(failed)}")
