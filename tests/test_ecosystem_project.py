"""The issue's "Done when": a second project that uses only ``huggingface_hub``, ``datasets`` and
TransformerLens (``tests/ecosystem_project/hf_calls.py``, which never imports cbench) performs
each call against a local cbench hub (``cbench hub serve``'s server) and a cbench cache, and gets
what huggingface.co would give: the harness below knows the true shas, blob ids, dates and rows.
The ``hf`` CLI's cache commands run on the cbench cache too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import cbench.hub as hubmod
from cbench.hub.server import HubServer
from cbench.hub.pull import git_blob_id, pull
from hub_helpers import scratch_zoo  # noqa: F401  (this module publishes its own cbench/case-3)
from hub_helpers import publish_tiny_versions, write_tiny_artifact, write_tiny_dataset

# a fresh interpreter importing datasets, transformers and TransformerLens, plus three `hf` runs:
# about a minute on a quiet machine, four under load
pytestmark = pytest.mark.slow

PROJECT = Path(__file__).parent / "ecosystem_project" / "hf_calls.py"
HF = Path(sys.executable).with_name("hf")
DATES = {"v1.0.0": "2026-11-20T10:00:00Z", "v1.1.0": "2026-11-21T12:30:00Z"}
ROWS = {"v1.0.0": [{"base": "x a b", "label": 0}, {"base": "x b b", "label": 1}],
        "v1.1.0": [{"base": "x c c", "label": 2}]}


def _dataset(path: Path, rows: list[dict]) -> Path:
    """Two configs, so fetching one of them is visible."""
    write_tiny_dataset(path, rows, "case-5")
    write_tiny_dataset(path, rows, "case-3")
    card = (path / "README.md").read_text()
    (path / "README.md").write_text(card.replace(
        "configs:\n", "configs:\n- config_name: case-5\n  data_files:\n  - split: train\n"
        "    path: data/case-5/train.parquet\n", 1))
    return path


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("eco")
    hub = root / "hub"
    shas = publish_tiny_versions(root, hub, tuple(DATES), dates=DATES)
    for seed, version in enumerate(DATES):
        hubmod.publish(_dataset(root / f"ds{seed}", ROWS[version]), "cbench/counterfactuals", "dataset", version,
                       hub=hub, date=DATES[version])
    write_tiny_artifact(root / "t5", case="5", seed=5)
    hubmod.publish(root / "t5", "cbench/tracr-case-5", "model", "v1.0.0", hub=hub, date=DATES["v1.0.0"])
    cache = root / "cbench-cache"
    with HubServer(hub) as server:
        for spec in ("case-3@v1.0.0", "case-3"):  # cbench pulls: the cache the project reads
            pull(spec, endpoint=server.endpoint, cache_dir=cache)
        env = dict(os.environ, HF_ENDPOINT=server.endpoint, HF_HUB_DISABLE_PROGRESS_BARS="1",
                   HF_HUB_DISABLE_TELEMETRY="1", HF_HUB_DISABLE_XET="1", HF_HOME=str(root / "hf-home"))
        for k in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HF_TOKEN"):
            env.pop(k, None)
        proc = subprocess.run([sys.executable, str(PROJECT), str(cache), str(root / "work")], capture_output=True,
                              text=True, env=env, cwd=PROJECT.parent, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        hf = {args[0]: subprocess.run([str(HF), "cache", *args], capture_output=True, text=True, env=env, timeout=300)
              for args in (["verify", "cbench/case-3", "--revision", "v1.0.0", "--cache-dir", str(cache),
                            "--fail-on-missing-files", "--fail-on-extra-files"],
                           ["prune", "--dry-run", "--cache-dir", str(cache)],
                           ["ls", "--cache-dir", str(cache), "--revisions", "--format", "json"])}
    yield json.loads(proc.stdout.strip().splitlines()[-1]), shas, root, server.endpoint, hf


def test_the_project_never_imports_cbench(world):
    out, *_ = world
    assert out["imported_cbench"] is False
    assert "import cbench" not in PROJECT.read_text() and "from cbench" not in PROJECT.read_text()


def test_hub_api_calls(world):
    out, shas, root, endpoint, _ = world
    assert out["endpoint"] == endpoint  # HF_ENDPOINT, as huggingface_hub reads it
    info = out["model_info"]
    assert info["id"] == "cbench/case-3" and info["sha"] == shas["v1.1.0"]  # no revision: main, the newest
    assert info["last_modified"] == "2026-11-21T12:30:00+00:00" and info["license"] == "mit"
    meta = root / "m1" / "meta.json"
    assert info["siblings"]["meta.json"] == [meta.stat().st_size, git_blob_id(meta)]
    assert set(info["siblings"]) == {"README.md", "bridge/config.json", "bridge/model.safetensors", "circuit.json",
                                     "config.json", "meta.json", "model.safetensors", "tokenizer.json",
                                     "tokenizer_config.json"}  # bridge/: the TransformerLens 4 files
    assert out["model_info_at_tag"] == shas["v1.0.0"]
    assert out["repo_exists"] == [True, False, True]
    assert out["list_models"] == ["cbench/case-3", "cbench/tracr-case-5"]
    assert out["list_datasets"] == ["cbench/counterfactuals"]
    commits = out["list_repo_commits"]
    assert [c[0] for c in commits] == [shas["v1.1.0"], shas["v1.0.0"]]  # newest first, as the Hub lists them
    assert [c[2] for c in commits] == ["2026-11-21T12:30:00+00:00", "2026-11-20T10:00:00+00:00"]
    assert out["list_repo_refs"] == ["v1.0.0", "v1.1.0"]


def test_downloads_and_errors(world):
    out, *_ = world
    assert out["hf_hub_download"] == 0  # meta.json of v1.0.0 (seed 0), not of main (seed 1)
    # the classes huggingface_hub raises for huggingface.co (RemoteEntryNotFoundError is its
    # EntryNotFoundError for a file missing on the server)
    assert out["missing_file"][0] == "RemoteEntryNotFoundError" and "EntryNotFoundError" in out["missing_file"]
    assert out["missing_revision"][0] == "RevisionNotFoundError"
    assert out["missing_revision_info"][0] == "RevisionNotFoundError"
    assert out["missing_repo"][0] == "RepositoryNotFoundError"


def test_the_cbench_cache_is_a_hugging_face_cache(world):
    out, shas, root, _, hf = world
    snap = out["snapshot_local"]
    assert snap["commit"] == shas["v1.0.0"]
    assert snap["files"] == ["README.md", "bridge", "circuit.json", "config.json", "meta.json", "model.safetensors",
                             "tokenizer.json", "tokenizer_config.json"]
    scan = out["scan_cache_dir"]
    assert scan["warnings"] == []  # cbench's records live beside the cache, not in it
    assert scan["revisions"] == sorted([["cbench/case-3", shas["v1.0.0"], ["v1.0.0"]],
                                        ["cbench/case-3", shas["v1.1.0"], ["main", "v1.1.0"]]])
    verify, prune, ls = hf["verify"], hf["prune"], hf["ls"]
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "All checksums match" in verify.stdout and "9 file(s)" in verify.stdout
    assert prune.returncode == 0 and "Nothing to prune" in prune.stdout, prune.stdout + prune.stderr
    assert ls.returncode == 0 and shas["v1.0.0"] in ls.stdout and shas["v1.1.0"] in ls.stdout, ls.stdout + ls.stderr


def test_load_dataset_of_a_config_at_a_revision(world):
    out, *_ = world
    assert out["load_dataset"] == {"train": ROWS["v1.0.0"]}
    assert out["load_dataset_newer"] == {"train": ROWS["v1.1.0"]}


def test_hooked_transformer_from_the_downloaded_files(world):
    out, *_ = world
    tl = out["transformer_lens"]
    assert tl["missing_weights"] == [] and tl["unexpected_weights"] == []
    assert tl["tokens"] == [[0, 4, 1, 2]]  # BOS prepended by the tokenizer
    assert tl["str_tokens"] == ["BOS", "x", "a", "b"]
    assert tl["logits_shape"] == [1, 4, 3]
