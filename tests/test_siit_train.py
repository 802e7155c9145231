"""SIIT end to end on the real Tracr case 3: a few epochs on CPU, the strictness loss raises SIIA
(SIIT vs IIT, same seed and budget), training is deterministic given the seed, the written
artifact validates, and `cbench build siit` answers bad input with one clear line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from cbench.artifacts.model import read_model_artifact
from cbench_builders.siit.config import TrainingConfig
from cbench_builders.siit.data import make_input_set
from cbench_builders.siit.trainer import SIITTrainer
from _siit_helpers import case3_trainer, tracr_dir  # noqa: F401  (tracr_dir: a fixture)

CBENCH = Path(sys.executable).with_name("cbench")
# a small budget: 4 epochs of 4096 pairs, batch 256, lr 1e-2 (about 3 CPU seconds per run)
SMALL = dict(algorithm="summed", lr=0.01, lr_decay_epochs=4, batch_size=256, pairs_per_epoch=4096,
             eval_pairs=400, epochs=4, target=1.0)
GATE_PAIRS = 200  # pairs per set of the release gates (cbench verify's sets, fewer of them)


def _trainer(tracr_dir, invariant_edges=None, **overrides):
    return case3_trainer(tracr_dir, {"seed": 42, **SMALL, **overrides}, invariant_edges)


def test_strictness_loss_raises_siia(tracr_dir):
    siit_trainer, data = _trainer(tracr_dir)
    siit = siit_trainer.train(data, progress=False)
    iit_trainer, _ = _trainer(tracr_dir, siit_weight=0.0)
    iit = iit_trainer.train(data, progress=False)
    # same seed, same budget: only the strictness loss differs
    assert siit.epochs == iit.epochs == 4
    assert siit.metrics["siia"] > iit.metrics["siia"] + 0.05, (siit.metrics, iit.metrics)
    assert siit.history[-1]["min_siia_node"] > iit.history[-1]["min_siia_node"]
    # training does something: the IIT loss falls and IIA rises over the epochs
    assert siit.history[-1]["loss_iit"] < siit.history[0]["loss_iit"]
    assert siit.history[-1]["iia"] > siit.history[0]["iia"]
    assert iit.history[-1]["loss_strict"] == 0.0  # IIT computes no strictness loss


@pytest.mark.slow  # two 10-epoch trainings, ~20 s: `make test-slow` (docs/performance.md)
def test_edge_strictness_silences_the_edges_outside_the_ground_truth(tracr_dir):
    """Same seed and budget; only the edge term differs. Node strictness alone leaves the circuit's
    nodes talking over edges the ground truth does not list (the zoo v2 issue: 61 % of case 3's
    outputs change when they are ablated); the edge term drives that effect down."""
    from cbench.tasks.data import sample_pairs
    from cbench.verify.gates import edge_gates

    # about 15 CPU seconds for both; the figures below were measured with the edge term's source
    # pass separate (edge_sources "shared" gives the same loss and gradient to 1e-5, see
    # test_siit_resume.py, but 10 epochs at lr 1e-2 end elsewhere: IIA 0.98 at seed 42, 0.998 at 43)
    longer = dict(epochs=10, lr_decay_epochs=10, edge_sources="separate")
    node_only, data = _trainer(tracr_dir, **longer)
    node_only.train(data, progress=False)
    edge, _ = _trainer(tracr_dir, edge_weight=1.0, **longer)
    res = edge.train(data, progress=False)
    art = read_model_artifact(Path(tracr_dir) / "tracr-case-3")
    pairs = sample_pairs(art.meta, 400, seed=11)
    circuit = {"edges": edge.truth_edges}
    (without,), _ = edge_gates(node_only.ll.eval(), circuit, pairs, "fresh")
    (with_edges,), _ = edge_gates(edge.ll.eval(), circuit, pairs, "fresh")
    assert with_edges.value < 0.15 and without.value > 0.4, (with_edges, without)  # measured: 0.07 vs 0.61
    assert with_edges.value < without.value / 4
    assert res.history[-1]["loss_edge"] > 0 and res.history[-1]["edge_siia"] > 0.85
    assert res.history[-1]["iia"] > 0.99 and res.history[-1]["siia"] > 0.98  # node strictness still holds
    # the stopping metric also holds the outputs with one ignored edge ablated alone: this model was
    # not trained to ignore the position-only q/k, and one of them alone moves outputs
    pairs = edge.eval_pairs(data.val, 400, seed=3)
    before = edge.evaluate_pairs(pairs)
    assert before["invariant_edge_same"] == 1.0  # none declared
    edge.invariant_edges = sorted(e for e in edge.truth_edges if e.startswith("input->") and e[-3:] in ("<q>", "<k>"))
    assert len(edge.invariant_edges) == 2
    after = edge.evaluate_pairs(pairs)
    assert after["invariant_edge_same"] < 0.999, after  # measured 0.9906
    assert after["edge_siia"] == min(before["edge_siia"], after["invariant_edge_same"])


def test_invariant_edges_are_the_select_inputs_that_carry_only_position(tracr_dir):
    """Case 3's frac_prevs head selects by position (Select(indices, indices, LEQ)): resample-ablating
    its query or key from a source of the same length never changes the program's output, so SIIT's
    edge strictness trains the low-level model to ignore them too; every other edge matters."""
    from cbench_builders.siit.interventions import invariant_edges

    art = read_model_artifact(Path(tracr_dir) / "tracr-case-3")
    data = make_input_set(art.meta, 2000, 42)
    inv = invariant_edges(art.load_model(), art.circuit["edges"], data.train, art.meta["task_type"])
    assert sorted(inv) == ["input->a1.h0<k>", "input->a1.h0<q>"]
    assert set(art.circuit["edges"]) - set(inv) == {"a1.h0->logits", "input->m0", "m0->a1.h0<v>"}


def test_edge_strictness_pool_holds_the_complement_and_the_invariant_edges(tracr_dir):
    plain, _ = _trainer(tracr_dir, edge_weight=1.0)
    names = [e.name for e in plain.runtime.graph.edges]
    pool = {names[i] for i in plain.out_edges.tolist()}
    assert pool == set(names) - set(plain.truth_edges)
    invariant = [e for e in plain.truth_edges if e.endswith("<k>")]
    assert len(invariant) == 1
    with_inv, _ = _trainer(tracr_dir, edge_weight=1.0, invariant_edges=invariant)
    assert {names[i] for i in with_inv.runtime and with_inv.out_edges.tolist()} == pool | set(invariant)


def test_a_cpu_budget_stops_training_after_the_epoch_that_crosses_it(tracr_dir):
    trainer, data = _trainer(tracr_dir, cpu_limit_s=1e-3)
    res = trainer.train(data, progress=False)
    assert res.epochs == 1 and not res.reached_target and res.training_cpu_s > 1e-3


def test_training_stops_only_when_the_edge_target_is_reached():
    cfg = TrainingConfig(edge_weight=1.0, target=0.99, edge_target=0.999, siit_weight=1.0)
    trainer = SIITTrainer.__new__(SIITTrainer)
    trainer.cfg = cfg
    m = dict(accuracy=1.0, iia=1.0, siia=1.0, min_siia_node=1.0, edge_siia=0.995)
    assert not trainer._reached(m)
    assert trainer._reached({**m, "edge_siia": 0.9995})
    assert TrainingConfig(target=0.99).edge_target == 0.99  # default: the target
    # the kept epoch is scored by its summed shortfall below the targets (0 when reached)
    assert trainer._score(m) == pytest.approx(0.995 - 0.999)
    assert trainer._score({**m, "edge_siia": 0.9995}) == 0.0
    # a model that learnt little (harmless ablations, low IIA) ranks below one still leaking
    idle = dict(m, iia=0.6, accuracy=0.6, edge_siia=1.0)
    learning = dict(m, iia=0.95, accuracy=0.97, edge_siia=0.6)
    assert trainer._score(learning) > trainer._score(idle)


@pytest.mark.parametrize("source_gradients", [False, True])
def test_strictness_gradient_reaches_an_interchanged_node_only_through_the_source(tracr_dir, source_gradients):
    """Strictness alone, every non-aligned node interchanged: a last-layer MLP's own weights learn
    only when the loss is differentiated through the source activations (``source_gradients``)."""
    from cbench_builders.siit.trainer import make_optimizer

    trainer, data = _trainer(tracr_dir, iit_weight=0.0, behavior_weight=0.0, siit_weight=1.0, strict_prob=1.0,
                             source_gradients=source_gradients)
    last = trainer.ll.cfg.n_layers - 1
    assert f"m{last}" in trainer.non_aligned
    w_out = trainer.ll.blocks[last].mlp.W_out
    before = w_out.detach().clone()
    x = next(iter(data.train.values()))
    base, source = x[:128], x[128:256]
    with torch.no_grad():
        y_b = trainer._target(trainer.hl_f(base))
    opt = make_optimizer(trainer.ll.parameters(), trainer.cfg)
    losses = trainer._step(opt, base, source, y_b, torch.Generator().manual_seed(0))
    assert losses[1] > 0
    assert torch.equal(w_out.detach(), before) is (not source_gradients)


def test_training_is_deterministic_given_the_seed(tracr_dir):
    runs = []
    for seed_shift in (0, 0, 1):
        trainer, data = _trainer(tracr_dir, epochs=1, pairs_per_epoch=1024, seed=42 + seed_shift)
        trainer.train(data, progress=False)
        runs.append({k: v.clone() for k, v in trainer.ll.state_dict().items()})
    assert runs[0].keys() == runs[1].keys()
    assert all(torch.equal(runs[0][k], runs[1][k]) for k in runs[0])
    assert not all(torch.equal(runs[0][k], runs[2][k]) for k in runs[0] if runs[0][k].is_floating_point())


@pytest.fixture(scope="module")
def trained(tracr_dir, tmp_path_factory):
    """A SIIT (summed) and an IIT model of case 3, two epochs each, written side by side."""
    from cbench_builders.siit.build import train_case

    out = tmp_path_factory.mktemp("siit")
    siit = train_case("3", tracr_dir, out, overrides={**SMALL, "epochs": 2}, progress=False, keep_failed=True,
                      gate_pairs=GATE_PAIRS)
    iit = train_case("3", tracr_dir, out, iit=True, overrides={**SMALL, "epochs": 2}, progress=False,
                     keep_failed=True, gate_pairs=GATE_PAIRS)
    return out, siit, iit


def _check_artifact(path: Path, algorithm: str):
    art = read_model_artifact(path, verify=True)
    meta = art.meta
    assert meta["model_kind"] == "siit" and meta["case"] == "3" and meta["task_type"] == "numerical"
    assert set(meta["metrics"]) >= {"accuracy", "iia", "siia"}
    assert all(0.0 <= meta["metrics"][k] <= 1.0 for k in ("accuracy", "iia", "siia"))
    assert meta["training"]["algorithm"] == algorithm and meta["training"]["epochs_trained"] == 2
    assert meta["seed"] == 42 and meta["training"]["seed"] == 42  # the case spec's seed
    assert meta["training_time_s"] > 0 and "cpu" in meta["hardware"]
    assert meta["released"] == (not meta["release_gate_failures"])
    # architecture of the paper, correspondence and circuit agree
    assert (art.config["n_heads"], art.config["n_layers"], art.config["d_model"], art.config["d_mlp"]) == (4, 2, 12, 48)
    corr = art.correspondence
    head = next(e["low_level"][0]["node"] for e in corr["nodes"] if e["high_level_node"] == "a1.h0")
    assert head.startswith("a1.h")
    assert f"m0->{head}<v>" in art.circuit["edges"] and f"{head}->logits" in art.circuit["edges"]
    assert set(art.circuit["nodes"]) == {"input", "m0", head, "logits"}
    # node effects for every head and MLP, in/out of circuit, every ablation kind
    effects = {e["node"]: e for e in meta["node_effects"]}
    assert len(effects) == 10 and effects[head]["in_circuit"] and not effects["m1"]["in_circuit"]
    assert all({"resample", "mean", "zero", "normalized_kl"} <= set(e) for e in effects.values())
    assert art.tracr is not None and art.tracr.model_kind == "tracr"
    assert "Node effects" in art.readme and f"`{head}`" in art.readme
    # the model loads and runs
    model = art.load_model()
    assert model(torch.zeros(1, 5, dtype=torch.long)).shape == (1, 5, 1)


def test_train_case_writes_a_valid_artifact(trained):
    out, siit, _ = trained
    assert siit.path == out / "case-3"
    _check_artifact(siit.path, "summed")


def test_the_build_gates_on_the_pairs_cbench_verify_uses(trained):
    """The release gates in meta.json are cbench verify's, on the counterfactuals validation split
    and verify's fresh pairs: verifying the written artifact gives every gate the same value."""
    from cbench.verify.artifact import verify_artifact

    _, siit, _ = trained
    art = read_model_artifact(siit.path)
    report = verify_artifact(art, n_pairs=GATE_PAIRS)
    assert report.n_pairs == {"validation": GATE_PAIRS, "fresh": GATE_PAIRS}
    assert report.summary() == art.meta["gates"]
    assert art.meta["release_gates"]["pairs"].startswith("cbench verify's: validation 200, fresh 200")
    assert art.meta["released"] == report.passed


