"""SIIT training that resumes from its checkpoint, draws rare labels by weight, and feeds edge
strictness from the component run on the source (issue 37): each against what it replaces, on
the real Tracr case 3 and on small random models."""

from __future__ import annotations

import json

import pytest
import torch

from cbench.artifacts.transformer_lens_adapter import build_model
from cbench_builders.siit.config import TrainingConfig
from cbench_builders.siit.data import draw_weights
from cbench_builders.siit.interchange import ComponentForward
from cbench_builders.siit.trainer import SIITTrainer
from _siit_helpers import case3_trainer, tracr_dir  # noqa: F401  (tracr_dir: a fixture)

SMALL = dict(algorithm="summed", lr=0.01, lr_decay_epochs=4, batch_size=256, pairs_per_epoch=2048,
             eval_pairs=300, epochs=4, target=1.0, edge_weight=1.0, source_gradients=True)


def _trainer(tracr_dir, **overrides):
    return case3_trainer(tracr_dir, {"seed": 42, **SMALL, **overrides})


def _random_model(causal: bool, attn_only: bool = False):
    cfg = dict(n_layers=2, n_heads=3, d_model=12, d_head=4, d_mlp=24, n_ctx=6, d_vocab=7, d_vocab_out=5,
               act_fn="relu", attn_only=attn_only, normalization_type=None,
               attention_dir="causal" if causal else "bidirectional", seed=3, dtype="float32")
    return build_model(cfg)


@pytest.mark.parametrize("causal,attn_only", [(True, False), (False, False), (True, True)])
def test_node_outputs_from_the_component_run_equal_the_runtimes(causal, attn_only):
    from cbench.runtime import CircuitRuntime

    model = _random_model(causal, attn_only)
    tokens = torch.randint(7, (9, 6), generator=torch.Generator().manual_seed(1))
    f = ComponentForward(model)
    ours = f.node_outputs(tokens, f.acts(tokens))
    theirs = CircuitRuntime(model).node_outputs(tokens)
    assert ours.shape == theirs.shape == (1 + 2 * (3 + (0 if attn_only else 1)), 9, 6, 12)
    assert torch.allclose(ours, theirs, atol=1e-5), float((ours - theirs).abs().max())


def test_shared_edge_sources_give_the_separate_pass_outputs_and_gradients(tracr_dir):
    """The edge-strictness loss with the source's node outputs taken from the component run equals,
    value and gradient, the loss with a second source pass through the graph runtime."""
    grads, losses = [], []
    for mode in ("separate", "shared"):
        trainer, data = _trainer(tracr_dir, edge_sources=mode)
        torch.manual_seed(0)
        for p in trainer.ll.parameters():  # the same weights for both
            with torch.no_grad():
                p.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())) * 0.3)
        x = data.train[max(data.train)]
        base, source = x[:64], x[64:128]
        y = trainer._target(trainer.hl_f(base), base)
        keep = trainer._edge_masks(len(base), torch.Generator().manual_seed(5))
        assert (keep == 0).any() and (keep == 1).any()
        loss = trainer._loss(trainer._edge_run(base, source, keep), y)
        loss.backward()
        losses.append(float(loss.detach()))
        grads.append({n: p.grad.clone() for n, p in trainer.ll.named_parameters() if p.grad is not None})
    assert losses[0] == pytest.approx(losses[1], rel=1e-5)
    assert grads[0].keys() == grads[1].keys() and "blocks.1.mlp.W_in" in grads[0]  # the source side learns
    for name in grads[0]:
        assert torch.allclose(grads[0][name], grads[1][name], atol=1e-5, rtol=1e-4), name


def test_a_resumed_training_ends_where_an_uninterrupted_one_does(tracr_dir, tmp_path):
    whole, data = _trainer(tracr_dir)
    ref = whole.train(data, progress=False, checkpoint=tmp_path / "whole.pt")
    first, _ = _trainer(tracr_dir, epochs=2)  # stopped after 2 of the 4 epochs ...
    part = first.train(data, progress=False, checkpoint=tmp_path / "split.pt")
    assert part.epochs == 2 and (tmp_path / "split.pt").is_file()
    second, _ = _trainer(tracr_dir)  # ... and continued by a fresh process's trainer
    res = second.train(data, progress=False, checkpoint=tmp_path / "split.pt")
    assert res.epochs == ref.epochs == 4 and len(res.history) == 4
    strip = [{k: v for k, v in h.items() if k != "elapsed_s"} for h in res.history]
    assert strip == [{k: v for k, v in h.items() if k != "elapsed_s"} for h in ref.history]
    a, b = ref.model.state_dict(), res.model.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    # a finished run resumed again trains nothing more and returns the same model
    again, _ = _trainer(tracr_dir)
    done = again.train(data, progress=False, checkpoint=tmp_path / "split.pt")
    assert done.epochs == 4 and all(torch.equal(a[k], done.model.state_dict()[k]) for k in a)


