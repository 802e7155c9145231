"""``cbench verify`` on a model artifact: the pairs and the gates its kind calls for (node and edge
gates for Tracr, SIIT and IIT models and the IOI model, :mod:`cbench.verify.gates`; the stress
tier's gates, :mod:`cbench.verify.mechanisms`; the variables tier's, :mod:`cbench.verify.variables`).
"""

from __future__ import annotations

from cbench.tasks.data import TaskData
from cbench.verify.gates import VerifyReport, verify_model

#: ``cbench verify``'s defaults: pairs per set and the seed of the freshly sampled pairs (the SIIT
#: build gates a model on these very sets, so a released model passes its own verification)
VERIFY_PAIRS = 1000
VERIFY_SEED = 20261122


def verification_sets(case: str, meta, n_pairs: int = VERIFY_PAIRS, seed: int = VERIFY_SEED,
                      use_dataset: bool = True, offline: bool | None = None) -> dict[str, TaskData]:
    """The pair sets ``cbench verify`` gates a Tracr, SIIT or IIT model on: ``validation``, the
    counterfactuals dataset's validation split (``n_pairs`` of it; with ``use_dataset``), and
    ``fresh``, ``n_pairs`` pairs sampled from meta.json with ``seed``."""
    from cbench.tasks.data import load_task_data, sample_pairs

    sets: dict[str, TaskData] = {}
    if use_dataset:
        data = load_task_data(case, meta, split="validation", n_examples=n_pairs, offline=offline,
                              use_dataset=True)
        if data.split == "validation":
            sets["validation"] = data
    sets["fresh"] = sample_pairs(meta, n_pairs, seed=seed)
    return sets


def verify_artifact(artifact, n_pairs: int = VERIFY_PAIRS, seed: int = VERIFY_SEED, use_dataset: bool = True,
                    offline: bool | None = None) -> VerifyReport:
    """:func:`verify_model` on a model artifact: validation pairs from the counterfactuals dataset
    (when it can be loaded) and ``n_pairs`` fresh sampled pairs drawn with ``seed``."""
    from cbench.tasks.data import sample_pairs

    meta = artifact.meta
    model = artifact.load_model()
    if (meta.get("high_level") or {}).get("kind") == "ioi":  # a hand-written high-level model (issue 16)
        from cbench.tasks.ioi_data import verify_sets
        from cbench.tasks.ioi_high_level import IOIHighLevel

        return verify_model(model, meta, artifact.circuit or {}, artifact.correspondence, IOIHighLevel.from_meta(meta),
                            verify_sets(meta, n_pairs, offline=offline))
    if meta.get("model_kind") == "stress":  # hand-set weights: the mechanism gates prove the labels
        from cbench.tasks.data import load_task_data
        from cbench.verify.mechanisms import verify_stress

        sets = {}
        if use_dataset:  # cbench/stress-counterfactuals' validation split
            sets["validation"] = load_task_data(artifact.case, meta, split="validation", n_examples=n_pairs,
                                                offline=offline, use_dataset=True)
        sets["fresh"] = sample_pairs(meta, n_pairs, seed=seed)
        from cbench.verify.trained_stress import high_level_of, verify_trained_stress

        hl = high_level_of(artifact)
        if hl is not None and artifact.correspondence is not None:  # trained with SIIT: its release gates too
            return verify_trained_stress(model, meta, artifact.circuit or {}, artifact.correspondence, hl, sets)
        return verify_stress(model, meta, artifact.circuit or {}, sets)
    if meta.get("model_kind") == "variables":  # hand-set weights: each variable's subspace proved by interchange
        from cbench.verify.variables import verify_variables

        return verify_variables(model, meta, artifact.circuit or {}, n_pairs, seed)
    tracr = artifact.tracr.load_model() if artifact.tracr is not None else None
    if meta.get("model_kind") == "tracr":
        tracr = model
    sets = verification_sets(artifact.case, meta, n_pairs, seed, use_dataset=use_dataset, offline=offline)
    return verify_model(model, meta, artifact.circuit or {}, artifact.correspondence, tracr, sets)
