"""Gates of a stress model trained with SIIT (``stress-<design>-siit-<n>``): the hand-set tier's
gates (:func:`cbench.verify.mechanisms.verify_stress`: complement, floor, circuit over floor, the
mechanism's own) and the SIIT release gates against the high-level model the artifact carries as
``high_level/`` (:func:`cbench.verify.gates.node_gates`: accuracy, IIA, SIIA and the largest
out-of-circuit node effect, through TransformerLens hooks and ``correspondence.json``), on every
pair set."""

from __future__ import annotations

from typing import Mapping

from cbench.tasks.data import TaskData
from cbench.verify.gates import VerifyReport

HIGH_LEVEL_DIR = "high_level"


def verify_trained_stress(model, meta: Mapping, circuit: Mapping, correspondence: Mapping, hl_model,
                          pair_sets: Mapping[str, TaskData]) -> VerifyReport:
    from cbench.graph.graph import parse_edge_name
    from cbench.tasks.labels import none_class_of
    from cbench.verify.gates import _HighLevel, node_gates
    from cbench.verify.mechanisms import verify_stress

    report = verify_stress(model, meta, circuit, pair_sets)
    hl = _HighLevel(hl_model, str(meta["task_type"]), none_class_of(meta))
    nodes = set()
    for e in circuit.get("edges", []):
        src, dst, _ = parse_edge_name(e)
        nodes |= {src, dst}
    nodes -= {"input", "logits"}
    for pairs, data in pair_sets.items():
        report.gates += node_gates(model, hl, correspondence, nodes, data, "siit", pairs)
    return report


def high_level_of(artifact):
    """The high-level model of a trained stress artifact (its ``high_level/`` sub-artifact), or None."""
    from cbench.artifacts.model import read_model_artifact

    sub = artifact.path / HIGH_LEVEL_DIR
    if not (sub / "meta.json").is_file():
        return None
    return read_model_artifact(sub, verify=artifact.verified).load_model(tokenizer=False)
