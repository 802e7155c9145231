"""MIB's faithfulness metric per task (docs/mib-parity.md, divergence 7): on IOI, `--protocol mib`
scores CPR/CMD with the logit difference logit[IO] - logit[S] at the last real position, the
(correct, wrong) pair of the clean prompt (MIB's `dataset.py` labels, `metrics.py::logit_diff`
with `loss=False`). Checked on the released IOI model against a computation that reads the
released parquet rows and vocabulary itself and runs the model with TransformerLens alone."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from cbench.errors import UsageError
from hub_helpers import run_in_process

ROOT = Path(__file__).resolve().parents[1]
IOI_MODEL = ROOT / "model_zoo" / "releases" / "models" / "cbench" / "ioi" / "v1.1.0"
IOI_DATA = ROOT / "model_zoo" / "releases" / "datasets" / "cbench" / "ioi" / "v1.0.0"
N_ROWS = 6


@pytest.fixture(scope="module")
def ioi():
    import pyarrow.parquet as pq
    from cbench.artifacts.model import read_model_artifact
    from cbench.scoring.task import case_from_artifact
    from cbench.tasks.ioi_data import pairs_from_rows

    art = read_model_artifact(IOI_MODEL)
    rows = pq.read_table(IOI_DATA / "data" / "validation-00000-of-00001.parquet").slice(0, N_ROWS).to_pylist()
    return art, rows, case_from_artifact(art), pairs_from_rows(rows, art.meta)


def _reference(art, rows):
    """Per pair: the base and source token ids, and (IO, S) ids, built from the vocabulary file and
    the rows' metadata; the order is pairs_from_rows's (row by row, counterfactual columns in turn)."""
    from cbench.tasks.ioi_data import COUNTERFACTUALS

    vocab = json.loads((IOI_DATA / "ioi_vocab.json").read_text())
    index = {t: i for i, t in enumerate(vocab["tokens"])}
    import re

    def ids(text):
        return [index["<bos>"]] + [index[w] for w in re.findall(r"\w+|[^\w\s]", text)]

    out = []
    for r in rows:
        for cf in COUNTERFACTUALS:
            b, s = ids(r["prompt"]), ids(r[cf]["prompt"])
            if len(b) == len(s):
                out.append((b, s, index[r["metadata"]["indirect_object"]], index[r["metadata"]["subject"]]))
    return out


def _logit_diff(model, ids, io, s):
    """MIB's logit_diff (loss=False) of one prompt: logits at input_length - 1, correct minus wrong."""
    with torch.no_grad():
        logits = model(torch.tensor([ids]))[0, len(ids) - 1]
    return float(logits[io] - logits[s])


def test_ioi_pairs_carry_the_indirect_object_and_subject_as_their_answers(ioi):
    art, rows, _sc, data = ioi
    ref = _reference(art, rows)
    assert data.answers is not None and data.answers.shape == (len(ref), 2) == (data.n_examples, 2)
    assert data.answers.tolist() == [[io, s] for _b, _s, io, s in ref]
    assert data.subset(5).answers.tolist() == data.answers[:5].tolist()
    for i, (b, s, _io, _s) in enumerate(ref):
        assert data.base[i, :len(b)].tolist() == b and data.source[i, :len(s)].tolist() == s


