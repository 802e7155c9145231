"""The cbench cache is a Hugging Face cache: ``refs/`` written on pull, cbench's records beside
it (``scan_cache_dir`` finds nothing to warn about), ``HF_ENDPOINT`` honoured, and
``cbench.load_dataset(name, config)`` fetching only that config's files, online and then offline."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from huggingface_hub import scan_cache_dir, snapshot_download

import cbench.hub as hubmod
from cbench.hub.cache import Cache, records_dir
from cbench.hub.cache_verify import verify_all
from cbench.errors import CacheDamagedError, UsageError
from cbench.hub.repos import RepoRef
from cbench.hub.server import HubServer
from cbench.hub.loading import load_dataset
from cbench.hub.pull import pull
from cbench.hub.remote import select_remote
from hub_helpers import scratch_zoo  # noqa: F401  (this module publishes its own cbench/case-3)
from hub_helpers import publish_tiny_versions, run_cli, write_tiny_dataset

CONFIGS = ("case-3", "case-5", "case-7")


def _dataset(path: Path, tag: str) -> Path:
    """A dataset with three configs (rows say which config and version they come from)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    lines = ["---", "license: mit", "configs:"]
    for c in CONFIGS:
        d = path / "data" / c
        d.mkdir(parents=True, exist_ok=True)
        for split in ("train", "validation"):
            pq.write_table(pa.Table.from_pylist([{"config": c, "split": split, "tag": tag}]), d / f"{split}.parquet")
        lines += [f"- config_name: {c}", "  data_files:"]
        lines += [f"  - split: {s}\n    path: data/{c}/{s}.parquet" for s in ("train", "validation")]
    (path / "README.md").write_text("\n".join(lines) + "\n---\n# counterfactuals\n")
    return path


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    root = tmp_path_factory.mktemp("hfcache")
    h = root / "hub"
    shas = publish_tiny_versions(root, h, ("v1.0.0", "v1.1.0"))
    for seed, version in enumerate(("v1.0.0", "v1.1.0")):
        shas["ds-" + version] = hubmod.publish(_dataset(root / f"d{seed}", version), "cbench/counterfactuals",
                                               "dataset", version, hub=h).commit
    return h, shas


