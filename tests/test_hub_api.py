"""The local hub answers the Hub API as huggingface.co does: a plain ``huggingface_hub`` client
against ``cbench``'s server (olah behind :mod:`cbench.hub.api`) on 127.0.0.1."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from huggingface_hub import HfApi, hf_hub_download
from huggingface_hub.errors import EntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError

import cbench.hub as hubmod
from cbench.hub.server import HubServer
from cbench.hub.pull import git_blob_id
from hub_helpers import write_tiny_artifact, write_tiny_dataset

V1_DATE = "2026-11-20T10:00:00Z"
V2_DATE = "2026-11-21T12:30:00Z"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("hubapi")
    hub = root / "hub"
    write_tiny_artifact(root / "m1", seed=0)
    write_tiny_artifact(root / "m2", seed=1)
    shas = {"v1.0.0": hubmod.publish(root / "m1", "cbench/case-3", "model", "v1.0.0", hub=hub, date=V1_DATE).commit,
            "v1.1.0": hubmod.publish(root / "m2", "cbench/case-3", "model", "v1.1.0", hub=hub, date=V2_DATE).commit}
    write_tiny_artifact(root / "t5", case="5", seed=5)
    hubmod.publish(root / "t5", "cbench/tracr-case-5", "model", "v1.0.0", hub=hub, date=V1_DATE)
    write_tiny_dataset(root / "ds", [{"base": "abc", "label": 0}])
    hubmod.publish(root / "ds", "cbench/counterfactuals", "dataset", "v1.0.0", hub=hub, date=V1_DATE)
    with HubServer(hub) as server:
        yield server, HfApi(endpoint=server.endpoint, token=False), shas, root


def _utc(iso: str) -> datetime:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).astimezone(timezone.utc)


def test_model_info_without_revision_is_main_with_real_dates_and_siblings(served):
    server, api, shas, root = served
    info = api.model_info("cbench/case-3")
    assert info.id == "cbench/case-3" and info.sha == shas["v1.1.0"]
    assert info.last_modified == _utc(V2_DATE) and info.created_at == _utc(V1_DATE)
    assert info.library_name is None and "cbench" in info.tags and "license:mit" in info.tags
    sib = {s.rfilename: s for s in info.siblings}
    assert set(sib) == {"README.md", "circuit.json", "config.json", "meta.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"}
    meta = root / "m2" / "meta.json"
    assert sib["meta.json"].size == meta.stat().st_size and sib["meta.json"].blob_id == git_blob_id(meta)
    assert info.card_data is not None and info.card_data.license == "mit"


def test_model_info_at_a_tag_and_dataset_info(served):
    server, api, shas, root = served
    old = api.model_info("cbench/case-3", revision="v1.0.0", files_metadata=True)
    assert old.sha == shas["v1.0.0"] and old.last_modified == _utc(V1_DATE)
    assert {s.rfilename: s.blob_id for s in old.siblings}["meta.json"] == git_blob_id(root / "m1" / "meta.json")
    ds = api.dataset_info("cbench/counterfactuals")
    assert ds.id == "cbench/counterfactuals" and "data/case-3/train.parquet" in {s.rfilename for s in ds.siblings}


def test_repo_exists_and_missing_repositories(served):
    server, api, shas, root = served
    assert api.repo_exists("cbench/case-3") and api.repo_exists("cbench/counterfactuals", repo_type="dataset")
    assert not api.repo_exists("cbench/case-99")
    assert not api.repo_exists("cbench/case-3", repo_type="dataset")
    with pytest.raises(RepositoryNotFoundError):
        api.model_info("cbench/case-99")


def test_list_models_and_datasets(served):
    server, api, shas, root = served
    assert sorted(m.id for m in api.list_models()) == ["cbench/case-3", "cbench/tracr-case-5"]
    assert [m.id for m in api.list_models(search="tracr")] == ["cbench/tracr-case-5"]
    assert [m.id for m in api.list_models(author="someone-else")] == []
    assert [d.id for d in api.list_datasets()] == ["cbench/counterfactuals"]
    assert len(list(api.list_models(limit=1))) == 1


def test_list_repo_commits(served):
    server, api, shas, root = served
    commits = api.list_repo_commits("cbench/case-3")
    assert [c.commit_id for c in commits] == [shas["v1.1.0"], shas["v1.0.0"]]
    assert commits[0].authors == [hubmod.AUTHOR_NAME] and commits[0].created_at == _utc(V2_DATE)
    assert commits[0].title == "Release cbench/case-3 v1.1.0"
    assert [c.commit_id for c in api.list_repo_commits("cbench/case-3", revision="v1.0.0")] == [shas["v1.0.0"]]


def test_missing_file_and_revision_raise_what_huggingface_co_raises(served, tmp_path):
    server, api, shas, root = served
    kw = dict(endpoint=server.endpoint, cache_dir=str(tmp_path / "c"), token=False)
    with pytest.raises(EntryNotFoundError):
        hf_hub_download("cbench/case-3", "nope.json", revision="v1.0.0", **kw)
    with pytest.raises(RevisionNotFoundError):
        hf_hub_download("cbench/case-3", "meta.json", revision="v9.0.0", **kw)
    with pytest.raises(RevisionNotFoundError):
        api.model_info("cbench/case-3", revision="v9.9.9")
    with pytest.raises(RevisionNotFoundError):
        list(api.list_repo_tree("cbench/case-3", revision="v9.9.9"))
    with pytest.raises(RepositoryNotFoundError):
        hf_hub_download("cbench/case-99", "meta.json", revision="v1.0.0", **kw)
    # what exists still downloads through olah
    path = hf_hub_download("cbench/case-3", "meta.json", revision="v1.0.0", **kw)
    assert open(path, "rb").read() == (root / "m1" / "meta.json").read_bytes()
    refs = api.list_repo_refs("cbench/case-3")
    assert {t.name: t.target_commit for t in refs.tags} == shas


def test_release_dates_are_real_and_deterministic(tmp_path):
    write_tiny_artifact(tmp_path / "a", seed=0)
    one = hubmod.publish(tmp_path / "a", "cbench/case-3", "model", "v1.0.0", hub=tmp_path / "h1", date=V1_DATE)
    two = hubmod.publish(tmp_path / "a", "cbench/case-3", "model", "v1.0.0", hub=tmp_path / "h2", date=V1_DATE)
    other = hubmod.publish(tmp_path / "a", "cbench/case-3", "model", "v1.0.0", hub=tmp_path / "h3", date=V2_DATE)
    assert one.commit == two.commit != other.commit
    when = hubmod.git(tmp_path / "h1" / "models/cbench/case-3", "log", "-1", "--format=%ct")
    assert int(when) == int(_utc(V1_DATE).timestamp())
    # without a date: a fixed date from the version, never in the future
    assert hubmod.version_timestamp("v2.999.999") < datetime.now(timezone.utc).timestamp()


def test_zoo_seeding_uses_the_recorded_release_dates(tmp_path):
    import json
    import shutil

    zoo = tmp_path / "zoo"
    write_tiny_artifact(tmp_path / "t3", case="3", seed=3)
    shutil.copytree(tmp_path / "t3", zoo / "releases/models/cbench/tracr-case-3/v1.0.0")
    shutil.copytree(tmp_path / "t3", zoo / "releases/models/cbench/tracr-case-4/v1.0.0")
    (zoo / "releases" / hubmod.RELEASE_DATES_FILE).write_text(
        json.dumps({"models/cbench/tracr-case-3/v1.0.0": V2_DATE}))
    done = hubmod.ensure_seeded(tmp_path / "hub", zoo=zoo, only=[hubmod.RepoRef("cbench/tracr-case-3")])
    assert [r.repo_id for r in done] == ["cbench/tracr-case-3"]  # lazily: only what was asked for
    assert not (tmp_path / "hub" / "models/cbench/tracr-case-4").exists()
    when = hubmod.git(tmp_path / "hub" / "models/cbench/tracr-case-3", "log", "-1", "--format=%ct")
    assert int(when) == int(_utc(V2_DATE).timestamp())
    assert hubmod.ensure_seeded(tmp_path / "hub", zoo=zoo, only=[hubmod.RepoRef("cbench/tracr-case-3")]) == []
    assert [r.repo_id for r in hubmod.ensure_seeded(tmp_path / "hub", zoo=zoo)] == ["cbench/tracr-case-4"]
