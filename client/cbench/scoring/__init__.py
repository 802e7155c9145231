"""Scoring circuits and discovery methods: statistics, ground truth (AUROC), faithfulness
(CPR/CMD), the circuit hypothesis tests and the adversarial evaluation.

Each family lives in its own module; import what you need, e.g.
``from cbench.scoring.ground_truth import score_edge_scores``.
"""