@pytest.mark.slow  # a third train_case + gates, ~10 s; the summed one (`trained`) stays: `make test-slow`
def test_algorithm_1_writes_a_valid_artifact(tracr_dir, tmp_path):
    from cbench_builders.siit.build import train_case

    out = train_case("3", tracr_dir, tmp_path, overrides={**SMALL, "algorithm": "algorithm-1", "epochs": 2},
                     progress=False, keep_failed=True, failed_dir=tmp_path / "failed")
    assert out.path.parent == (tmp_path if out.released else tmp_path / "failed")
    _check_artifact(out.path, "algorithm-1")


def test_iit_flag_writes_the_comparison_model(trained):
    out, _, iit = trained
    art = read_model_artifact(out / "iit-case-3")
    assert iit.kind == "iit" and art.model_kind == "iit" and art.meta["training"]["siit_weight"] == 0.0
    failures = " ".join(art.meta["release_gate_failures"])
    assert "siia" not in failures and "edge" not in failures  # strictness gates do not apply


def test_siit_report_compares_iit_and_siit(trained, tmp_path):
    from click.testing import CliRunner

    from cbench_builders.siit.report import siit_report_cmd

    out, siit, iit = trained
    report = tmp_path / "report.md"
    res = CliRunner().invoke(siit_report_cmd, ["--models", str(out), "--out", str(report), "--pairs", "200"])
    assert res.exit_code == 0, res.output
    text = report.read_text()
    row = next(line for line in text.splitlines() if line.startswith("| 3 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    iit_mean, siit_mean = float(cells[1]), float(cells[4])
    assert 0.0 <= siit_mean <= 1.0 and 0.0 <= iit_mean <= 1.0
    assert "Over 1 case(s)" in text
    missing = CliRunner().invoke(siit_report_cmd, ["--models", str(tmp_path / "nothing"), "--out", str(report)])
    assert missing.exit_code != 0


def _run(tmp_path, *args):
    env = dict(os.environ, CBENCH_HOME=str(tmp_path / "home"))
    return subprocess.run([str(CBENCH), "build", "siit", "--out", str(tmp_path / "out"), *args],
                          capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.parametrize("args, message", [
    (["--cases", "999"], "unknown case '999'"),
    (["--cases", "3", "--tracr-dir", "/nonexistent/tracr"], "no compiled Tracr model"),
    ([], "say which cases"),
    (["--cases", "3", "--main"], "not both"),
    (["--cases", "3", "--iit", "--siit-weight", "0.5"], "do not pass --siit-weight"),
    (["--cases", "3", "--iit-node-weight", "a0.h1"], "expected NODE=W"),
    (["--cases", "3", "--iit-node-weight", "a0.h1=-2"], "expected NODE=W"),
    (["--cases", "3", "--invariant-edge-weight", "input->a0.h1<q>"], "expected EDGE=W"),
    (["--cases", "3", "--invariant-edge-weight", "=3"], "expected EDGE=W"),
    (["--cases", "3", "--edge-sampling", "all"], "'all' is not one of 'mixed', 'mixed-invariant', 'bernoulli'"),
])
def test_bad_input_is_one_clear_line(tmp_path, args, message):
    proc = _run(tmp_path, *args)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert message in lines[0], lines[0]
    assert not (tmp_path / "out").exists()


@pytest.mark.slow  # > 20 s: `make test-slow`
def test_a_none_class_case_trains(tmp_path):
    """Case 19 (remove consecutive duplicates) has RASP None at a third of its positions. With None
    as an explicit class the model has to compute it: the class is in the model's outputs and
    meta.json, and a short run already predicts it where the program's value is None."""
    from cbench.tasks.labels import NO_CLASS, high_level_classes
    from cbench.tasks.data import sample_pairs
    from cbench_builders.siit.build import train_case

    zoo = Path(__file__).resolve().parents[1] / "model_zoo" / "releases" / "models" / "cbench"
    tracr = tmp_path / "tracr"
    tracr.mkdir()
    (tracr / "tracr-case-19").symlink_to(zoo / "tracr-case-19" / "v1.0.0")
    out = train_case("19", tracr, tmp_path / "siit", overrides={**SMALL, "epochs": 3, "edge_weight": 0.0},
                     progress=False, keep_failed=True)
    art = read_model_artifact(out.path)
    assert art.meta["none_class"] == 3 and art.meta["output_classes"] == ["a", "b", "c", "None"]
    assert art.config["d_vocab_out"] == 4
    model, hl = art.load_model(), art.tracr.load_model()
    data = sample_pairs(art.meta, 300, seed=3)
    with torch.no_grad():
        y = high_level_classes(hl(data.base)[:, 1:], none_class=3)
        pred = model(data.base)[:, 1:].argmax(-1)
    none = y == 3
    assert 0.15 < float(none.float().mean()) < 0.6 and not (y == NO_CLASS).any()
    assert float((pred[none] == 3).float().mean()) > 0.75  # the model computes None (measured 0.82 after 3 short epochs)
    assert float((pred == y).float().mean()) > 0.75


@pytest.mark.parametrize("source_gradients", [False, True])
def test_edge_strictness_reaches_the_source_side_with_source_gradients(tracr_dir, source_gradients):
    """With every edge outside the ground truth ablated, case 3's m1 (outside the circuit) reaches
    the logits only through the source run. Its weights get a gradient from the edge loss exactly
    when source_gradients is on: then training can teach a node to stop writing what must not be
    read, not only its readers to bear it (what case 21 needed)."""
    trainer, data = _trainer(tracr_dir, edge_weight=1.0, source_gradients=source_gradients)
    x = data.train[max(data.train)]
    base, source = x[:32], x[32:64]
    y = trainer._target(trainer.hl_f(base), base)
    trainer._loss(trainer._edge_run(base, source, trainer._complement_keep(len(base))), y).backward()
    grad = trainer.ll.blocks[1].mlp.W_in.grad
    norm = 0.0 if grad is None else float(grad.norm())
    assert (norm > 1e-6) == source_gradients, norm
    assert float(trainer.ll.unembed.W_U.grad.norm()) > 0  # the base side learns either way


def test_cli_cpu_limit_sets_the_budget(tracr_dir, tmp_path):
    """`cbench build siit --cpu-limit S` overrides the spec's cpu_limit_s: training stops after the
    first epoch that crosses it, the model is kept as failed and its meta.json records the budget."""
    import json

    from click.testing import CliRunner
    from cbench.cli import cli as main

    res = CliRunner().invoke(main, ["build", "siit", "--cases", "3", "--tracr-dir", str(tracr_dir), "--out",
                                    str(tmp_path / "out"), "--cpu-limit", "0.001", "--keep-failed", "--no-progress",
                                    "--eval-pairs", "100"])
    assert res.exit_code != 0 and "1 epochs" in res.output and "NOT released" in res.output, res.output
    training = json.loads((tmp_path / "out" / "case-3" / "meta.json").read_text())["training"]
    assert training["cpu_limit_s"] == 0.001 and training["epochs_trained"] == 1
