"""`cbench report --variables DIR`: the causal-variable track's featurizer leaderboard in the HTML
report (featurizer x variable kind, every featurizer on every variable), its numbers equal to the
track's results file; the report's other pages unchanged; bad input gets one line."""

from __future__ import annotations

import contextlib
import io
import json
from html.parser import HTMLParser
from pathlib import Path

import _report_toy as R
import pytest
from cbench.artifacts.model import read_model_artifact
from cbench.cli import main
from cbench.localization.track import run_track
from hub_helpers import run_in_process

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "model_zoo" / "releases" / "models" / "cbench"


run = run_in_process  # cbench ARGV in this process: (exit code, stdout, stderr)


class Cells(HTMLParser):
    """Every ``td`` with a ``data-col`` of the table ``table_id``: (row attributes, column, text)."""

    def __init__(self, table_id: str):
        super().__init__()
        self.table_id, self.inside, self.row, self.cell, self.cells = table_id, False, {}, None, []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table":
            self.inside = a.get("id") == self.table_id
        elif self.inside and tag == "tr":
            self.row = a
        elif self.inside and tag == "td" and "data-col" in a:
            self.cell = [dict(self.row, **{k: v for k, v in a.items() if k == "data-kind"}), a["data-col"],
                         a.get("data-value"), ""]

    def handle_data(self, data):
        if self.cell is not None:
            self.cell[3] += data

    def handle_endtag(self, tag):
        if tag == "td" and self.cell is not None:
            self.cells.append(tuple(self.cell))
            self.cell = None
        elif tag == "table":
            self.inside = False


def cells(page: Path, table_id: str) -> list[tuple]:
    p = Cells(table_id)
    p.feed(page.read_text())
    return p.cells


def fmt(x) -> str:
    return "–" if x is None else f"{x:.3f}"


@pytest.fixture(scope="module")
def sites(tmp_path_factory):
    """Toy bench results and a real track run: var-shared-1 and var-rotated-1, identity and DAS
    (few steps), every location searched."""
    root = tmp_path_factory.mktemp("report-featurizers")
    cases = R.write_cases(root / "cases")
    with contextlib.redirect_stderr(io.StringIO()):
        assert main(R.bench_args(cases, root / "bench")) in (0, None)
    run_track(["var-shared-1", "var-rotated-1"], root / "track", "identity,das", n_train=128, n_test=64, steps=8,
              loader=lambda n: read_model_artifact(MODELS / n / "v1.0.0"), echo=lambda s: None)
    return root


def test_featurizer_leaderboard_shows_the_results_file(sites, capsys):
    out = sites / "html"
    code, _, err = run(capsys, "report", str(sites / "bench"), "--html", str(out), "--variables",
                            str(sites / "track"))
    assert code == 0, err
    doc = json.loads((sites / "track" / "results.json").read_text())
    page = out / "featurizers.html"
    assert 'href="featurizers.html"' in (out / "index.html").read_text()
    assert 'href="../featurizers.html"' in next((out / "cases").glob("*.html")).read_text()
    # the board: featurizer x variable kind, IIA at the true location and best-is-true share
    board = doc["results"]["leaderboard"]
    assert {(b["featurizer"], b["variable_kind"]) for b in board} == {(f, k) for f in ("identity", "das")
                                                                       for k in ("shared", "rotated")}
    shown = {(row["data-featurizer"], row["data-kind"], col): (value, text.strip())
             for row, col, value, text in cells(page, "featurizer-board")}
    assert len(shown) == 2 * len(board)
    for b in board:
        for col, key in (("iia_true", "mean_iia_true"), ("best_is_true", "best_is_true")):
            value, text = shown[(b["featurizer"], b["variable_kind"], col)]
            assert b[key] is not None and float(value) == b[key] and text == fmt(b[key])
    # identity cannot isolate a variable that shares its component; DAS can (the tier's point)
    iia = {(b["featurizer"], b["variable_kind"]): b["mean_iia_true"] for b in board}
    assert iia[("das", "shared")] > iia[("identity", "shared")] + 0.2
    # every featurizer on every variable
    rows = doc["results"]["rows"]
    assert len(rows) == 2 * 4  # two variables per model, two models, two featurizers
    per = {(r["data-model"], r["data-variable"], r["data-featurizer"], col): (value, text.strip())
           for r, col, value, text in cells(page, "featurizer-cells")}
    for r in rows:
        m = r["scores"]["mib"]
        key = (r["model"], r["variable"], r["featurizer"])
        value, text = per[(*key, "iia_true")]
        assert float(value) == m["iia_true"] and text == fmt(m["iia_true"])
        assert per[(*key, "best_location")][1] == m["best_location"]
        assert per[(*key, "best_iia")][1] == fmt(m["best_iia"])
        assert per[(*key, "best_is_true")][1] == ("yes" if m["best_is_true"] else "no")
    site = json.loads((out / "site.json").read_text())
    assert site["variables"] == str((sites / "track").resolve())


def test_report_without_variables_has_no_featurizer_page(sites, capsys):
    out = sites / "plain"
    code, _, err = run(capsys, "report", str(sites / "bench"), "--html", str(out))
    assert code == 0, err
    assert not (out / "featurizers.html").exists() and "featurizers.html" not in (out / "index.html").read_text()


@pytest.mark.parametrize("which,needle", [("bench", "not the results of `cbench bench --track causal-variables`"),
                                          ("cases", "no results.json")])
def test_bad_variables_directory_is_one_line(sites, capsys, tmp_path, which, needle):
    out = tmp_path / "html"
    code, _, err = run(capsys, "report", str(sites / "bench"), "--html", str(out), "--variables", str(sites / which))
    assert code != 0 and needle in err and "Traceback" not in err
    assert len([x for x in err.splitlines() if x.startswith("error:")]) == 1
    assert not out.exists() or not list(out.iterdir())
