"""The random baseline as the bench reports it: many seeded draws of ``cbench discover --method
random`` per case, ranked as every method is ranked, so that its figures (overall, promoted, per
stress class, the ROC curve) are means over the same draws, at chance when the scoring is fair."""

from __future__ import annotations

import functools

import numpy as np

from cbench.scoring.bench_summary import RANDOM_SEEDS

__all__ = ["random_draws", "random_aurocs", "random_class_aurocs", "random_mean_roc"]


@functools.lru_cache(maxsize=2)
def random_draws(n_edges: int, seed: int, n_seeds: int) -> np.ndarray:
    """``[n_seeds, n_edges]``: the random baseline's scores for seeds ``seed``, ``seed + 1``, ...
    (read-only; kept for the next call, which is the same case's ROC curve or AUROCs)."""
    from cbench.discovery.random_scores import draw

    out = np.stack([draw(n_edges, seed + k) for k in range(n_seeds)])
    out.flags.writeable = False
    return out


def random_aurocs(graph, truth, seed: int, n_seeds: int = RANDOM_SEEDS, no_signal=(),
                  include_no_signal: bool = False) -> np.ndarray:
    """``[n_seeds, 2]``: the random baseline's (q/k/v, promoted) edge AUROC for seeds ``seed``,
    ``seed + 1``, ... (each row the scores ``cbench discover --method random --seed s`` gives).
    Their mean is the bench's random row, at chance when the scoring is fair. Ranked as
    :func:`~cbench.scoring.ground_truth.score_against_truth` ranks (|score|, max over q/k/v when
    promoted, the same labels), all draws at once."""
    from cbench.scoring.ground_truth import edge_labels, head_level_scores
    from cbench.scoring.statistics import auroc_rows

    lab = edge_labels(graph, truth, no_signal=no_signal, include_no_signal=include_no_signal)
    scores = random_draws(graph.n_edges, seed, n_seeds)
    vals, heads = np.abs(scores), head_level_scores(graph, scores)
    promoted = auroc_rows(heads[:, lab.head_keep], lab.head_labels[lab.head_keep])
    qkv = auroc_rows(vals[:, lab.edge_keep], lab.edge_labels[lab.edge_keep]) if lab.qkv else promoted
    return np.stack([qkv, promoted], axis=1)


def random_class_aurocs(graph, circuit, seed: int, n_seeds: int = RANDOM_SEEDS) -> dict[str, float]:
    """The random baseline's per-class edge AUROC on a stress model: for each class, the mean over
    the same draws as its overall figure (:func:`random_aurocs`), not one draw's."""
    from cbench.scoring.statistics import auroc_rows
    from cbench.scoring.stress_tier import _class_masks

    vals = np.abs(random_draws(graph.n_edges, seed, n_seeds))
    outside, classes = _class_masks(graph, circuit)
    out = {}
    for cls, pos in classes.items():
        keep = pos | outside
        if pos.any() and outside.any():
            out[cls] = float(auroc_rows(vals[:, keep], pos[keep]).mean())
    return out


def random_mean_roc(graph, truth, seed: int, n_seeds: int = RANDOM_SEEDS, no_signal=(),
                    include_no_signal: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The random baseline's ROC curve as the bench reports it: the vertical average of the
    curves of the same draws whose mean AUROC is the bench's random row
    (:func:`random_aurocs`; q/k/v granularity, promoted when the truth names heads only), so
    the curve's area is that row's number, not one draw's."""
    from cbench.scoring.ground_truth import edge_labels, head_level_scores
    from cbench.scoring.statistics import mean_roc_rows

    lab = edge_labels(graph, truth, no_signal=no_signal, include_no_signal=include_no_signal)
    scores = random_draws(graph.n_edges, seed, n_seeds)
    if lab.qkv:
        return mean_roc_rows(np.abs(scores)[:, lab.edge_keep], lab.edge_labels[lab.edge_keep])
    heads = head_level_scores(graph, scores)
    return mean_roc_rows(heads[:, lab.head_keep], lab.head_labels[lab.head_keep])