@pytest.fixture()
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("CBENCH_HOME", str(tmp_path / "home"))
    for k in ("CBENCH_HUB", "CBENCH_ENDPOINT", "HF_ENDPOINT", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(k, raising=False)
    return tmp_path / "home"


def _refs(repo_dir: Path) -> dict[str, str]:
    return {p.relative_to(repo_dir / "refs").as_posix(): p.read_text() for p in (repo_dir / "refs").rglob("*")
            if p.is_file()}


def test_pull_writes_refs_and_hf_reads_the_cache_offline(hub, home):
    h, shas = hub
    pull("case-3@v1.0.0", hub=str(h))
    pull("case-3", hub=str(h))
    cache = home / "cache"
    assert _refs(cache / "models--cbench--case-3") == {"v1.0.0": shas["v1.0.0"], "v1.1.0": shas["v1.1.0"],
                                                       "main": shas["v1.1.0"]}
    for rev, sha in (("v1.0.0", shas["v1.0.0"]), ("main", shas["v1.1.0"]), (None, shas["v1.1.0"])):
        path = snapshot_download("cbench/case-3", revision=rev, local_files_only=True, cache_dir=str(cache))
        assert Path(path).name == sha
    info = scan_cache_dir(cache)
    assert info.warnings == []
    assert {(r.commit_hash, frozenset(r.refs)) for repo in info.repos for r in repo.revisions} == {
        (shas["v1.0.0"], frozenset({"v1.0.0"})), (shas["v1.1.0"], frozenset({"v1.1.0", "main"}))}
    assert (records_dir(cache) / "index.json").is_file() and not (cache / ".cbench").exists()


def test_an_old_cache_is_moved_and_a_discarded_snapshot_takes_its_refs(hub, home):
    h, shas = hub
    snap = pull("case-3@v1.0.0", hub=str(h))
    cache = home / "cache"
    os.replace(records_dir(cache), cache / ".cbench")  # the layout before the records moved out
    c = Cache()
    assert c.meta == records_dir(cache) and c.snapshot(RepoRef("cbench/case-3"), snap.sha) is not None
    assert not (cache / ".cbench").exists()
    blob = (snap.path / "meta.json").resolve()
    blob.write_bytes(blob.read_bytes() + b" ")  # damage it: the repair drops the snapshot and its ref
    proc = run_cli(["cache", "verify", "--repair"], env={"CBENCH_HOME": str(home)})
    assert proc.returncode == 1 and "DAMAGED" in proc.stdout
    repo = cache / "models--cbench--case-3"
    assert not (repo / "refs").exists() or _refs(repo) == {}  # no ref to a commit that is gone
    assert scan_cache_dir(cache).warnings == []


def test_hf_endpoint_is_honoured_and_cbench_endpoint_wins(hub, home, monkeypatch):
    h, shas = hub
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    assert select_remote().endpoint == "http://127.0.0.1:9"
    monkeypatch.setenv("CBENCH_ENDPOINT", "http://127.0.0.1:8")
    assert select_remote().endpoint == "http://127.0.0.1:8"
    monkeypatch.delenv("CBENCH_ENDPOINT")
    monkeypatch.setenv("HF_ENDPOINT", "not a url")
    with pytest.raises(UsageError, match="HF_ENDPOINT"):
        select_remote()
    with HubServer(h) as server:
        proc = run_cli(["pull", "case-3@v1.0.0", "--json"], env={"CBENCH_HOME": str(home), "HF_ENDPOINT": server.endpoint,
                                                                 "CBENCH_ENDPOINT": None, "CBENCH_HUB": None})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["sha"] == shas["v1.0.0"]


def _parquets(cache: Path) -> list[str]:
    return sorted(p.relative_to(cache).as_posix().split("/snapshots/")[1].split("/", 1)[1]
                  for p in cache.rglob("*.parquet"))


def test_load_dataset_fetches_one_config_and_answers_offline(hub, home, monkeypatch):
    h, shas = hub
    ds = load_dataset("counterfactuals", "case-5", revision="v1.0.0", hub=str(h))
    assert ds["validation"][0] == {"config": "case-5", "split": "validation", "tag": "v1.0.0"}
    cache = home / "cache"
    assert _parquets(cache) == ["data/case-5/train.parquet", "data/case-5/validation.parquet"]
    repo = cache / "datasets--cbench--counterfactuals"
    assert _refs(repo) == {"v1.0.0": shas["ds-v1.0.0"]}
    # a second config of the same commit joins the first in the same snapshot directory
    assert load_dataset("counterfactuals", "case-7", revision="v1.0.0", hub=str(h))["train"][0]["config"] == "case-7"
    assert len(_parquets(cache)) == 4 and scan_cache_dir(cache).warnings == []
    # offline: the hub is not asked (a bad hub would fail), the tag resolves from the records
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("CBENCH_HUB", str(home / "no-such-hub"))
    assert load_dataset("counterfactuals", "case-5", revision="v1.0.0")["train"][0]["tag"] == "v1.0.0"
    assert load_dataset("counterfactuals", "case-5")["train"][0]["tag"] == "v1.0.0"  # newest cached
    with pytest.raises(Exception, match="case-3|not cached|not in the cache"):
        load_dataset("counterfactuals", "case-3", revision="v1.0.0")
    assert all(r.ok for r in verify_all(Cache())) and {r.config for r in verify_all(Cache())} == {"case-5", "case-7"}
    # a damaged config file is found before use
    victim = repo / "snapshots" / shas["ds-v1.0.0"] / "data" / "case-5" / "train.parquet"
    victim.resolve().write_bytes(victim.resolve().read_bytes()[:-4] + b"PAR2")
    with pytest.raises(CacheDamagedError, match="case-5"):
        load_dataset("counterfactuals", "case-5", revision="v1.0.0")
    # online again: fetched anew; then a full pull of the same commit replaces the partial snapshot
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.delenv("CBENCH_HUB")
    assert load_dataset("counterfactuals", "case-5", revision="v1.0.0", hub=str(h))["train"][0]["tag"] == "v1.0.0"
    snap = pull("counterfactuals@v1.0.0", repo_type="dataset", hub=str(h))
    assert len(_parquets(cache)) == 6 and snap.files == 7
    assert load_dataset("counterfactuals", "case-3", revision="v1.0.0", hub=str(h))["train"][0]["config"] == "case-3"


def test_an_unknown_config_is_one_clear_error(hub, home):
    h, _ = hub
    with pytest.raises(UsageError, match="no config 'case-99'.*case-3, case-5, case-7"):
        load_dataset("counterfactuals", "case-99", hub=str(h))
    assert not list((home / "cache").rglob("*.parquet"))