def test_mib_protocol_scores_ioi_cpr_cmd_with_the_logit_difference(ioi):
    from cbench.scoring.faithfulness import evaluate_faithfulness

    art, rows, sc, data = ioi
    ref = _reference(art, rows)
    model = art.load_model()
    full = np.mean([_logit_diff(model, b, io, s) for b, _src, io, s in ref])
    # every edge ablated by resampling: the model's output on the counterfactual prompt, read with the base's answers
    empty = np.mean([_logit_diff(model, src, io, s) for _b, src, io, s in ref])
    assert full > 1.0 and empty < full - 1.0  # the model prefers the IO; the counterfactual moves it
    scores = np.random.default_rng(0).normal(size=sc.graph.n_edges)
    res = evaluate_faithfulness(sc, data, scores, protocol="mib")
    assert res.metric == "logit_diff"
    for curve in (res.cpr_curve, res.cmd_curve):
        assert curve.m_full == pytest.approx(full, rel=1e-4, abs=1e-4)
        assert curve.m_empty == pytest.approx(empty, rel=1e-4, abs=1e-4)
        f = [(m - empty) / (full - empty) for m in curve.m_circuits]
        assert np.allclose(curve.f, f, atol=1e-4)
    grid = res.cpr_curve.grid
    assert res.cpr == pytest.approx(sum((grid[i + 1] - grid[i]) * (res.cpr_curve.f[i] + res.cpr_curve.f[i + 1]) / 2
                                        for i in range(len(grid) - 1)))
    # the default protocol keeps KL to the full model; --metric overrides either
    assert evaluate_faithfulness(sc, data, scores).metric == "kl"
    assert evaluate_faithfulness(sc, data, scores, metric="logit_diff", protocol="mib").cpr == pytest.approx(res.cpr)
    assert evaluate_faithfulness(sc, data, scores, metric="logit_diff").metric == "logit_diff"  # cbench's circuits
    assert evaluate_faithfulness(sc, data, scores, metric="kl", protocol="mib").metric == "kl"


def test_logit_diff_without_answer_pairs_is_one_clear_error(ioi):
    from cbench.scoring.faithfulness import evaluate_faithfulness, task_metric

    _art, _rows, sc, data = ioi
    plain = data.subset(4)
    plain.answers = None
    assert task_metric(sc, plain, None, "mib")[0].name == "kl"  # no pairs: cbench's default, said in the output
    with pytest.raises(UsageError, match="logit_diff needs each pair's .correct, wrong. answer"):
        evaluate_faithfulness(sc, plain, np.ones(sc.graph.n_edges), metric="logit_diff")


def test_rows_without_metadata_take_the_answers_from_choices(ioi):
    from cbench.tasks.ioi_data import answer_pair

    art, rows, _sc, data = ioi
    r = dict(rows[0])
    r.pop("metadata")
    assert list(answer_pair(r, art.meta)) == data.answers[0].tolist()
    with pytest.raises(UsageError, match="names no indirect object"):
        answer_pair({"prompt": rows[0]["prompt"], "choices": ["a"], "answerKey": 0}, art.meta)


def test_evaluate_says_which_metric_the_mib_protocol_used(tmp_path, capsys):
    import _report_toy as R
    import _scoring_toy as T
    from cbench.artifacts.model import read_model_artifact

    R.write_case(tmp_path / "toy", "toy", 0)
    g = read_model_artifact(tmp_path / "toy").graph
    (tmp_path / "s.json").write_text(json.dumps(T.edge_scores_doc(g, np.cos(np.arange(g.n_edges)), case="toy")))

    def run(*argv):
        return run_in_process(capsys, *argv)

    args = ("evaluate", str(tmp_path / "s.json"), "--case", str(tmp_path / "toy"), "--sampled", "--n-examples", "8")
    code, out, err = run(*args, "--protocol", "mib", "--out", str(tmp_path / "e.json"))
    assert code == 0, err
    assert "metric: kl (MIB's code has no metric for this task; cbench's default, KL from the full model)" in out
    faith = json.loads((tmp_path / "e.json").read_text())["results"]["faithfulness"]
    assert faith["metric"] == "kl" and faith["metric_note"].startswith("MIB's code has no metric")
    code, out, err = run(*args)
    assert code == 0 and "metric:" not in out  # the default protocol: nothing to explain
    code, out, err = run(*args, "--protocol", "mib", "--metric", "logit_diff")
    assert code != 0 and err.count("\n") == 1 and err.startswith("error: metric logit_diff needs each pair's")
