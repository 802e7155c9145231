"""Cache integrity (verified before every use, repaired by pull), tag pinning, and option values
that used to fall back silently: each refused with one line and the right exit code."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import cbench.hub as hubmod
from cbench.hub.cache import Cache
from cbench.errors import CacheDamagedError, TagMovedError
from cbench.hub.repos import RepoRef
from cbench.hub.server import HubServer
from cbench.hub.pull import pull
from cli_inprocess import assert_one_clean_error, run_main
from hub_helpers import scratch_zoo  # noqa: F401  (this module publishes its own cbench/case-3)
from hub_helpers import publish_tiny_versions, write_tiny_artifact, write_tiny_dataset

ROWS = [{"base_ids": [0, 1, 2, 3, 1], "source_ids": [0, 2, 2, 3, 1], "base_label": [0, 1, 2, 0]}] * 4


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    root = tmp_path_factory.mktemp("integrity")
    h = root / "hub"
    shas = publish_tiny_versions(root, h, ("v1.0.0", "v1.1.0"), describe=True)
    write_tiny_dataset(root / "d0", ROWS)
    shas["ds"] = hubmod.publish(root / "d0", "cbench/counterfactuals", "dataset", "v1.0.0", hub=h).commit
    return h, shas


@pytest.fixture(scope="module")
def server(hub):
    with HubServer(hub[0]) as s:
        yield s


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("CBENCH_HOME", str(tmp_path / "home"))
    # the hub above holds this module's own cbench/case-3, not the zoo's: no zoo, no zoo pins (also
    # for the modules that import this fixture; tests of the pins set CBENCH_ZOO themselves)
    monkeypatch.setenv("CBENCH_ZOO", str(tmp_path / "no-zoo"))
    for k in ("HF_HUB_OFFLINE", "CBENCH_ENDPOINT", "CBENCH_HUB"):
        monkeypatch.delenv(k, raising=False)
    return tmp_path / "home"


def _flip(path: Path, at: int = -3) -> None:
    data = bytearray(Path(path).read_bytes())
    data[at] ^= 0x01
    Path(path).write_bytes(bytes(data))


def _tree(root: Path) -> dict[str, bytes]:
    """The Hugging Face cache under ``root`` and cbench's index beside it."""
    out = {p.relative_to(root).as_posix(): (p.read_bytes() if p.is_file() else b"") for p in sorted(root.rglob("*"))}
    index = root.with_name(root.name + ".cbench") / "index.json"
    out["<index>"] = index.read_bytes() if index.is_file() else b""
    return out


# ---------------------------------------------------------------------------- tampered cache
def test_flipped_byte_is_found_refused_offline_and_repaired_by_pull(server, home):
    snap = pull("case-3@v1.0.0", endpoint=server.endpoint)
    blob = (snap.path / "model.safetensors").resolve()
    _flip(blob)
    res = run_main(["info", "case-3@v1.0.0"], env={"HF_HUB_OFFLINE": "1"})
    assert_one_clean_error(res, 1, "damaged", "model.safetensors", "cbench pull")
    with pytest.raises(CacheDamagedError):
        pull("case-3@v1.0.0", offline=True)
    res = run_main(["cache", "verify"])
    assert res.code == 1 and "DAMAGED" in res.stdout and "model.safetensors" in res.stdout
    res = run_main(["pull", "case-3@v1.0.0", "--endpoint", server.endpoint])
    assert res.code == 0 and "damaged" in res.stderr and "downloaded it again" in res.stderr
    assert res.stdout.splitlines()[0].endswith("downloaded and verified")
    assert run_main(["cache", "verify"]).code == 0
    again = run_main(["pull", "case-3@v1.0.0", "--endpoint", server.endpoint])
    assert again.code == 0 and again.stdout.splitlines()[0].endswith("from cache") and not again.stderr


