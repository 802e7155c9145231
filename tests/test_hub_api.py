"""The local hub answers the Hub API as huggingface.co does: a plain ``huggingface_hub`` client
against ``cbench``'s server (olah behind :mod:`cbench.hub.api`) on 127.0.0.1."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest
import httpx
from huggingface_hub import HfApi, hf_hub_download, snapshot_download
from huggingface_hub.errors import (EntryNotFoundError, HfHubHTTPError, RepositoryNotFoundError,
                                    RevisionNotFoundError)

import cbench.hub as hubmod
from cbench.hub.server import HubServer
from cbench.hub.pull import git_blob_id
from hub_helpers import artifact_files, write_tiny_artifact, write_tiny_dataset

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
    write_tiny_artifact(root / "t5", case="5", seed=5, tags=("cbench", "tracr"))
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
    assert set(sib) == artifact_files(root / "m2") >= {"README.md", "circuit.json", "config.json", "meta.json",
                                                        "model.safetensors", "tokenizer.json", "tokenizer_config.json"}
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


# ---------------------------------------------------------------------------- huggingface.co's semantics
# Each case: a call of huggingface_hub's own client and the exception class it raises against
# huggingface.co for the same situation (None: it succeeds).
def _hf_cases(api: HfApi, kw: dict) -> dict:
    return {
        "model_info, missing repository": (RepositoryNotFoundError, lambda: api.model_info("cbench/case-99")),
        "model_info, missing org": (RepositoryNotFoundError, lambda: api.model_info("nobody/case-3")),
        "dataset_info of a model": (RepositoryNotFoundError, lambda: api.dataset_info("cbench/case-3")),
        "model_info, missing tag": (RevisionNotFoundError, lambda: api.model_info("cbench/case-3", revision="v9.9.9")),
        "model_info, revision expression": (RevisionNotFoundError,
                                            lambda: api.model_info("cbench/case-3", revision="main~1")),
        "model_info, short sha": (RevisionNotFoundError, lambda: api.model_info("cbench/case-3", revision="abc1234")),
        "model_info, unknown sha": (RevisionNotFoundError, lambda: api.model_info("cbench/case-3", revision="f" * 40)),
        "model_info, refs/pr/1": (RevisionNotFoundError, lambda: api.model_info("cbench/case-3", revision="refs/pr/1")),
        "model_info, refs/tags/v9.9.9": (RevisionNotFoundError,
                                         lambda: api.model_info("cbench/case-3", revision="refs/tags/v9.9.9")),
        "download, missing file": (EntryNotFoundError,
                                   lambda: hf_hub_download("cbench/case-3", "nope.json", revision="v1.0.0", **kw)),
        "download, a folder": (EntryNotFoundError, lambda: hf_hub_download(
            "cbench/counterfactuals", "data/case-3", repo_type="dataset", revision="v1.0.0", **kw)),
        "download, missing tag": (RevisionNotFoundError,
                                  lambda: hf_hub_download("cbench/case-3", "meta.json", revision="v9.0.0", **kw)),
        "download, missing repository": (RepositoryNotFoundError,
                                         lambda: hf_hub_download("cbench/case-99", "meta.json", revision="v1.0.0", **kw)),
        "tree, missing folder": (EntryNotFoundError, lambda: list(api.list_repo_tree(
            "cbench/counterfactuals", path_in_repo="data/case-99", repo_type="dataset", revision="v1.0.0"))),
        "tree, missing top folder": (EntryNotFoundError, lambda: list(api.list_repo_tree(
            "cbench/case-3", path_in_repo="nope", revision="refs/tags/v1.0.0"))),
        "tree, a file": (EntryNotFoundError, lambda: list(api.list_repo_tree("cbench/case-3", path_in_repo="meta.json"))),
        "tree, missing tag": (RevisionNotFoundError, lambda: list(api.list_repo_tree("cbench/case-3", revision="v9.9.9"))),
        "tree, missing repository": (RepositoryNotFoundError, lambda: list(api.list_repo_tree("cbench/case-99"))),
        "paths-info, missing repository": (RepositoryNotFoundError,
                                           lambda: api.get_paths_info("cbench/case-99", ["meta.json"], revision="v1.0.0")),
        "paths-info, missing tag": (RevisionNotFoundError,
                                    lambda: api.get_paths_info("cbench/case-3", ["meta.json"], revision="v9.9.9")),
        "refs, missing repository": (RepositoryNotFoundError, lambda: api.list_repo_refs("cbench/case-99")),
        "commits, missing repository": (RepositoryNotFoundError, lambda: api.list_repo_commits("cbench/case-99")),
        "commits, missing tag": (RevisionNotFoundError,
                                 lambda: api.list_repo_commits("cbench/case-3", revision="v9.9.9")),
        "whoami with a token the hub does not know": (HfHubHTTPError,
                                                      lambda: HfApi(endpoint=api.endpoint, token="hf_x").whoami()),
    }


_CASES = list(_hf_cases(HfApi(endpoint="http://x"), {}))


@pytest.mark.parametrize("case", _CASES)
def test_errors_are_huggingface_hubs_own_classes(served, tmp_path, case):
    server, api, _, _ = served
    kw = {"endpoint": server.endpoint, "cache_dir": str(tmp_path / "c"), "token": False}
    expected, call = _hf_cases(api, kw)[case]
    with pytest.raises(expected) as info:
        call()
    status = info.value.response.status_code if getattr(info.value, "response", None) is not None else None
    assert status == (401 if expected is HfHubHTTPError else 404), (case, status, info.value)
    if expected is HfHubHTTPError:  # whoami: huggingface_hub's answer to a token the hub rejects
        assert "Invalid user token" in str(info.value)
        assert not isinstance(info.value, (RepositoryNotFoundError, RevisionNotFoundError, EntryNotFoundError))


def test_full_ref_names_resolve_as_on_huggingface_co(served, tmp_path):
    server, api, shas, root = served
    assert api.model_info("cbench/case-3", revision="refs/tags/v1.0.0").sha == shas["v1.0.0"]
    assert api.model_info("cbench/case-3", revision="refs/heads/main").sha == shas["v1.1.0"]
    assert api.revision_exists("cbench/case-3", "refs/tags/v1.1.0")
    assert not api.revision_exists("cbench/case-3", "refs/tags/v9.9.9")
    assert api.file_exists("cbench/case-3", "meta.json", revision="refs/tags/v1.0.0")
    assert not api.file_exists("cbench/case-3", "nope.json", revision="refs/tags/v1.0.0")
    tree = {e.path for e in api.list_repo_tree("cbench/case-3", revision="refs/tags/v1.0.0")}
    assert "meta.json" in tree
    info = api.get_paths_info("cbench/case-3", ["meta.json"], revision="refs/tags/v1.0.0")
    assert [p.blob_id for p in info] == [git_blob_id(root / "m1" / "meta.json")]
    kw = {"endpoint": server.endpoint, "cache_dir": str(tmp_path / "c"), "token": False}
    got = hf_hub_download("cbench/case-3", "meta.json", revision="refs/tags/v1.0.0", **kw)
    assert Path(got).read_bytes() == (root / "m1" / "meta.json").read_bytes()
    snap = snapshot_download("cbench/case-3", revision="refs/tags/v1.0.0", **kw)
    assert snap.endswith(shas["v1.0.0"])
    # a folder that exists lists its files
    files = {e.path for e in api.list_repo_tree("cbench/counterfactuals", path_in_repo="data/case-3",
                                                  repo_type="dataset", revision="refs/heads/main")}
    assert files == {"data/case-3/train.parquet"}
    assert [c.commit_id for c in api.list_repo_commits("cbench/case-3", revision="refs/tags/v1.0.0")] == [shas["v1.0.0"]]


def _ids(infos) -> list[str]:
    return sorted(info.id for info in infos)


def test_home_page_whoami_and_listing_filters(served):
    server, api, _, _ = served
    home = httpx.get(server.endpoint + "/")
    assert home.status_code == 200 and "2 models and 1 datasets" in home.text
    assert httpx.head(server.endpoint + "/").status_code == 200
    who = httpx.get(server.endpoint + "/api/whoami-v2", timeout=5)  # anonymous, at once
    assert who.status_code == 401 and who.json() == {"error": "Invalid credentials in Authorization header"}
    with pytest.raises(ValueError):  # huggingface_hub itself refuses whoami without a token
        api.whoami()
    assert _ids(api.list_models(filter="tracr")) == ["cbench/tracr-case-5"]
    assert _ids(api.list_models(filter=["cbench", "license:mit"])) == ["cbench/case-3", "cbench/tracr-case-5"]
    assert _ids(api.list_models(filter=["cbench", "nowhere"])) == []
    assert _ids(api.list_models(search="CASE-3")) == ["cbench/case-3"]
    assert _ids(api.list_models(author="cbench", search="tracr")) == ["cbench/tracr-case-5"]
    assert _ids(api.list_models(author="nobody")) == []
    assert _ids(api.list_datasets(filter="license:mit")) == ["cbench/counterfactuals"]
    assert _ids(api.list_datasets(filter="tracr")) == []
    assert _ids(api.list_datasets(search="counter", author="cbench")) == ["cbench/counterfactuals"]
    assert [m.id for m in api.list_models(sort="last_modified")] == ["cbench/case-3", "cbench/tracr-case-5"]  # newest first
    assert len(list(api.list_models(filter="cbench", limit=1))) == 1
