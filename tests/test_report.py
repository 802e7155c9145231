"""`cbench report --html` and `cbench submit` on toy bench results: the site's pages, links and
images exist and work from file:// (no remote asset), the leaderboard's rows and statistics, and
submissions in cbench and MIB format; bad input gets one line and a non-zero exit."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
from html import unescape
from html.parser import HTMLParser
from pathlib import Path
from xml.etree import ElementTree

import _report_toy as R
import _scoring_toy as T
import numpy as np
import pytest
from cbench.cli import main
from cbench.graph.graph import Graph
from hub_helpers import run_in_process


run = run_in_process  # cbench ARGV in this process: (exit code, stdout, stderr)


class Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.refs, self.rows = [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in ("href", "src"):
            if a.get(key):
                self.refs.append((tag, a[key]))
        if tag == "tr" and "data-name" in a:
            self.rows.append((a["data-name"], a.get("class")))


def parse(path: Path) -> Links:
    p = Links()
    p.feed(path.read_text())
    return p


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    cases = R.write_cases(root / "cases")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(R.bench_args(cases, root / "bench")) in (0, None)
    (root / "bench.stderr").write_text(err.getvalue())
    return root


def test_bench_progress_is_one_line_per_model_and_method_with_k_of_n_and_an_eta(site):
    """Standard error is not a terminal here: one line per finished (case, method), nothing redrawn."""
    lines = [x for x in (site / "bench.stderr").read_text().splitlines() if x.startswith("[")]
    assert len(lines) == 6 and "\r" not in (site / "bench.stderr").read_text()
    for k, line in enumerate(lines, start=1):
        assert re.match(rf"\[{k}/6 · ETA (\d+:\d\d|\?)\] case toy[34], (eap|acdc|random): edge AUROC ", line), line
    assert lines[-1].startswith("[6/6 · ETA 0:00] case toy4, random")


def test_report_builds_a_static_site_whose_links_and_images_resolve(site, capsys):
    out = site / "html"
    code, stdout, err = run(capsys, "report", str(site / "bench"), "--html", str(out))
    assert code == 0, err
    assert stdout.strip() == str((out / "index.html").resolve())
    pages = sorted(out.rglob("*.html"))
    names = {str(p.relative_to(out)) for p in pages}
    assert names == {"index.html", "cases/toy3.html", "cases/toy4.html", "methods/eap.html", "methods/acdc.html",
                     "methods/random.html"}
    for page in pages:
        for tag, ref in parse(page).refs:
            assert not re.match(r"^(https?:)?//", ref), f"{page}: remote {ref}"  # works from file://, offline
            if ref.startswith("#"):  # a place on the same page
                assert f'id="{ref[1:]}"' in page.read_text(), f"{page}: no element {ref}"
                continue
            target = (page.parent / ref.split("#")[0]).resolve()
            assert target.is_file(), f"{page}: broken link {ref}"
            if tag == "img":
                assert target.read_bytes().startswith(b"<svg ")
    index = parse(out / "index.html")
    assert [name for name, _ in index.rows][0] in ("eap", "acdc")  # ranked by mean AUROC
    assert dict(index.rows)["random"] == "random" and dict(index.rows)["eap"] == "method"
    html = (out / "index.html").read_text()
    bench = json.loads((site / "bench" / "results.json").read_text())
    eap = bench["results"]["auroc"]["toy3"]["eap"]
    assert f">{eap:.3f}<" in html and "p vs acdc" in html
    stats = json.loads(re.search(r'<script type="application/json" id="stats">(.*?)</script>', html, re.DOTALL).group(1))
    assert set(stats) == {"eap", "acdc", "random"}
    assert stats["acdc"]["eap"]["a12"] == pytest.approx(1 - stats["eap"]["acdc"]["a12"])
    case = (out / "cases" / "toy3.html").read_text()
    assert 'class="roc"' in case and "circuit_toy3_eap.svg" in case and "circuit_toy3.svg" in case
    site_doc = json.loads((out / "site.json").read_text())
    assert site_doc["against"] == "acdc" and site_doc["cases"] == ["toy3", "toy4"]


def test_circuit_drawing_is_deterministic_and_highlights_the_top_edges():
    from cbench.report.circuit_plot import draw_circuit, top_edges

    g = Graph(2, 2)
    truth = T.toy_circuit_edges(g)
    scores = np.array([1.0 if e.name in set(truth) else 0.0 for e in g.edges])
    doc = T.edge_scores_doc(g, scores)
    k = len({e.split("<")[0] for e in truth})
    top = top_edges(g, doc, k)
    assert top == {e.split("<")[0] for e in truth}
    a, b = draw_circuit(g, truth, top, "t"), draw_circuit(g, truth, top, "t")
    assert a == b and a.startswith(b"<svg ") and a != draw_circuit(g, truth, None, "t")
    ElementTree.fromstring(a)  # well-formed XML
    assert a.count(b'class="edge hit"') == len(top) and b'class="edge false"' not in a


def test_submit_cbench_and_mib_files_become_leaderboard_entries(site, capsys, tmp_path):
    out = tmp_path / "html"
    assert run(capsys, "report", str(site / "bench"), "--html", str(out), "--against", "eap")[0] == 0
    g = Graph(2, 2)
    truth = set(T.toy_circuit_edges(g))
    scores = np.array([1.0 + 0.01 * i if e.name in truth else 0.01 * i for i, e in enumerate(g.edges)])
    doc = T.edge_scores_doc(g, scores, case="toy3")
    doc["method"]["name"] = "perfect"
    (tmp_path / "perfect.json").write_text(json.dumps(doc))
    code, stdout, err = run(capsys, "submit", str(tmp_path / "perfect.json"), "--report", str(out))
    assert code == 0, err
    assert "valid (cbench edge-scores) for case toy3" in err and "edge AUROC 1.0000" in err
    assert stdout.strip() == str((out / "index.html").resolve())
    assert (out / "submissions" / "perfect" / "toy3.json").is_file()
    index = parse(out / "index.html")
    assert ("perfect", "submission") in index.rows
    row = re.search(r'<tr class="submission" data-name="perfect">(.*?)</tr>', (out / "index.html").read_text(), re.DOTALL)
    assert '<td data-value="1.0"><b>1.000</b></td>' in row.group(1)  # its mean edge AUROC
    assert (out / "methods" / "perfect.html").is_file() and (out / "img" / "circuit_toy3_perfect.svg").is_file()
    assert "p vs eap" in (out / "index.html").read_text()

    mib = {"cfg": doc["cfg"], "nodes": {n: True for n in g.node_names},
           "edges": {k: v for k, v in doc["edges"].items()}}
    (tmp_path / "mib.json").write_text(json.dumps(mib))
    code, _, err = run(capsys, "submit", str(tmp_path / "mib.json"), "--report", str(out), "--name", "mib-entry")
    assert code == 2 and err.strip() == f"error: {tmp_path / 'mib.json'} is MIB's graph JSON, which names no case: " \
                                        "say which with --case"
    code, _, err = run(capsys, "submit", str(tmp_path / "mib.json"), "--report", str(out), "--name", "mib-entry",
                       "--case", "toy4")
    assert code == 0, err
    assert "valid (MIB graph JSON) for case toy4" in err
    kept = json.loads((out / "submissions" / "mib-entry" / "toy4.json").read_text())
    assert kept["schema"] == "cbench/edge-scores/v1" and kept["nodes"]["a0.h0"] == {"in_graph": True}
    assert ("mib-entry", "submission") in parse(out / "index.html").rows


def test_submit_and_report_refuse_bad_input_with_one_line(site, capsys, tmp_path):
    out = tmp_path / "html"
    code, _, err = run(capsys, "submit", str(site / "bench" / "results.json"), "--report", str(out))
    assert code == 2 and "no report there yet" in err and err.count("\n") == 1
    assert run(capsys, "report", str(site / "bench"), "--html", str(out))[0] == 0
    g = Graph(2, 2)
    doc = T.edge_scores_doc(g, np.zeros(g.n_edges), case="toy3")
    del doc["edges"]["input->a0.h0<q>"]
    (tmp_path / "short.json").write_text(json.dumps(doc))
    code, _, err = run(capsys, "submit", str(tmp_path / "short.json"), "--report", str(out), "--name", "x")
    assert code == 1 and "input->a0.h0<q>" in err and "Traceback" not in err
    assert not (out / "submissions" / "x").exists()
    doc = T.edge_scores_doc(g, np.zeros(g.n_edges), case="toy9")
    (tmp_path / "other.json").write_text(json.dumps(doc))
    code, _, err = run(capsys, "submit", str(tmp_path / "other.json"), "--report", str(out), "--name", "x")
    assert code == 2 and "case 'toy9' is not in the bench results" in err
    doc["case"] = "toy3"
    (tmp_path / "other.json").write_text(json.dumps(doc))
    code, _, err = run(capsys, "submit", str(tmp_path / "other.json"), "--report", str(out), "--name", "eap")
    assert code == 2 and "is a method of the bench" in err
    code, _, err = run(capsys, "report", str(site / "bench"), "--html", str(out), "--against", "acdd")
    assert code == 2 and "--against 'acdd' is not a method" in err and "acdc" in err
    code, _, err = run(capsys, "report", str(tmp_path), "--html", str(out))
    assert code == 2 and "no results.json" in err


def _rows(html: str, table_id: str) -> dict[str, str]:
    body = re.search(rf'<table [^>]*id="{table_id}".*?<tbody>(.*?)</tbody>', html, re.DOTALL).group(1)
    return {unescape(m.group(1)): m.group(2) for m in re.finditer(r'<tr class="[^"]*" data-name="([^"]*)">(.*?)</tr>',
                                                                   body, re.DOTALL)}


def test_leaderboard_has_coverage_cpr_cmd_and_ranks_partial_entries_only_on_their_cases(site, capsys, tmp_path):
    out = tmp_path / "html"
    assert run(capsys, "report", str(site / "bench"), "--html", str(out))[0] == 0
    bench = json.loads((site / "bench" / "results.json").read_text())
    faith = bench["results"]["faithfulness"]
    assert set(faith) == {"toy3", "toy4"} and set(faith["toy3"]) == {"eap", "acdc", "random"}
    html = (out / "index.html").read_text()
    rows = _rows(html, "leaderboard")
    assert set(rows) == {"eap", "acdc", "random"}
    cpr = np.mean([faith[c]["eap"]["cpr"] for c in ("toy3", "toy4")])
    cmd = np.mean([faith[c]["eap"]["cmd"] for c in ("toy3", "toy4")])
    assert f'class="cpr" data-value="{cpr}">{cpr:.3f}<' in rows["eap"] and f">{cmd:.3f}<" in rows["eap"]
    assert 'class="coverage" data-value="2">2/2<' in rows["eap"]
    # a perfect submission over one case only: not ranked beside the full entries
    g = Graph(2, 2)
    truth = set(T.toy_circuit_edges(g))
    scores = np.array([1.0 + 0.01 * i if e.name in truth else 0.01 * i for i, e in enumerate(g.edges)])
    doc = T.edge_scores_doc(g, scores, case="toy3")
    (tmp_path / "one.json").write_text(json.dumps(doc))
    assert run(capsys, "submit", str(tmp_path / "one.json"), "--report", str(out), "--name", "one-case")[0] == 0
    html = (out / "index.html").read_text()
    assert set(_rows(html, "leaderboard")) == {"eap", "acdc", "random"}  # ranked: the full entries only
    partial = _rows(html, "partial")
    assert set(partial) == {"one-case"}
    peers = [bench["results"]["auroc"]["toy3"][m] for m in ("eap", "acdc", "random")]
    rank = 1 + sum(v > 1.0 for v in peers)
    assert f'class="rank" data-value="{rank}">{rank} of 4<' in partial["one-case"]
    assert 'class="coverage" data-value="1">1/2<' in partial["one-case"]


def test_random_roc_panel_shows_the_table_number_and_its_curve_has_that_area(site, capsys, tmp_path):
    from cbench.scoring.statistics import roc_staircase, trapezoid

    out = tmp_path / "html"
    assert run(capsys, "report", str(site / "bench"), "--html", str(out))[0] == 0
    bench = json.loads((site / "bench" / "results.json").read_text())
    for case in ("toy3", "toy4"):
        page = (out / "cases" / f"{case}.html").read_text()
        table = _rows(page, "case-table")
        for name in ("eap", "acdc", "random"):
            cell = re.search(r'class="auroc" data-value="[^"]*">([^<]*)<', table[name]).group(1)
            assert f'data-name="{name}" data-auroc="{cell}"' in page  # the panel's number is the table's
            assert cell == f"{bench['results']['auroc'][case][name]:.3f}"
        fpr, tpr = roc_staircase(bench["results"]["random_roc"][case])
        assert trapezoid(tpr, fpr) == pytest.approx(bench["results"]["auroc"][case]["random"], abs=1e-6)


HOSTILE = '<script>alert("x")</script> & \'q\''


def test_hostile_names_are_escaped_on_every_page(site, capsys, tmp_path):
    """A submission's name and a stress mechanism's name with markup, quotes and ampersands: text
    on every page, never markup; the JSON in the page cannot close its script element."""
    res = tmp_path / "bench"
    shutil.copytree(site / "bench", res)
    doc = json.loads((res / "results.json").read_text())
    doc["results"]["stress"] = {
        "per_class": {"toy3": {"eap": {HOSTILE: 0.5, "primary": 1.0}}}, "mechanisms": {"toy3": HOSTILE},
        "by_mechanism": {HOSTILE: {"eap": 0.75}}, "faithfulness_by_mechanism": {"cpr": {HOSTILE: {"eap": 0.4}}},
        "defeats": {HOSTILE: {"defeated": ["eap"], "not_defeated": []}},
        "predictions": {"toy3": [{"method": "eap", "expected": "fail", "measured": "partial", "auroc": 0.8,
                                  "held": False, "why": HOSTILE}]}}
    (res / "results.json").write_text(json.dumps(doc))
    out = tmp_path / "html"
    assert run(capsys, "report", str(res), "--html", str(out))[0] == 0
    g = Graph(2, 2)
    sub = T.edge_scores_doc(g, np.arange(g.n_edges, dtype=float), case="toy3")
    (tmp_path / "h.json").write_text(json.dumps(sub))
    code, _, err = run(capsys, "submit", str(tmp_path / "h.json"), "--report", str(out), "--name", HOSTILE)
    assert code == 0, err
    pages = sorted(out.rglob("*.html")) + sorted(out.rglob("*.svg"))
    assert (out / "stress.html") in pages and len([p for p in pages if p.parent.name == "methods"]) == 4
    seen = 0
    for page in pages:
        text = page.read_text()
        assert "<script>alert" not in text and 'alert("x")' not in text, page
        assert text.count("<script") == text.count("</script>"), page
        seen += text.count("&lt;script&gt;alert(") + text.count("\\u003cscript\\u003ealert(")
        if page.suffix == ".svg":
            ElementTree.fromstring(text)
    assert seen >= 6
    html = (out / "index.html").read_text()
    data = json.loads(re.search(r'<script type="application/json" id="table-data">(.*?)</script>', html, re.DOTALL).group(1))
    assert HOSTILE in [e["name"] for e in data["entries"]]  # the name itself survives, as data
    stress = (out / "stress.html").read_text()
    assert 'data-mechanism="&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; &#39;q&#39;"' in stress
    assert ">0.750<" in stress and ">0.400<" in stress and "0 of 1 predictions held" in stress


def test_mib_auroc_is_shown_beside_the_rank_auroc_as_the_results_file_has_it(site, capsys, tmp_path):
    """The leaderboard's MIB AUROC column (mean over the cases), the per-tier table of both AUROC
    kinds, and the case and method pages' MIB cells are the bench's results.auroc_mib and
    results.auroc_by_tier; a submission's MIB AUROC is MIB's greedy-pruned AUROC of its scores."""
    from cbench.scoring.mib_protocol import mib_auroc

    out = tmp_path / "html"
    assert run(capsys, "report", str(site / "bench"), "--html", str(out))[0] == 0
    res = json.loads((site / "bench" / "results.json").read_text())["results"]
    mib, by_tier = res["auroc_mib"], res["auroc_by_tier"]
    methods = ("eap", "acdc", "random")
    assert set(mib) == {"toy3", "toy4"} and all(mib[c][m] is not None for c in mib for m in methods)
    assert mib["toy3"]["acdc"] != res["auroc"]["toy3"]["acdc"]  # the two kinds differ here: the test can tell them apart
    html = (out / "index.html").read_text()
    board = _rows(html, "leaderboard")
    for m in methods:
        mean = np.mean([mib[c][m] for c in ("toy3", "toy4")])
        cell = re.search(r'class="mib" data-value="([^"]*)">([^<]*)<', board[m])
        assert float(cell.group(1)) == pytest.approx(mean, abs=1e-12) and cell.group(2) == f"{mean:.3f}"
    tiers = _rows(html, "auroc-tiers")
    assert set(tiers) == set(methods) and list(by_tier) == sorted(set(res["model_kind"].values()))
    for tier, row in by_tier.items():
        for m in methods:
            got = re.search(rf'class="tier-rank" data-tier="{tier}" data-value="([^"]*)">([^<]*)<'
                            rf'.*?class="tier-mib" data-tier="{tier}" data-value="([^"]*)">([^<]*)<', tiers[m], re.DOTALL)
            assert float(got.group(1)) == row[m]["rank"] and got.group(2) == f"{row[m]['rank']:.3f}"
            assert float(got.group(3)) == row[m]["mib"] and got.group(4) == f"{row[m]['mib']:.3f}"
            assert row[m]["rank"] == pytest.approx(np.mean([res["auroc"][c][m] for c in ("toy3", "toy4")]))
    for case in ("toy3", "toy4"):
        table = _rows((out / "cases" / f"{case}.html").read_text(), "case-table")
        for m in methods:
            v = mib[case][m]
            assert f'class="mib" data-value="{v}">{v:.3f}<' in table[m]
    page = (out / "methods" / "eap.html").read_text()
    for case in ("toy3", "toy4"):
        v = mib[case]["eap"]
        assert f'class="mib" data-value="{v}">{v:.3f}<' in page
    # a submission over one case: its MIB AUROC is computed with MIB's routine, shown in the partial table
    g = Graph(2, 2)
    scores = np.cos(np.arange(g.n_edges, dtype=float))
    doc = T.edge_scores_doc(g, scores, case="toy3")
    (tmp_path / "cos.json").write_text(json.dumps(doc))
    assert run(capsys, "submit", str(tmp_path / "cos.json"), "--report", str(out), "--name", "cos")[0] == 0
    from cbench.artifacts.model import read_model_artifact
    from cbench.scoring.ground_truth import circuit_edge_names

    art = read_model_artifact(site / "cases" / "toy3")
    want = mib_auroc(art.graph, scores, circuit_edge_names(art.graph, art.circuit)).auroc
    html = (out / "index.html").read_text()
    assert f'class="mib" data-value="{want}">{want:.3f}<' in _rows(html, "partial")["cos"]
    tier = res["model_kind"]["toy3"]
    row = _rows(html, "auroc-tiers")["cos"]
    assert f'class="tier-mib" data-tier="{tier}" data-value="{want}">{want:.3f}<' in row