def test_weights_and_meta_edited_together_are_still_refused(server, home):
    import hashlib

    from cbench.hub.loading import load

    snap = pull("case-3@v1.0.0", endpoint=server.endpoint)
    weights = (snap.path / "model.safetensors").resolve()
    _flip(weights)
    meta_path = (snap.path / "meta.json").resolve()
    meta = json.loads(meta_path.read_text())
    meta["files"]["model.safetensors"] = hashlib.sha256(weights.read_bytes()).hexdigest()
    meta_path.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    with pytest.raises(CacheDamagedError, match="meta.json"):
        load("case-3@v1.0.0", offline=True)
    art = load("case-3@v1.0.0", endpoint=server.endpoint)  # online: repaired, then loaded
    assert art.verified and art.load_model() is not None


def test_cache_verify_checks_datasets_and_repair_removes_damaged_snapshots(server, hub, home):
    pull("case-3@v1.1.0", endpoint=server.endpoint)
    ds = pull("counterfactuals", repo_type="dataset", endpoint=server.endpoint)
    _flip(next(ds.path.rglob("*.parquet")).resolve(), at=10)
    res = run_main(["cache", "verify", "--json"])
    assert res.code == 1
    reports = {r["repo"]: r for r in json.loads(res.stdout)}
    assert reports["cbench/case-3"]["ok"] and not reports["cbench/counterfactuals"]["ok"]
    with pytest.raises(CacheDamagedError, match="parquet"):
        from cbench.hub.loading import load_dataset

        load_dataset("counterfactuals", "case-3", offline=True)
    res = run_main(["cache", "verify", "--repair"])
    assert res.code == 1 and "removed" in res.stdout
    assert not Cache().entry(RepoRef("cbench/counterfactuals", "dataset")).get("snapshots")
    assert run_main(["cache", "verify"]).code == 0
    again = pull("counterfactuals", repo_type="dataset", endpoint=server.endpoint)
    assert not again.from_cache and again.sha == hub[1]["ds"]


def test_datasets_arrow_cache_lives_under_cbench_home(server, home):
    from cbench.hub.loading import load_dataset

    ds = load_dataset("counterfactuals", "case-3", endpoint=server.endpoint, split="train")
    assert len(ds) == len(ROWS)
    arrow = list((home / "datasets").rglob("*.arrow"))
    assert arrow and all(str(p).startswith(str(home)) for p in arrow)
    assert all(str(f).startswith(str(home)) for f in ds.cache_files and [c["filename"] for c in ds.cache_files])


