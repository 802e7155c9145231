"""The IOI model artifact (``<out>/ioi``): circuit, correspondence, gates, card, weights, tokenizer.

The release gates are :func:`cbench.verify.gates.verify_model` with the IOI high-level model, on the
pairs ``cbench verify ioi`` uses (:func:`cbench.tasks.ioi_data.verify_sets`): the ``cbench/ioi``
dataset's validation rows and its test rows (regenerated here with the dataset's seed, so they
are the released rows), each row paired with every counterfactual column but ABC, scored at the
last position.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import cbench
from cbench_builders.ioi import dataset as ioi, model as ioi_model


@dataclass
class IOIOutcome:
    report: object
    path: Path | None
    released: bool
    meta: dict


def verify_pairs(meta: dict, n_pairs: int) -> dict:
    """The gates' pair sets, from the released dataset's rows (regenerated deterministically)."""
    from cbench.tasks.ioi_data import COUNTERFACTUALS, pairs_from_rows

    rows_needed = -(-n_pairs // len(COUNTERFACTUALS))
    out = {}
    for name, split in (("validation", "validation"), ("fresh", "test")):
        rows = ioi.generate_split(split, rows_needed, seed=ioi.DEFAULT_SEED)
        out[name] = pairs_from_rows(rows, meta, COUNTERFACTUALS, split, dataset="cbench/ioi").subset(n_pairs)
    return out


def circuit_document(ll_shape: dict) -> dict:
    nodes = sorted({"input", "logits", *ioi_model.CORRESPONDENCE.values()})
    return {"schema": "cbench/circuit/v1", "case": ioi_model.CASE, "model_kind": "siit", "granularity": "qkv",
            "graph": ll_shape, "nodes": nodes, "edges": ioi_model.truth_edges()}


def correspondence_document(ll_shape: dict, seed: int) -> dict:
    from cbench.tasks.interchange import site_of
    from cbench.tasks.ioi_high_level import NODES

    entries = []
    for op, hl_node in NODES.items():
        ll = ioi_model.CORRESPONDENCE[hl_node]
        site = site_of(ll)
        entries.append({"high_level": op, "high_level_node": hl_node,
                        "low_level": [{"node": ll, "hook": site.hook, "head": site.head}]})
    return {"schema": "cbench/correspondence/v1", "case": ioi_model.CASE, "graph": ll_shape,
            "high_level_graph": {"n_layers": 3, "n_heads": 1, "has_mlp": False, "parallel_attn_mlp": False},
            "seed": seed, "nodes": entries,
            "notes": "The IOI causal model (cbench.tasks.ioi_high_level): duplicate-token head a0.h0, S-inhibition a1.h0, "
                     "name mover a2.h0; interchanged at blocks.L.attn.hook_z of the low-level heads, at every "
                     "position; scored at the last position."}


def write_ioi_artifact(s, out: Path, prior: dict, verify_pairs_n: int = 1000, keep_failed: bool = False) -> IOIOutcome:
    """Verify the trained model of setup ``s`` and write ``out/ioi`` when it passes (or ``keep_failed``)."""
    from cbench.artifacts.model import write_model_artifact
    from cbench.artifacts.transformer_lens_adapter import config_to_json
    from cbench.verify.gates import verify_model

    n_pairs = int(verify_pairs_n)
    model = s.ll_model.eval()
    cfg = s.config
    shape = {"n_layers": s.ll_config["n_layers"], "n_heads": s.ll_config["n_heads"], "has_mlp": True,
             "parallel_attn_mlp": False}
    lengths = sorted(set(s.data.train) | set(s.data.val))
    meta = ioi_model.model_meta(s.vocab)
    meta.update({"model_kind": "siit", "min_seq_len": lengths[0] - 1, "max_seq_len": lengths[-1] - 1,
                 "seed": cfg.seed, "dataset_revision": None})
    circuit = circuit_document(shape)
    corr = correspondence_document(shape, cfg.seed)
    sets = verify_pairs(meta, n_pairs)
    report = verify_model(model, meta, circuit, corr, s.hl_model, sets)
    marks = report.no_signal_marks()
    if marks:
        circuit["edge_signal"] = marks
        report.accept_marks()
    reasons = [f"{g.name} {g.value:.4f} ({g.pairs}{'; ' + g.detail if g.detail else ''}) fails {g.op} {g.threshold:g}"
               for g in report.failures()]
    released = not reasons
    summary = report.summary()
    metrics = {k: (summary.get(k) or {}).get("validation") for k in ("accuracy", "iia", "siia")}
    training = cfg.to_json()
    training.update({
        "data": s.data.describe(), "objective": "IIT, node and edge strictness on the last token; next-token "
                                                 f"cross-entropy on the other positions; last token x{ioi_model.LAST_TOKEN_WEIGHT:g}",
        "high_level_variables": "IOI causal model (duplicate-token head, S-inhibition, name mover)",
        "correspondence": dict(ioi_model.CORRESPONDENCE),
        "architecture": "InterpBench's IOI model: 6 layers, 4 heads, d_model 64, d_head 16 (d_mlp 256, gelu, "
                        "no normalization), word-level vocabulary of the cbench/ioi dataset",
        "runs": prior.get("runs", []), "training_cpu_s": round(prior.get("cpu_s", 0.0), 1),
        "vocabulary_note": "no GPT-2 tokenizer is reachable offline: the model reads cbench/ioi's own word-level "
                           "vocabulary (ioi_vocab.json); its training rows come from the generator of every split "
                           "(other seeds than the released rows), since a model trained from scratch has no "
                           "embedding for a word it never saw",
    })
    meta.update({
        "training": training, "metrics": metrics, "training_time_s": round(prior.get("wall_s", 0.0), 1),
        "hardware": (prior.get("runs") or [{}])[-1].get("hardware", ""), "cbench_version": cbench.__version__,
        "released": released, "release_gate_failures": reasons,
        "gates": summary, "edge_signals": [asdict(e) for e in report.edges],
    })
    path = None
    if released or keep_failed:
        from cbench_builders.release.cards import render_card

        readme = render_card("ioi_model", {
            "case": ioi_model.CASE, "kind": "siit", "meta": meta, "config": config_to_json(model.cfg),
            "correspondence": corr, "circuit": circuit, "released": released, "reasons": reasons,
            "repo": "cbench/ioi", "verify": report, "hl_edges": meta["high_level"]["edges"],
            # the card's example input: the dataset's first validation prompt (a real IOI sentence)
            "example_prompt": ioi.generate_split("validation", 1, seed=ioi.DEFAULT_SEED)[0]["prompt"]})
        path = Path(out) / ioi_model.CASE
        write_model_artifact(path, model, meta, circuit=circuit, correspondence=corr, readme=readme, overwrite=True)
    return IOIOutcome(report, path, released, meta)
