"""The released language model (``cbench/lm-tiny``), checked as an outsider would: pulled into a
fresh home from the embedded hub, read with plain ``transformers`` (not cbench's runtime), its
held-out accuracy recomputed on the pairs it ships, and the card's figures compared with that.
Then one method runs on it through ``cbench discover --model --task``."""

from __future__ import annotations

import csv
import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cli_inprocess import run_main  # noqa: E402

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory):
    import os

    import cbench

    home = tmp_path_factory.mktemp("home")
    old = os.environ.get("CBENCH_HOME")
    os.environ["CBENCH_HOME"] = str(home)
    try:
        yield cbench.pull("lm-tiny").path
    finally:
        if old is None:
            os.environ.pop("CBENCH_HOME", None)
        else:
            os.environ["CBENCH_HOME"] = old


def _accuracy(path, task: str, n: int) -> float:
    model = transformers.AutoModelForCausalLM.from_pretrained(path).eval()
    tok = transformers.AutoTokenizer.from_pretrained(path)
    rows = list(csv.DictReader(open(path / f"{task}.csv")))[:n]
    right = 0
    with torch.no_grad():
        for r in rows:
            ids = torch.tensor([[tok.bos_token_id] + tok(r["clean"])["input_ids"]])
            logits = model(ids).logits[0, -1]
            right += bool(logits[int(r["correct_idx"])] > logits[int(r["incorrect_idx"])])
    return right / len(rows)


@pytest.mark.parametrize("task", ["ioi", "greater-than"])
def test_the_released_model_answers_at_least_90_percent_of_held_out_prompts(snapshot, task):
    acc = _accuracy(snapshot, task, 200)
    assert acc >= 0.9
    record = json.loads((snapshot / "training.json").read_text())
    assert abs(record["held_out"][task]["accuracy"] - acc) <= 0.02  # the first 200 of the same 500
    card = (snapshot / "README.md").read_text()
    label = {"ioi": "IOI-like", "greater-than": "greater-than-like"}[task]
    m = re.search(rf"\| {label} \| ([0-9.]+) % of 500 \|", card)
    assert m and float(m[1]) == pytest.approx(100 * record["held_out"][task]["accuracy"], abs=0.05)
    assert record["train_seconds"] <= 20 * 60  # the budget, recorded in the card too
    assert f"**{record['train_seconds']:.0f} s" in card


def test_a_method_runs_on_it_through_model_and_task(snapshot, tmp_path):
    out = tmp_path / "eap.json"
    res = run_main(["discover", "--model", str(snapshot), "--task", str(snapshot / "ioi.csv"), "-m", "eap",
                    "--n-examples", "20", "--out", str(out)])
    assert res.code == 0 and res.exception is None, res.stderr
    doc = json.loads(out.read_text())
    assert doc["method"]["name"] == "eap" and doc["method"]["hyperparameters"]["metric"] == "logit_diff"
    assert len(doc["edges"]) > 50
    assert any(abs(e["score"]) > 0 for e in doc["edges"].values())


def test_bench_on_two_workers_gives_the_serial_numbers(snapshot, tmp_path):
    """``bench --model --workers 2`` runs the methods on forked processes: every score and every
    CPR/CMD equals the serial run's; Ray is refused in one line with --model."""
    args = ["bench", "--model", str(snapshot), "--task", str(snapshot / "greater-than.csv"), "--n-examples", "12",
            "--methods", "eap,sp,random"]
    serial, parallel = tmp_path / "serial", tmp_path / "parallel"
    assert run_main(args + ["--out", str(serial)]).code == 0
    res = run_main(args + ["--out", str(parallel), "--workers", "2"])
    assert res.code == 0 and res.exception is None, res.stderr
    a = json.loads((serial / "results.json").read_text())["results"]["faithfulness"]
    b = json.loads((parallel / "results.json").read_text())["results"]["faithfulness"]
    assert list(a) == list(b) == ["eap", "sp", "random"]
    for m in a:
        assert (a[m]["cpr"], a[m]["cmd"]) == (b[m]["cpr"], b[m]["cmd"])
        assert json.loads((serial / "scores" / f"{m}.json").read_text())["edges"] == \
            json.loads((parallel / "scores" / f"{m}.json").read_text())["edges"]
    refused = run_main(args + ["--out", str(tmp_path / "ray"), "--executor", "ray"])
    assert refused.code == 2 and len(refused.error_lines()) == 1 and "--workers" in refused.stderr
