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

    out = _seeded_rows(n_edges, seed, n_seeds)
    if out is None or not (np.array_equal(out[0], draw(n_edges, seed))
                           and np.array_equal(out[-1], draw(n_edges, seed + n_seeds - 1))):
        out = np.stack([draw(n_edges, seed + k) for k in range(n_seeds)])  # numpy seeds differently now
    out.flags.writeable = False
    return out


# numpy's SeedSequence (its hash constants) and PCG64's 128-bit multiplier
_SS_INIT_A, _SS_MULT_A, _SS_INIT_B, _SS_MULT_B = 0x43B0D7E5, 0x931E8875, 0x8B51F9DD, 0x58F38DED
_SS_MIX_L, _SS_MIX_R = 0xCA01F9DD, 0x4973F715
_PCG_MULT = 0x2360ED051FC65DA44385DF649FCCF645
_M32, _M128 = np.uint64(0xFFFFFFFF), (1 << 128) - 1


def _seed_states(seeds: np.ndarray) -> np.ndarray:
    """``[n, 4]`` uint64: ``SeedSequence(s).generate_state(4, np.uint64)`` for each seed ``0 <= s < 2**32``
    (one entropy word), all at once: numpy's hash of the seed into its pool, then its output."""
    x = seeds.astype(np.uint64)
    const = _SS_INIT_A

    def hashmix(v):
        nonlocal const
        v = (v ^ np.uint64(const)) & _M32
        const = (const * _SS_MULT_A) & 0xFFFFFFFF
        v = (v * np.uint64(const)) & _M32
        return v ^ (v >> np.uint64(16))

    def mix(a, b):
        r = (np.uint64(_SS_MIX_L) * a - np.uint64(_SS_MIX_R) * b) & _M32
        return r ^ (r >> np.uint64(16))

    pool = [hashmix(x)] + [hashmix(np.zeros_like(x)) for _ in range(3)]
    for i_src in range(4):
        for i_dst in range(4):
            if i_src != i_dst:
                pool[i_dst] = mix(pool[i_dst], hashmix(pool[i_src]))
    const, words = _SS_INIT_B, []
    for i in range(8):
        v = pool[i % 4] ^ np.uint64(const)
        const = (const * _SS_MULT_B) & 0xFFFFFFFF
        v = (v * np.uint64(const)) & _M32
        words.append(v ^ (v >> np.uint64(16)))
    return np.stack([words[2 * k] | (words[2 * k + 1] << np.uint64(32)) for k in range(4)], 1)


def _seeded_rows(n_edges: int, seed: int, n_seeds: int) -> np.ndarray | None:
    """``draw(n_edges, seed + k)`` for k < n_seeds, the generators' seeding done for all seeds at
    once (numpy's seeding is most of the cost of one draw): each row's PCG64 state, as
    ``default_rng(seed + k)`` sets it, is given to one generator that draws the row. None where
    that does not apply (seeds outside one 32-bit word); the caller checks rows against ``draw``."""
    if n_seeds < 1 or seed < 0 or seed + n_seeds > 2**32:
        return None
    bits = np.random.PCG64(0)
    gen = np.random.Generator(bits)
    out = np.empty((n_seeds, n_edges))
    for k, (s_hi, s_lo, i_hi, i_lo) in enumerate(_seed_states(np.arange(seed, seed + n_seeds)).tolist()):
        inc = ((((i_hi << 64) | i_lo) << 1) | 1) & _M128
        state = ((inc + ((s_hi << 64) | s_lo)) * _PCG_MULT + inc) & _M128  # pcg64_srandom_r: two steps
        bits.state = {"bit_generator": "PCG64", "state": {"state": state, "inc": inc}, "has_uint32": 0, "uinteger": 0}
        out[k] = gen.uniform(-1.0, 1.0, size=n_edges)
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
