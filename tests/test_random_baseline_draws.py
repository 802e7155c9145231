"""The random baseline's many draws, seeded all at once, equal ``draw`` seed by seed."""

from __future__ import annotations

import numpy as np

from cbench.discovery.random_scores import draw
from cbench.scoring.random_baseline import _seeded_rows, random_draws


def test_seeded_rows_equal_one_generator_per_seed():
    for n_edges, seed in [(110, 0), (479, 1_234_567_890), (1, 7), (32, 2**32 - 300)]:
        rows = _seeded_rows(n_edges, seed, 300)
        assert np.array_equal(rows, np.stack([draw(n_edges, seed + k) for k in range(300)]))


def test_seeds_past_one_word_take_the_plain_way():
    assert _seeded_rows(5, 2**32 - 3, 10) is None
    rows = random_draws(5, 2**32 - 3, 10)
    assert np.array_equal(rows, np.stack([draw(5, 2**32 - 3 + k) for k in range(10)]))
    assert not rows.flags.writeable
