"""Bad input, round three (issue 51): the last tracebacks, long waits before a late check, and
silent successes. Each path answers with one ``error:`` line and a non-zero exit, within 5 s,
and writes nothing; ``cache verify`` finds a damaged tree record and anything in a snapshot that is
not one of its files. (The table-driven sweep over every option is tests/test_bad_input_sweep.py.)"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from cbench.errors import ArtifactError, UsageError
from cli_inprocess import assert_one_clean_error, run_main

ROOT = Path(__file__).resolve().parents[1]
CASE = ROOT / "model_zoo" / "releases" / "models" / "cbench" / "case-3" / "v2.2.0"
DATASET = ROOT / "model_zoo" / "releases" / "datasets" / "cbench" / "counterfactuals" / "v1.1.0"
IOI = sorted((ROOT / "model_zoo" / "releases" / "models" / "cbench" / "ioi").iterdir())[-1]
LIMIT_S = 5.0


def listing(d: Path) -> list[str]:
    return sorted(str(p.relative_to(d)) for p in d.rglob("*"))


@pytest.fixture
def cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CBENCH_HOME", str(tmp_path / ".home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return tmp_path


def timed(args: list[str]):
    t0 = time.perf_counter()
    res = run_main(args)
    return res, time.perf_counter() - t0


# ---------------------------------------------------------------------------- build ioi-model's checkpoint
@pytest.mark.parametrize("kind, needle", [("empty", "not a safetensors file"), ("garbage", "not a safetensors file"),
                                          ("other model", "not a checkpoint of this IOI model"),
                                          ("missing", "no checkpoint")])
def test_ioi_model_refuses_a_checkpoint_that_is_not_its_own(cwd, kind, needle):
    ckpt = cwd / "ckpt.safetensors"
    if kind == "empty":
        ckpt.write_bytes(b"")
    elif kind == "garbage":
        ckpt.write_bytes(b"\x07\x00\x00\x00\x00\x00\x00\x00{nope}" * 3)
    elif kind == "other model":
        shutil.copy(CASE / "model.safetensors", ckpt)
    before = listing(cwd)
    res, took = timed(["build", "ioi-model", "--no-train", "--checkpoint", str(ckpt), "--out", str(cwd / "out")])
    assert_one_clean_error(res, 2, "ckpt.safetensors", needle)
    assert took < LIMIT_S, took
    assert listing(cwd) == before


def test_ioi_model_accepts_its_own_released_weights_by_shape():
    from cbench.artifacts.serialization import read_safetensors_header
    from cbench_builders.ioi.architecture import checkpoint_problem

    assert checkpoint_problem(read_safetensors_header(IOI / "model.safetensors")) is None
    problem = checkpoint_problem(read_safetensors_header(CASE / "model.safetensors"))
    assert problem is not None and "missing" in problem


def test_ioi_model_checks_its_out_first_and_keeps_its_checkpoint_under_it(cwd):
    before = listing(cwd)
    res, took = timed(["build", "ioi-model", "--out", "/proc/nope", "--time-limit", "1", "--epochs", "1"])
    assert_one_clean_error(res, 2, "--out /proc/nope")
    assert took < LIMIT_S
    # the default checkpoint is under --out, not build/ioi-train in the working directory
    res = run_main(["build", "ioi-model", "--no-train", "--out", "elsewhere"])
    assert_one_clean_error(res, 2, os.path.join("elsewhere", "ioi-train", "ioi.safetensors"))
    assert listing(cwd) == before


@pytest.mark.parametrize("args, option", [(["--target", "2"], "--target"), (["--verify-pairs", "0"], "--verify-pairs"),
                                          (["--edge-weight", "nan"], "--edge-weight"),
                                          (["--iit-weight", "-1"], "--iit-weight")])
def test_ioi_model_range_checks_its_numbers_at_parse_time(cwd, args, option):
    res, took = timed(["build", "ioi-model", *args, "--out", str(cwd / "out")])
    assert_one_clean_error(res, 2, option)
    assert took < LIMIT_S and listing(cwd) == []


def test_ioi_model_refuses_a_damaged_runs_record(cwd):
    ckpt = cwd / "c.safetensors"
    shutil.copy(IOI / "model.safetensors", ckpt)
    (cwd / "c.runs.json").write_text("{not json")
    before = listing(cwd)
    res = run_main(["build", "ioi-model", "--no-train", "--checkpoint", str(ckpt), "--out", str(cwd / "out")])
    assert_one_clean_error(res, 2, "c.runs.json")
    assert listing(cwd) == before


# ---------------------------------------------------------------------------- other builds
def test_build_find_checks_its_out_before_any_work(cwd):
    res, took = timed(["build", "find", "--out", "/proc/nope"])
    assert_one_clean_error(res, 2, "--out /proc/nope", "cannot write")
    assert took < LIMIT_S and listing(cwd) == []


@pytest.mark.parametrize("version", ["not a version", "1.2.0", "v1.2", "v01.2.0", ""])
def test_rerelease_checks_the_index_version(cwd, version):
    res, took = timed(["build", "re-release", "--index-version", version])
    assert_one_clean_error(res, 2, "--index-version", "vMAJOR.MINOR.PATCH")
    assert took < LIMIT_S and listing(cwd) == []


# ---------------------------------------------------------------------------- localize --dataset
def _damaged_dataset(root: Path, kind: str) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    d = root / "ds" / "case-3"
    d.mkdir(parents=True)
    for f in (DATASET / "case-3").iterdir():
        shutil.copy(f, d / f.name)
    p = d / "train-00000-of-00001.parquet"
    data = p.read_bytes()
    if kind == "truncated":
        p.write_bytes(data[: len(data) // 2])
    elif kind == "garbage":
        p.write_bytes(b"PAR1" + os.urandom(200))
    elif kind == "empty":
        p.write_bytes(b"")
    else:
        table = pq.read_table(p)
        if kind == "dropped column":
            table = table.drop(["interchange_labels"])
        else:
            rows = table.to_pylist()
            rows[3]["source_ids"] = [0, 1, 100]  # int8 fits it; the model's vocabulary does not
            table = pa.Table.from_pylist(rows, schema=table.schema)
        pq.write_table(table, p)
    return root / "ds"


@pytest.mark.parametrize("kind, needles", [
    ("truncated", ("train-00000-of-00001.parquet", "not a readable parquet file")),
    ("garbage", ("train-00000-of-00001.parquet", "not a readable parquet file")),
    ("empty", ("train-00000-of-00001.parquet", "not a readable parquet file")),
    ("dropped column", ("train-00000-of-00001.parquet", "no column 'interchange_labels'")),
    ("out-of-vocabulary id", ("row 3", "token id 100", "vocabulary")),
])
def test_localize_refuses_a_damaged_dataset_before_loading_the_model(tmp_path, monkeypatch, kind, needles):
    ds = _damaged_dataset(tmp_path, kind)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    before = listing(tmp_path)
    res, took = timed(["localize", str(CASE), "--variable", "is_x_2", "--dataset", str(ds), "--out", "r.json"])
    assert_one_clean_error(res, 2, *needles)
    assert took < LIMIT_S, took
    assert listing(tmp_path) == before


def test_read_rows_reads_a_good_snapshot_and_checks_its_rows():
    from cbench.artifacts.model import read_model_artifact
    from cbench.localization.rows import check_rows, read_rows

    meta = read_model_artifact(CASE, verify=False).meta
    rows, where = read_rows("3", "test", DATASET, n=50)
    assert len(rows) == 50 and where == str(DATASET)
    check_rows(rows, meta, where)
    bad = [dict(rows[0], base_ids=[0, True, 1])]
    with pytest.raises(UsageError, match="token id True"):
        check_rows(bad, meta, "x")
    with pytest.raises(UsageError, match="token id None in source_ids"):
        check_rows([dict(rows[0], source_ids=[0, None, 1])], meta, "x")
    with pytest.raises(UsageError, match="base_ids is not a list"):
        check_rows([dict(rows[0], base_ids=None)], meta, "x")
    with pytest.raises(UsageError, match="interchange labels"):
        check_rows([dict(rows[0], interchange_labels=[])], meta, "x")


# ---------------------------------------------------------------------------- bench
def test_bench_causal_variables_with_no_model_fails_and_writes_nothing(cwd):
    res, took = timed(["bench", "--track", "causal-variables", "--cases", "999", "--out", "r"])
    assert_one_clean_error(res, 2, "no model to localize", "case-999")
    assert took < LIMIT_S
    assert not (cwd / "r").exists()


def test_the_api_bench_refuses_nan_examples_before_any_output(cwd):
    import cbench

    for bad in (float("nan"), float("inf"), -5, 10**20, 1e300, "100", True):
        with pytest.raises(UsageError, match="n_examples"):
            cbench.bench(cases="3", methods="random", n_examples=bad, out=cwd / "r")
    with pytest.raises(UsageError, match="cases"):
        cbench.bench(cases=3, methods="random", out=cwd / "r")
    with pytest.raises(UsageError, match="out"):
        cbench.bench(cases="3", methods="random", out=3)
    assert not (cwd / "r").exists() and not list(cwd.rglob("table.md"))


# ---------------------------------------------------------------------------- guarded readers
def test_guarded_readers_name_the_file_and_what_is_wrong(tmp_path):
    from cbench.files.readers import read_json_file, read_parquet_rows, read_safetensors

    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"\xff\xfe garbage")
    with pytest.raises(ArtifactError, match="bad.bin: not a readable parquet file"):
        read_parquet_rows(bad)
    with pytest.raises(ArtifactError, match="bad.bin: not a safetensors file"):
        read_safetensors(bad, what="a safetensors file")
    with pytest.raises(ArtifactError, match="bad.bin: not a JSON file \\(not UTF-8"):
        read_json_file(bad)
    (tmp_path / "t.json").write_text('{"a": 1,\n "b": }')
    with pytest.raises(UsageError, match="t.json: not a JSON file .* line 2 column"):
        read_json_file(tmp_path / "t.json", error=UsageError)
    with pytest.raises(ArtifactError, match="no such file"):
        read_parquet_rows(tmp_path / "missing.parquet")
    with pytest.raises(ArtifactError, match="is a directory"):
        read_safetensors(tmp_path)
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(ArtifactError, match="FIFO"):
        read_json_file(tmp_path / "fifo")
    rows = read_parquet_rows(DATASET / "case-3" / "test-00000-of-00001.parquet", ("base_ids",))
    assert rows and isinstance(rows[0]["base_ids"], list)
    with pytest.raises(ArtifactError, match="no column 'nope'"):
        read_parquet_rows(DATASET / "case-3" / "test-00000-of-00001.parquet", ("base_ids", "nope"))
    tensors = read_safetensors(CASE / "model.safetensors")
    assert "embed.W_E" in tensors


# ---------------------------------------------------------------------------- cache verify
from test_cache_integrity import home, hub, server  # noqa: E402,F401 - the published tiny hub and its server


def _pulled(server):
    from cbench.hub.pull import pull

    snap = pull("case-3@v1.0.0", endpoint=server.endpoint)
    return snap, snap.path.parent.parent / "trees" / f"{snap.sha}.json"


@pytest.mark.parametrize("damage", ["not json", "not an object", "no blob id", "unreadable"])
def test_cache_verify_treats_a_damaged_tree_record_as_damage(server, home, damage):
    snap, tree = _pulled(server)
    assert tree.is_file() and run_main(["cache", "verify"]).code == 0
    if damage == "not json":
        tree.write_text("{\"files\": {")
    elif damage == "not an object":
        tree.write_text("[1, 2]")
    elif damage == "no blob id":
        doc = json.loads(tree.read_text())
        next(iter(doc["files"].values())).pop("blob_id")
        tree.write_text(json.dumps(doc))
    else:
        tree.unlink()
        tree.mkdir()
    res = run_main(["cache", "verify"])
    assert res.code == 1 and "DAMAGED" in res.stdout and "tree listing" in res.stdout, res.stdout
    from cbench.hub.cache_verify import tree_listing

    assert tree_listing(tree)[1] is not None
    assert tree_listing(tree.parent / "absent.json") == (None, None)
    if damage != "unreadable":
        res = run_main(["cache", "verify", "--repair"])
        assert res.code == 1 and "removed" in res.stdout
        assert run_main(["cache", "verify"]).code == 0


@pytest.mark.parametrize("planted", ["link to a file outside", "link to a directory", "dangling link", "extra file",
                                     "fifo", "file replaced by a link to another blob's copy"])
def test_cache_verify_reports_anything_in_a_snapshot_that_is_not_its_file(server, home, tmp_path, planted):
    snap, _ = _pulled(server)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("not from the hub")
    root = snap.path
    if planted == "link to a file outside":
        os.symlink(outside / "secret.txt", root / "notes.txt")
    elif planted == "link to a directory":
        os.symlink(outside, root / "more")
    elif planted == "dangling link":
        os.symlink(tmp_path / "nothing", root / "gone.txt")
    elif planted == "extra file":
        (root / "extra.txt").write_text("x")
    elif planted == "fifo":
        os.mkfifo(root / "pipe")
    else:  # the same bytes, but from outside the cache's blobs
        target = root / "config.json"
        copy = outside / "config.json"
        shutil.copy(target.resolve(), copy)
        target.unlink()
        os.symlink(copy, target)
    res = run_main(["cache", "verify"])
    assert res.code == 1 and "DAMAGED" in res.stdout, res.stdout
    if planted.startswith("link") or planted.startswith("file replaced"):
        assert "not to a blob of this repository" in res.stdout, res.stdout
    assert (outside / "secret.txt").read_text() == "not from the hub"
    res = run_main(["cache", "verify", "--repair"])
    assert res.code == 1 and "removed" in res.stdout, res.stdout
    assert run_main(["cache", "verify"]).code == 0
    assert (outside / "secret.txt").read_text() == "not from the hub"  # repair never follows a planted link


# ---------------------------------------------------------------------------- as a user runs them (slow)
@pytest.mark.slow
def test_issue_51_commands_answer_within_5_s_as_processes(tmp_path):
    """The commands of issue 51 as fresh processes (imports included): one line, non-zero, < 5 s."""
    from hub_helpers import run_cli

    (tmp_path / "empty.safetensors").write_bytes(b"")
    shutil.copy(CASE / "model.safetensors", tmp_path / "other.safetensors")
    ds = _damaged_dataset(tmp_path, "dropped column")
    env = {"CBENCH_HOME": str(tmp_path / ".home"), "HF_HUB_OFFLINE": "1", "CBENCH_THREADS": "1"}
    runs = [
        (["build", "ioi-model", "--no-train", "--checkpoint", "empty.safetensors", "--out", "o"], "empty.safetensors"),
        (["build", "ioi-model", "--no-train", "--checkpoint", "other.safetensors", "--out", "o"], "other.safetensors"),
        (["build", "ioi-model", "--out", "/proc/nope", "--time-limit", "1", "--epochs", "1"], "--out"),
        (["build", "ioi-model", "--target", "2"], "--target"),
        (["build", "ioi-model", "--edge-weight", "nan"], "--edge-weight"),
        (["build", "find", "--out", "/proc/nope"], "--out"),
        (["build", "re-release", "--index-version", "not a version"], "--index-version"),
        (["localize", str(CASE), "--variable", "is_x_2", "--dataset", str(ds)], "interchange_labels"),
        (["bench", "--track", "causal-variables", "--cases", "999", "--out", "r"], "no model to localize"),
        (["find", "score", "s.jsonl", "--wall-s", "1e300"], "--wall-s"),
        (["find", "score", "s.jsonl", "--memory-mb", "9223372036854775807"], "--memory-mb"),
    ]
    before = listing(tmp_path)
    for args, needle in runs:
        t0 = time.perf_counter()
        proc = run_cli(args, env=env, cwd=tmp_path, timeout=60)
        took = time.perf_counter() - t0
        assert proc.returncode != 0 and "Traceback" not in proc.stderr, (args, proc.stderr)
        lines = [x for x in proc.stderr.splitlines() if x.startswith("error:")]
        assert len(lines) == 1 and needle in lines[0], (args, proc.stderr)
        assert took < LIMIT_S, (args, took)
        assert listing(tmp_path) == before, args
