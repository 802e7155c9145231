"""Bad input on the user-facing paths (issue 33 item 6): one ``error:`` line, a non-zero exit (2 for
usage errors), no traceback, nothing the user had lost, nothing written anywhere but where asked."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from cbench.errors import UsageError
from cbench.files.safe_io import output_directory, output_target, refuse_input_as_output
from cli_inprocess import assert_one_clean_error, run_main

CASE = Path(__file__).resolve().parents[1] / "model_zoo" / "releases" / "models" / "cbench" / "case-3" / "v1.0.0"


def snapshot(d: Path) -> dict:
    """Every path under ``d`` with its content hash (directories: None)."""
    out = {}
    for root, dirs, files in os.walk(d):
        for n in dirs:
            out[os.path.relpath(os.path.join(root, n), d)] = None
        for n in files:
            p = os.path.join(root, n)
            out[os.path.relpath(p, d)] = hashlib.sha256(Path(p).read_bytes()).hexdigest()
    return out


@pytest.fixture(scope="module")
def scores_doc():
    from cbench.artifacts.mib_format import from_mib, model_fields
    from cbench.artifacts.model import read_model_artifact
    from test_mib_format import eap_ig_layout

    art = read_model_artifact(CASE)
    return from_mib(eap_ig_layout(art), **model_fields(art), method="my-method")


@pytest.fixture
def cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


# ---------------------------------------------------------------------------- 1. tracebacks
def test_export_without_out_is_a_usage_error(cwd, scores_doc):
    (cwd / "in.json").write_text(json.dumps(scores_doc))
    before = snapshot(cwd)
    assert_one_clean_error(run_main(["export", "in.json"]), 2, "--out")
    assert snapshot(cwd) == before


@pytest.mark.parametrize("lr", ["nan", "inf", "-inf", "0", "-1"])
def test_localize_refuses_a_non_finite_or_non_positive_lr(cwd, lr):
    assert_one_clean_error(run_main(["localize", str(CASE), "--variable", "is_x_2", "--lr", lr]), 2, "--lr")
    assert list(cwd.iterdir()) == []


@pytest.mark.parametrize("option", ["--alpha", "--q-star", "--epsilon"])
def test_float_ranges_refuse_nan(cwd, option):
    assert_one_clean_error(run_main(["test-circuit", str(CASE), "truth", "--test", "all", option, "nan"]), 2, option)


def test_featurizer_spec_refuses_a_bad_lr():
    from cbench.localization.featurizers import FeaturizerSpec

    for lr in (float("nan"), float("inf"), 0.0, -1.0):
        with pytest.raises(UsageError, match="--lr"):
            FeaturizerSpec("das", lr=lr)


# ---------------------------------------------------------------------------- 2. --out naming the input
@pytest.mark.parametrize("out", ["in.json", "./in.json", "sub/../in.json", "link.json", "hard.json"])
def test_score_and_export_refuse_to_overwrite_their_input(cwd, scores_doc, out):
    (cwd / "in.json").write_text(json.dumps(scores_doc))
    (cwd / "sub").mkdir()
    os.symlink("in.json", cwd / "link.json")
    os.link(cwd / "in.json", cwd / "hard.json")
    before = snapshot(cwd)
    for args in (["score", str(CASE), "in.json", "--out", out], ["export", "in.json", "--out", out],
                 ["evaluate", "in.json", "--out", out], ["adversarial", str(CASE), "in.json", "--out", out],
                 ["test-circuit", str(CASE), "in.json", "--test", "all", "--out", out],
                 ["find", "score", "in.json", "--out", out]):
        assert_one_clean_error(run_main(args), 2, "same file")
        assert snapshot(cwd) == before, args


def test_out_and_plot_naming_one_file_are_refused(cwd, scores_doc):
    (cwd / "in.json").write_text(json.dumps(scores_doc))
    assert_one_clean_error(run_main(["score", str(CASE), "in.json", "--out", "a.json", "--plot", "a.json"]),
                           2, "same file")
    assert sorted(p.name for p in cwd.iterdir()) == ["in.json"]


def test_refuse_input_as_output_skips_stdout_none_and_other_files(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("x")
    refuse_input_as_output([("--out", None), ("--out", "-"), ("--out", b)], [("IN", a), ("IN2", None)])
    with pytest.raises(UsageError, match="same file"):
        refuse_input_as_output([("--out", tmp_path / "." / "a")], [("IN", a)])


# ---------------------------------------------------------------------------- 3. report --html, --out FILE/
def test_report_html_refuses_empty_non_empty_foreign_and_unusable_parents(cwd):
    (cwd / "R").mkdir()
    (cwd / "R" / "results.json").write_text("{}")
    (cwd / "mine").mkdir()
    (cwd / "mine" / "thesis.tex").write_text("keep me")
    before = snapshot(cwd)
    assert_one_clean_error(run_main(["report", "R", "--html", ""]), 2, "--html is empty")
    assert_one_clean_error(run_main(["report", "R", "--html", "mine"]), 2, "not empty")
    assert_one_clean_error(run_main(["report", "R", "--html", "R"]), 2, "not empty")
    # a missing parent is created (and named); a parent that is a file is refused before any work
    assert_one_clean_error(run_main(["report", "R", "--html", "R/results.json/site"]), 2, "Not a directory")
    assert snapshot(cwd) == before


def test_an_earlier_report_directory_is_accepted(tmp_path):
    from cbench.report.site import SITE_SCHEMA, check_report_directory

    d = tmp_path / "site"
    check_report_directory(d)  # new
    d.mkdir()
    check_report_directory(d)  # empty
    (d / "index.html").write_text("<html>")
    with pytest.raises(UsageError):
        check_report_directory(d)
    (d / "site.json").write_text(json.dumps({"schema": SITE_SCHEMA}))
    check_report_directory(d)


def test_out_ending_in_a_slash_names_a_directory(cwd, scores_doc):
    (cwd / "in.json").write_text(json.dumps(scores_doc))
    before = snapshot(cwd)
    assert_one_clean_error(run_main(["score", str(CASE), "in.json", "--out", "new.json/"]), 2, "names a directory")
    assert_one_clean_error(run_main(["export", "in.json", "--out", "new.json/"]), 2)
    assert snapshot(cwd) == before
    with pytest.raises(UsageError, match="names a directory"):
        output_target(str(cwd / "x.json") + "/")


def test_missing_parents_are_refused_for_files_and_directories_alike(tmp_path):
    for fn in (output_target, output_directory):
        with pytest.raises(UsageError, match="create it first"):
            fn(tmp_path / "no" / "such")
    assert output_directory(tmp_path / "new") == tmp_path / "new" and not (tmp_path / "new").exists()
    (tmp_path / "f").write_text("")
    with pytest.raises(UsageError, match="not a directory"):
        output_directory(tmp_path / "f")


def test_find_baseline_out_does_not_create_parents(cwd):
    assert_one_clean_error(run_main(["find", "baseline", "--out", "no/such.jsonl"]), 2, "create it first")
    assert list(cwd.iterdir()) == []


# ---------------------------------------------------------------------------- 4. empty values
@pytest.mark.parametrize("args, needle", [
    (["bench", "--out", ""], "--out is empty"),
    (["bench", "--out", "   "], "--out is empty"),
    (["bench", "--out", "/proc/x/y"], "cannot write in /proc"),
    (["bench", "--methods", "", "--out", "o"], "--methods is empty"),
    (["bench", "--methods", " , ", "--out", "o"], "--methods is empty"),
    (["demo", "--methods", ""], "--methods is empty"),
    (["demo", "--out", ""], "--out is empty"),
    (["find", "list", "--revision", ""], "--revision is empty"),
    (["find", "score", "s.jsonl", "--wall-s", "nan"], "--wall-s"),
])
def test_empty_and_unusable_values_are_refused(cwd, args, needle):
    assert_one_clean_error(run_main(args), 2, needle)
    assert list(cwd.iterdir()) == []


def test_run_bench_refuses_empty_methods():
    from cbench.scoring.bench import _parse_methods

    with pytest.raises(UsageError, match="--methods is empty"):
        _parse_methods(",")
    assert _parse_methods(None)  # the default: every method of the bench


# ---------------------------------------------------------------------------- 5. exit 0 on nonsense
@pytest.mark.parametrize("repo", ["x/y.git", "x/y.GIT", "x/y-", "x./y", "x/a--b"])
def test_repo_ids_git_hf_would_refuse_are_refused(cwd, repo):
    from cbench.hub.repos import check_repo_id

    with pytest.raises(UsageError):
        check_repo_id(repo)
    (cwd / "hub").mkdir()
    assert_one_clean_error(run_main(["publish", str(CASE), "--repo", repo, "--version", "v1.0.0",
                                     "--hub", "hub"]), 2)
    assert list((cwd / "hub").iterdir()) == []
    check_repo_id("cbench/case-3")


def test_localize_refuses_k_above_d_model(cwd):
    assert_one_clean_error(run_main(["localize", str(CASE), "--variable", "is_x_2", "--k", "100000"]), 2, "d_model")


@pytest.mark.parametrize("value", ["99999999999999999999", "-99999999999999999999", "4294967296"])
def test_absurd_hyperparameter_integers_are_refused(cwd, value):
    assert_one_clean_error(run_main(["discover", str(CASE), "-m", "eap", "-p", f"batch_size={value}"]), 2,
                           "batch_size")
    assert list(cwd.iterdir()) == []


def test_integer_hyperparameters_keep_their_exact_value():
    from cbench.discovery.base import Param

    assert Param(int, 1).convert("m", "n", "123456789") == 123456789
    assert Param(int, 1).convert("m", "n", "1e3") == 1000


@pytest.mark.parametrize("home", ["file", "/proc", "/proc/self", "/dev/null"])
def test_cbench_home_must_be_a_directory(cwd, home):
    (cwd / "file").write_text("x")
    env = {"CBENCH_HOME": home, "CBENCH_HUB": None, "CBENCH_ENDPOINT": None}
    for args in (["cache", "verify"], ["pull", "case-3"]):
        assert_one_clean_error(run_main(args, env=env), 2, "CBENCH_HOME")
    assert (cwd / "file").read_text() == "x" and sorted(p.name for p in cwd.iterdir()) == ["file"]


# ---------------------------------------------------------------------------- 6. MIB graph files
def _mib_variants():
    import copy

    from cbench.artifacts.model import read_model_artifact
    from test_mib_format import eap_ig_layout

    base = eap_ig_layout(read_model_artifact(CASE))

    def edit(f):
        d = copy.deepcopy(base)
        f(d)
        return d

    def node_out_of_an_in_graph_edge(d):
        e = next(k for k, v in d["edges"].items() if v["in_graph"] and not k.startswith("input"))
        d["nodes"][e.split("->")[0]]["in_graph"] = False

    def huge(d):
        d["edges"][next(iter(d["edges"]))]["score"] = 1e308

    return base, {
        "missing node": (edit(lambda d: d["nodes"].pop("a0.h0")), "lacks 1 node"),
        "logits out of the graph": (edit(lambda d: d["nodes"]["logits"].update(in_graph=False)), "logits"),
        "edge whose node is out": (edit(node_out_of_an_in_graph_edge), "is in the graph but its node"),
        "edge of no such node": (edit(lambda d: d["edges"].update({"a9.h0->logits": {"score": 1.0, "in_graph": False}})),
                                 "a9.h0"),
        "1e308 score": (edit(huge), "must be finite"),
        "unknown top-level key": (edit(lambda d: d.update(extra=1)), "unknown top-level key 'extra'"),
    }


@pytest.mark.parametrize("which", ["missing node", "logits out of the graph", "edge whose node is out",
                                   "edge of no such node", "1e308 score", "unknown top-level key"])
def test_mib_files_eap_ig_would_not_write_are_refused(cwd, which):
    _, variants = _mib_variants()
    doc, needle = variants[which]
    (cwd / "g.json").write_text(json.dumps(doc))
    before = snapshot(cwd)
    res = run_main(["score", str(CASE), "g.json"])
    assert_one_clean_error(res, None, needle)
    res = run_main(["validate", "--case", str(CASE), "g.json"])
    assert res.code == 1 and needle in res.stdout and "Traceback" not in res.stderr
    assert snapshot(cwd) == before


def test_eap_igs_older_layout_is_accepted(cwd):
    base, _ = _mib_variants()
    doc = json.loads(json.dumps(base))
    for k in doc["nodes"]:
        doc["nodes"][k] = doc["nodes"][k]["in_graph"]  # nodes: {name: bool}
    unscored = next(k for k, v in doc["edges"].items() if not v["in_graph"])
    doc["edges"][unscored]["score"] = None  # score: null for an edge it did not score
    (cwd / "old.json").write_text(json.dumps(doc))
    res = run_main(["validate", "--case", str(CASE), "old.json"])
    assert res.code == 0 and "OK (edge-scores)" in res.stdout, res.stdout + res.stderr
    res = run_main(["score", str(CASE), "old.json"])
    assert res.code == 0 and "edge AUROC: 1" in res.stdout, res.stderr


# ---------------------------------------------------------------------------- 7. a damaged cache index
from test_cache_integrity import home, hub, server  # noqa: E402,F401 - the published tiny hub and its server


@pytest.mark.parametrize("damage", ["garbage", "deleted", "wrong shape"])
def test_a_damaged_or_deleted_cache_index_is_reported_not_hidden(server, home, damage):
    from cbench.hub.cache import Cache
    from cbench.hub.pull import pull

    pull("case-3@v1.0.0", endpoint=server.endpoint)
    c = Cache()
    if damage == "garbage":
        c.index_path.write_text("{not json")
    elif damage == "deleted":
        c.index_path.unlink()
    else:
        c.index_path.write_text(json.dumps({"format": 1, "repos": []}))
    res = run_main(["cache", "verify"])
    assert res.code == 1 and "DAMAGED" in res.stdout and "holds no snapshots" not in res.stdout, res.stdout
    assert "index" in res.stdout and "Traceback" not in res.stderr
    res = run_main(["discover", "case-3", "-m", "eap"], env={"HF_HUB_OFFLINE": "1"})
    assert_one_clean_error(res, 1, "damaged", "cbench cache verify --repair", "cbench pull case-3")
    res = run_main(["cache", "verify", "--repair"])
    assert res.code == 1 and "removed" in res.stdout, res.stdout
    assert run_main(["cache", "verify"]).code == 0
    if damage != "deleted":  # the unreadable index is kept for a look, never overwritten
        assert list(c.meta.glob("index.json.damaged-*"))
    again = pull("case-3@v1.0.0", endpoint=server.endpoint)
    assert not again.from_cache and run_main(["cache", "verify"]).code == 0


def test_a_damaged_index_with_nothing_on_disk_is_still_reported(home):
    from cbench.hub.cache import Cache

    c = Cache()
    c.meta.mkdir(parents=True)
    c.index_path.write_text("[]")
    res = run_main(["cache", "verify"])
    assert res.code == 1 and "damaged" in res.stdout
    assert run_main(["cache", "verify", "--repair"]).code == 0
    assert run_main(["cache", "verify"]).code == 0


# ---------------------------------------------------------------------------- 8. stale .publish-* directories
def test_stale_publish_temporaries_are_removed_and_live_ones_kept(tmp_path):
    import subprocess
    import sys
    import time

    from cbench.hub.publishing import remove_stale_publish_temporaries
    from cbench.hub.seeding import ensure_seeded

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    hub = tmp_path / "hub"
    hub.mkdir()
    (hub / f".publish-{dead.pid}-abc" / "repo").mkdir(parents=True)  # its owner is gone
    (hub / f".publish-{os.getpid()}-def").mkdir()  # ours: in use
    (hub / ".publish-old_format").mkdir()  # no pid: removed once old
    (hub / ".publish-new_format").mkdir()
    old = time.time() - 2 * 3600
    os.utime(hub / ".publish-old_format", (old, old))
    (hub / "models").mkdir()
    removed = remove_stale_publish_temporaries(hub)
    assert sorted(removed) == sorted([f".publish-{dead.pid}-abc", ".publish-old_format"])
    assert sorted(p.name for p in hub.iterdir()) == sorted([f".publish-{os.getpid()}-def", ".publish-new_format",
                                                            "models"])
    # seeding (what every pull of the default hub runs first) sweeps them too, even with nothing to publish
    (hub / f".publish-{dead.pid}-xyz").mkdir()
    ensure_seeded(hub, zoo=tmp_path / "no-zoo")
    assert not (hub / f".publish-{dead.pid}-xyz").exists()


def test_publish_names_its_temporary_with_its_pid(tmp_path, monkeypatch):
    import tempfile

    from cbench.hub.publishing import publish
    from hub_helpers import write_tiny_artifact

    seen = []
    real = tempfile.TemporaryDirectory

    def spy(*a, **kw):
        seen.append(kw.get("prefix"))
        return real(*a, **kw)

    monkeypatch.setattr(tempfile, "TemporaryDirectory", spy)
    write_tiny_artifact(tmp_path / "art")
    publish(tmp_path / "art", "cbench/case-3", "model", "v1.0.0", hub=tmp_path / "hub")
    assert f".publish-{os.getpid()}-" in seen
    assert not [p for p in (tmp_path / "hub").iterdir() if p.name.startswith(".publish-")]


def test_list_offline_still_refuses_a_bad_hub_or_endpoint(cwd, tmp_path):
    env = {"CBENCH_HOME": str(tmp_path / "home"), "HF_HUB_OFFLINE": "1", "CBENCH_HUB": None, "CBENCH_ENDPOINT": None}
    for args in (["--hub", ""], ["--hub", "no/such/hub"], ["--endpoint", ""], ["--endpoint", "ftp://x"]):
        assert_one_clean_error(run_main(["list", *args], env=env), 2)
    assert run_main(["list"], env=env).code == 0


@pytest.mark.parametrize("args,option", [(["--batch-size", "0"], "--batch-size"), (["--epochs", "-1"], "--epochs"),
                                         (["--lr", "nan"], "--lr"), (["--rows", "0"], "--rows")])
def test_build_ioi_model_refuses_numbers_that_cannot_train(args, option, tmp_path, monkeypatch):
    """Was: --batch-size 0 died with ZeroDivisionError in the SIIT trainer; --epochs -1 ran as 0
    epochs and went on for minutes."""
    monkeypatch.chdir(tmp_path)
    res = run_main(["build", "ioi-model", *args, "--out", str(tmp_path / "out")])
    assert_one_clean_error(res, 2, option)
    assert list(tmp_path.iterdir()) == []
