"""The random baseline (MIB section 3.2): every edge gets a score drawn uniformly from [-1, 1]."""

from __future__ import annotations

import time

import numpy as np

from cbench.discovery.base import COMMON_PARAMS, Context, finish

PARAMS = {
    "seed": COMMON_PARAMS["seed"],
    "top_n": COMMON_PARAMS["top_n"],
    "rel_threshold": COMMON_PARAMS["rel_threshold"],
}


def draw(n_edges: int, seed: int) -> np.ndarray:
    """The random baseline's scores for a graph of ``n_edges`` edges (the bench averages them
    over many seeds)."""
    return np.random.default_rng(seed).uniform(-1.0, 1.0, size=n_edges)


def run(ctx: Context, seed: int = 0, top_n=None, rel_threshold=0.05, **_):
    t0 = time.perf_counter()
    scores = draw(ctx.graph.n_edges, seed)
    return finish(ctx, "random", {"seed": seed, "top_n": top_n, "rel_threshold": rel_threshold}, scores, None, t0)
