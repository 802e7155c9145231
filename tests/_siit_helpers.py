"""Shared set-up of the SIIT trainer tests: case 3 compiled once per session (tests/conftest.py), and a trainer on it."""

from __future__ import annotations

from pathlib import Path

import pytest
from cbench.artifacts.model import read_model_artifact
from cbench.artifacts.transformer_lens_adapter import build_model
from cbench_builders.siit.architecture import low_level_config, make_correspondence, map_circuit_edges
from cbench_builders.siit.config import TrainingConfig
from cbench_builders.siit.data import make_input_set
from cbench_builders.siit.trainer import SIITTrainer


@pytest.fixture(scope="module")
def tracr_dir(compiled_tracr):
    """A directory holding the compiled ``tracr-case-3`` (compiled once per session: tests/conftest.py)."""
    return compiled_tracr("3")


def case3_trainer(tracr_dir, config: dict, invariant_edges=None):
    """``(SIITTrainer, input set of 2,000)`` for case 3 with a fresh low-level model, ``config``
    the ``TrainingConfig`` fields."""
    art = read_model_artifact(Path(tracr_dir) / "tracr-case-3")
    cfg = TrainingConfig(**config)
    hl_nodes = [n for n in art.circuit["nodes"] if n not in ("input", "logits")]
    ll_cfg = low_level_config(art.config, seed=cfg.seed)
    mapping = make_correspondence(hl_nodes, ll_cfg["n_heads"], seed=cfg.seed)
    ll = build_model(ll_cfg)
    ll.train()
    truth = map_circuit_edges(art.circuit["edges"], mapping)
    return (SIITTrainer(art.load_model(), ll, mapping, art.meta["task_type"], cfg, truth_edges=truth,
                        invariant_edges=invariant_edges),
            make_input_set(art.meta, 2000, 42))