# ---------------------------------------------------------------------------- moved tags
def _move_tag(repo: Path, tag: str) -> str:
    """Re-point ``tag`` at a new commit whose manifest is consistent (README changed, meta.json updated)."""
    import hashlib

    env = hubmod._git_env("v9.0.0")
    hubmod.git(repo, "checkout", "-q", tag, env=env)
    (repo / "README.md").write_text((repo / "README.md").read_text() + "moved\n")
    meta = json.loads((repo / "meta.json").read_text())
    meta["files"]["README.md"] = hashlib.sha256((repo / "README.md").read_bytes()).hexdigest()
    (repo / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    hubmod.git(repo, "commit", "-q", "-am", "moved", env=env)
    hubmod.git(repo, "tag", "-f", "-a", tag, "-m", "moved", env=env)
    return hubmod.git(repo, "rev-parse", "HEAD", env=env)


def test_a_moved_tag_is_refused_with_both_shas_and_nothing_changes(hub, home, tmp_path):
    h = tmp_path / "hub"
    shutil.copytree(hub[0], h, symlinks=True)
    old = pull("case-3@v1.0.0", hub=str(h)).sha
    new = _move_tag(h / "models/cbench/case-3", "v1.0.0")
    assert new != old
    before = _tree(home / "cache")
    res = run_main(["pull", "case-3@v1.0.0", "--hub", str(h)])
    assert_one_clean_error(res, 1, "v1.0.0", old, new, "--accept-moved-tag")
    with pytest.raises(TagMovedError):
        pull("case-3@v1.0.0", hub=str(h))
    assert _tree(home / "cache") == before
    res = run_main(["pull", "case-3@v1.0.0", "--hub", str(h), "--accept-moved-tag"])
    assert res.code == 0 and new in res.stdout
    assert Cache().pinned_tags(RepoRef("cbench/case-3"))["v1.0.0"] == new
    assert pull("case-3@v1.0.0", hub=str(h)).sha == new  # accepted once: the new pin holds


def test_the_zoo_index_pins_the_default_hub(hub, home, tmp_path, monkeypatch):
    zoo = tmp_path / "zoo"
    write_tiny_artifact(zoo / "releases/models/cbench/case-3/v1.0.0")
    pinned = "ab" * 20
    (zoo / "releases/index.json").write_text(json.dumps({"cases": [
        {"repo": "cbench/case-3", "versions": [{"version": "v1.0.0", "revision": pinned}]}], "datasets": []}))
    monkeypatch.setenv("CBENCH_ZOO", str(zoo))
    res = run_main(["pull", "case-3"])
    assert_one_clean_error(res, 1, "zoo's releases/index.json pins", pinned)
    assert not Cache().cached_repos()


def _pinning_zoo(root: Path, revision: str) -> Path:
    """A zoo whose index pins cbench/case-3 v1.0.0 to ``revision``."""
    zoo = root / "zoo"
    write_tiny_artifact(zoo / "releases/models/cbench/case-3/v1.0.0")
    (zoo / "releases/index.json").write_text(json.dumps({"cases": [
        {"repo": "cbench/case-3", "versions": [{"version": "v1.0.0", "revision": revision}]}], "datasets": []}))
    return zoo


@pytest.mark.parametrize("where", ["--hub", "--endpoint"])
def test_the_zoo_pins_hold_on_every_hub_with_a_fresh_cache(hub, server, home, tmp_path, monkeypatch, where):
    """Was: the zoo's pins were consulted only on the default hub, so a fresh cache took a moved
    tag from --hub DIR or --endpoint URL without a word."""
    target = str(hub[0]) if where == "--hub" else server.endpoint
    monkeypatch.setenv("CBENCH_ZOO", str(_pinning_zoo(tmp_path, "ab" * 20)))  # the hub's v1.0.0 is another commit
    res = run_main(["pull", "case-3@v1.0.0", where, target])
    assert_one_clean_error(res, 1, "zoo's releases/index.json pins", "ab" * 20, hub[1]["v1.0.0"], "--accept-moved-tag")
    assert not Cache().cached_repos()
    # (downloads go through the module's server: a --hub download would start olah for each)
    assert run_main(["pull", "case-3@v1.1.0", "--endpoint", server.endpoint]).code == 0  # not pinned: taken
    res = run_main(["pull", "case-3@v1.0.0", "--endpoint", server.endpoint, "--accept-moved-tag"])
    assert res.code == 0 and hub[1]["v1.0.0"] in res.stdout
    assert run_main(["pull", "case-3@v1.0.0", where, target]).code == 0  # accepted once: this cache's pin holds
    # the zoo's pins name the hub's commit: accepted on a fresh cache
    monkeypatch.setenv("CBENCH_HOME", str(tmp_path / "home2"))
    monkeypatch.setenv("CBENCH_ZOO", str(_pinning_zoo(tmp_path / "z2", hub[1]["v1.0.0"])))
    res = run_main(["pull", "case-3@v1.0.0", where, target])
    assert res.code == 0 and hub[1]["v1.0.0"] in res.stdout


# ---------------------------------------------------------------------------- a cache rewritten consistently
def _git_blob_id(data: bytes) -> str:
    import hashlib

    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _rewrite_consistently(cache_root: Path, repo: str, sha: str, rel: str, data: bytes) -> None:
    """Replace ``rel`` of a cached snapshot and every record that vouches for it: a new blob named
    by its git id, the snapshot link, meta.json's manifest (itself rewritten the same way), the
    saved tree listing and the completion record in the index."""
    import hashlib

    folder = cache_root / ("models--" + repo.replace("/", "--"))
    snap = folder / "snapshots" / sha
    tree_path = folder / "trees" / f"{sha}.json"
    tree = json.loads(tree_path.read_text())
    index_path = cache_root.with_name(cache_root.name + ".cbench") / "index.json"
    index = json.loads(index_path.read_text())
    record = index["repos"][f"model:{repo}"]["snapshots"][sha]["record"]

    def put(name: str, content: bytes) -> None:
        blob = _git_blob_id(content)
        (folder / "blobs" / blob).write_bytes(content)
        (snap / name).unlink()
        (snap / name).symlink_to(os.path.relpath(folder / "blobs" / blob, snap))
        tree["files"][name].update(size=len(content), blob_id=blob)
        record[name] = [len(content), hashlib.sha256(content).hexdigest()]

    put(rel, data)
    meta = json.loads((snap / "meta.json").read_text())
    meta["files"][rel] = hashlib.sha256(data).hexdigest()
    put("meta.json", (json.dumps(meta, indent=2, sort_keys=True) + "\n").encode())
    tree_path.write_text(json.dumps(tree))
    index_path.write_text(json.dumps(index))


@pytest.mark.parametrize("where", ["--endpoint", "--hub"])
def test_a_cache_rewritten_consistently_is_caught_by_an_online_pull(hub, server, home, where):
    """Was: blob, link, manifest, tree record and index rewritten together passed `cache verify`,
    and an online pull answered from that cache without asking the hub."""
    target = server.endpoint if where == "--endpoint" else str(hub[0])
    sha = hub[1]["v1.0.0"]
    snap = pull("case-3@v1.0.0", endpoint=server.endpoint)  # the cache does not depend on where it came from
    original = (snap.path / "README.md").read_bytes()
    _rewrite_consistently(home / "cache", "cbench/case-3", sha, "README.md", b"# case-3\n\nnot what was released\n")
    verify = run_main(["cache", "verify"])
    assert verify.code == 0 and "1 intact, 0 damaged" in verify.stdout  # the cache alone cannot tell
    offline = run_main(["info", "case-3@v1.0.0", "--json"], env={"HF_HUB_OFFLINE": "1"})
    assert offline.code == 0  # offline answers from the cache, as before
    res = run_main(["pull", "case-3@v1.0.0", where, target])
    assert res.code == 0, res.stderr
    assert "README.md: differs from the hub's file" in res.stderr and "downloaded it again" in res.stderr
    assert "downloaded and verified" in res.stdout
    assert (snap.path / "README.md").read_bytes() == original
    again = run_main(["pull", "case-3@v1.0.0", where, target])
    assert again.code == 0 and "from cache" in again.stdout and again.stderr == ""


def test_a_file_the_hub_does_not_list_is_caught_by_an_online_pull(hub, server, home):
    sha = hub[1]["v1.1.0"]
    snap = pull("case-3@v1.1.0", endpoint=server.endpoint)
    folder = home / "cache" / "models--cbench--case-3"
    data = b"planted\n"
    blob = _git_blob_id(data)
    (folder / "blobs" / blob).write_bytes(data)
    (snap.path / "extra.txt").symlink_to(os.path.relpath(folder / "blobs" / blob, snap.path))
    index_path = home / "cache.cbench" / "index.json"
    index = json.loads(index_path.read_text())
    index["repos"]["model:cbench/case-3"]["snapshots"][sha]["record"]["extra.txt"] = [len(data), __import__(
        "hashlib").sha256(data).hexdigest()]
    index_path.write_text(json.dumps(index))
    tree_path = folder / "trees" / f"{sha}.json"
    tree = json.loads(tree_path.read_text())
    tree["files"]["extra.txt"] = {"size": len(data), "blob_id": blob}
    tree_path.write_text(json.dumps(tree))
    res = run_main(["pull", "case-3@v1.1.0", "--endpoint", server.endpoint])
    assert res.code == 0 and "extra.txt: the hub does not list it" in res.stderr and "downloaded it again" in res.stderr
    assert not (snap.path / "extra.txt").exists()


# ---------------------------------------------------------------------------- option values
@pytest.mark.parametrize("endpoint", ["http://", "http://127.0.0.1:abc", "http://[::1", "ftp://x", "127.0.0.1:8090",
                                      "http://127.0.0.1:99999", "", " "])
@pytest.mark.parametrize("command", ["pull", "info"])
def test_malformed_endpoints_are_usage_errors(home, command, endpoint):
    assert_one_clean_error(run_main([command, "case-3", "--endpoint", endpoint]), 2, "--endpoint")


def test_malformed_endpoint_in_the_environment_and_list(home, tmp_path):
    assert_one_clean_error(run_main(["list", "--endpoint", "http://"]), 2, "--endpoint")
    assert_one_clean_error(run_main(["pull", "case-3"], env={"CBENCH_ENDPOINT": "http://[::1"}), 2, "CBENCH_ENDPOINT")
    res = run_main(["publish", str(tmp_path), "--repo", "cbench/x", "--version", "v1.0.0", "--hub", "http://"])
    assert_one_clean_error(res, 2, "--hub")


@pytest.mark.parametrize("command", [["list"], ["pull", "case-3"], ["info", "case-3"], ["hub", "serve"]])
def test_missing_hub_directories_are_usage_errors(home, tmp_path, command):
    res = run_main(command + ["--hub", str(tmp_path / "nonexistent")])
    assert_one_clean_error(res, 2, "nonexistent does not exist")
    assert_one_clean_error(run_main(command, env={"CBENCH_HUB": str(tmp_path / "nonexistent")}) if command[0] != "hub"
                           else run_main(command + ["--hub", str(tmp_path / "nonexistent")]), 2)


def test_list_from_the_cache_says_so(home):
    res = run_main(["list", "--endpoint", "http://127.0.0.1:9"])
    assert res.code == 0 and "note: listing the cache" in res.stderr


def test_publish_to_an_unreachable_url_and_serve_with_an_unusable_home_are_one_line(hub, tmp_path):
    src = tmp_path / "art"
    write_tiny_artifact(src)
    res = run_main(["publish", str(src), "--repo", "cbench/x", "--version", "v1.0.0", "--hub", "http://127.0.0.1:1"])
    assert_one_clean_error(res, 1, "cannot reach http://127.0.0.1:1", "nothing was published")
    res = run_main(["hub", "serve"], env={"CBENCH_HOME": "/proc/nope"})
    assert_one_clean_error(res, 2, "CBENCH_HOME=/proc/nope", "virtual file system")  # refused before use


def test_split_must_exist_in_the_case_config(server, home, tmp_path):
    case = tmp_path / "case-3"
    write_tiny_artifact(case)
    pull("counterfactuals", repo_type="dataset", endpoint=server.endpoint)
    env = {"HF_HUB_OFFLINE": "1"}
    assert_one_clean_error(run_main(["discover", str(case), "-m", "random", "--split", "bogus"], env), 2, "--split")
    res = run_main(["discover", str(case), "-m", "random", "--split", "validation"], env)
    assert_one_clean_error(res, 2, "--split 'validation'", "has the splits train")
    res = run_main(["discover", str(case), "-m", "random", "--split", "train"], env)
    assert res.code == 0 and "note:" not in res.stderr and "train)" in res.stdout


def test_a_case_without_the_dataset_refuses_and_names_sampled(home, tmp_path):
    """The data rule (issue 14): no silent switch to sampled pairs; one line that names --sampled."""
    case = tmp_path / "case-3"
    write_tiny_artifact(case)
    res = run_main(["discover", str(case), "-m", "random"], {"HF_HUB_OFFLINE": "1"})
    assert res.code == 1 and "--sampled" in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    res = run_main(["discover", str(case), "-m", "random", "--sampled"], {"HF_HUB_OFFLINE": "1"})
    assert res.code == 0 and "sampled" in res.stdout


# ---------------------------------------------------------------------------- leftovers
def test_stale_olah_directories_of_dead_processes_are_removed():
    from cbench.hub.server import remove_stale_server_dirs

    dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True).stdout)
    stale = Path(tempfile.mkdtemp(prefix=f"cbench-olah-{dead}-"))
    live = Path(tempfile.mkdtemp(prefix=f"cbench-olah-{os.getpid()}-"))
    try:
        remove_stale_server_dirs()
        assert not stale.exists() and live.exists()
    finally:
        shutil.rmtree(live, ignore_errors=True)
        shutil.rmtree(stale, ignore_errors=True)