def test_a_fine_tuning_stage_takes_its_own_lr_and_keeps_its_last_epoch(tracr_dir, tmp_path):
    """A summed-loss run resumed as Algorithm 1: Adam's saved state carries the schedule's lr, the new
    stage's lr replaces it; with keep="last" the weights returned are the last epoch's, not the best's
    (an lr of 1 wrecks the model in its one epoch, so the best epoch is the one before)."""
    import shutil

    first, data = _trainer(tracr_dir, epochs=2)
    first.train(data, progress=False, checkpoint=tmp_path / "ck.pt")
    shutil.copy(tmp_path / "ck.pt", tmp_path / "ck2.pt")
    saved = torch.load(tmp_path / "ck.pt", weights_only=True)
    assert saved["optimizer"]["param_groups"][0]["lr"] < 0.01
    second, _ = _trainer(tracr_dir, algorithm="algorithm-1", lr=1.0, epochs=3, keep="last")
    res = second.train(data, progress=False, checkpoint=tmp_path / "ck.pt")
    saved = torch.load(tmp_path / "ck.pt", weights_only=True)
    assert [g["lr"] for g in saved["optimizer"]["param_groups"]] == [1.0]
    assert saved["best"][1] == 2  # the wrecked epoch 3 is not the best ...
    assert res.epochs == 3 and res.best_epoch == 3  # ... but it is what keep="last" returns
    assert all(torch.equal(v, saved["model"][k]) for k, v in res.model.state_dict().items())
    third, _ = _trainer(tracr_dir, algorithm="algorithm-1", lr=1.0, epochs=3)  # keep="best": epoch 2's weights
    best = third.train(data, progress=False, checkpoint=tmp_path / "ck2.pt")
    assert best.best_epoch == 2
    assert all(torch.equal(v, saved["best"][2][k]) for k, v in best.model.state_dict().items())
    with pytest.raises(ValueError, match="unknown keep"):
        TrainingConfig(keep="first")


def test_a_checkpoint_that_is_not_one_is_one_clear_error(tracr_dir, tmp_path):
    from cbench.errors import BuildError

    bad = tmp_path / "bad.pt"
    bad.write_text("not a checkpoint")
    trainer, data = _trainer(tracr_dir)
    with pytest.raises(BuildError, match="cannot read the SIIT checkpoint .*delete it"):
        trainer.train(data, progress=False, checkpoint=bad)


def test_label_balance_draws_rare_label_sequences_as_often_as_common_ones():
    """Case 124's shape: 3 all-equal inputs (label 1) among 243 at length 5."""
    y = torch.zeros(243, 5, dtype=torch.long)
    y[[0, 121, 242]] = 1
    assert draw_weights({5: y}, 0.0) is None
    w = draw_weights({5: y}, 0.5)[5]
    assert float(w.sum()) == pytest.approx(1.0)
    assert float(w[[0, 121, 242]].sum()) == pytest.approx(0.5 * 3 / 243 + 0.5 * 0.5)
    assert float(w[1]) == pytest.approx(0.5 / 243 + 0.5 * 0.5 / 240)
    full = draw_weights({5: y}, 1.0)[5]
    assert float(full[[0, 121, 242]].sum()) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="label_balance"):
        TrainingConfig(label_balance=1.5)
    with pytest.raises(ValueError, match="edge sources"):
        TrainingConfig(edge_sources="twice")


def test_label_balance_reaches_the_batches():
    y = torch.zeros(243, 5, dtype=torch.long)
    y[[0, 121, 242]] = 1
    inputs = {5: torch.arange(243 * 6).reshape(243, 6)}
    shares = {}
    for balance in (0.0, 0.5):
        trainer = SIITTrainer.__new__(SIITTrainer)
        trainer.cfg = TrainingConfig(pairs_per_epoch=8192, batch_size=512, label_balance=balance)
        seen = torch.cat([yb for _, _, yb in trainer._batches(inputs, {5: y}, torch.Generator().manual_seed(0),
                                                              None, draw_weights({5: y}, balance))])
        assert len(seen) == 8192
        shares[balance] = float((seen[:, 0] == 1).float().mean())
    assert shares[0.0] < 0.03  # drawn uniformly: 1.2 % expected
    assert 0.22 < shares[0.5] < 0.29, shares  # 25.6 % expected


def test_cli_checkpoint_dir_saves_and_resumes(tracr_dir, tmp_path):
    from click.testing import CliRunner
    from cbench.cli import cli as main

    args = ["build", "siit", "--cases", "3", "--tracr-dir", str(tracr_dir), "--out", str(tmp_path / "out"),
            "--cpu-limit", "0.001", "--keep-failed", "--no-progress", "--eval-pairs", "100",
            "--checkpoint-dir", str(tmp_path / "ckpt")]
    first = CliRunner().invoke(main, args)
    assert "1 epochs" in first.output, first.output
    assert (tmp_path / "ckpt" / "case-3.pt").is_file()
    # the budget is spent: the second run continues from the checkpoint and trains nothing more
    second = CliRunner().invoke(main, args)
    assert "1 epochs" in second.output, second.output
    training = json.loads((tmp_path / "out" / "case-3" / "meta.json").read_text())["training"]
    assert training["epochs_trained"] == 1 and training["edge_sources"] == "shared"
