"""Scoring circuits and discovery methods: statistics, ground truth (AUROC), faithfulness
(CPR/CMD), the circuit hypothesis tests and the adversarial evaluation.

Each family lives in its own module; import what you need, e.g.
``from cbench.scoring.ground_truth import score_against_truth``.

May import: ``cbench.discovery``, ``cbench.runtime``, ``cbench.tasks``, ``cbench.hub``, ``cbench.artifacts``,
``cbench.schemas``, ``cbench.graph``, ``cbench.files``, ``cbench.errors``.
"""
