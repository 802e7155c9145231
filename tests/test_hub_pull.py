"""Pulling from a real olah server on loopback: revisions, datasets, offline use, faults.

One hub and one server per module (olah takes seconds to start); each test gets its own
``CBENCH_HOME`` (so its own cache).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import cbench.hub as hubmod
from cbench.hub.cache import Cache
from cbench.errors import (HashMismatchError, HubUnreachableError, UnknownRepoError, UnknownRevisionError,
                           UsageError)
from cbench.hub.repos import RepoRef
from cbench.hub.server import HubServer, free_port
from cbench.hub.pull import pull
from hub_helpers import scratch_zoo  # noqa: F401  (this module publishes its own cbench/case-3)
from hub_helpers import CBENCH, artifact_files, assert_clean_error, run_cli, write_tiny_artifact, write_tiny_dataset

ROWS_V1 = [{"base": "abc", "label": 0}, {"base": "xbc", "label": 1}]
ROWS_V2 = [{"base": "abx", "label": 2}, {"base": "xxx", "label": 3}, {"base": "cab", "label": 0}]


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    root = tmp_path_factory.mktemp("hubmod")
    h = root / "hub"
    shas = {}
    for i, (version, seed) in enumerate((("v1.0.0", 0), ("v1.1.0", 1))):
        write_tiny_artifact(root / f"m{i}", seed=seed, description=f"model {version}")
        shas[version] = hubmod.publish(root / f"m{i}", "cbench/case-3", "model", version, hub=h).commit
    write_tiny_artifact(root / "t5", case="5", seed=5)
    hubmod.publish(root / "t5", "cbench/tracr-case-5", "model", "v1.0.0", hub=h)
    write_tiny_artifact(root / "bad", case="7", seed=7)
    hubmod.publish(root / "bad", "cbench/case-7", "model", "v1.0.0", hub=h)
    # a tampered version written with git directly (publish would refuse it)
    repo = h / "models/cbench/case-7"
    (repo / "README.md").write_text("tampered\n")
    env = hubmod._git_env("v1.0.1")
    hubmod.git(repo, "commit", "-q", "-am", "tampered", env=env)
    hubmod.git(repo, "tag", "-a", "v1.0.1", "-m", "tampered", env=env)
    for i, (version, rows) in enumerate((("v1.0.0", ROWS_V1), ("v1.1.0", ROWS_V2))):
        write_tiny_dataset(root / f"d{i}", rows)
        shas[f"ds-{version}"] = hubmod.publish(root / f"d{i}", "cbench/counterfactuals", "dataset", version,
                                               hub=h).commit
    return h, shas


@pytest.fixture(scope="module")
def server(hub):
    with HubServer(hub[0]) as s:
        yield s


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("CBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("CBENCH_ENDPOINT", raising=False)
    monkeypatch.delenv("CBENCH_HUB", raising=False)
    return tmp_path / "home"


def _seed_of(snap) -> int:
    return json.loads((snap.path / "meta.json").read_text())["seed"]


def test_server_answers_the_hub_protocol(server, hub):
    from huggingface_hub import HfApi

    refs = HfApi(endpoint=server.endpoint, token=False).list_repo_refs("cbench/case-3")
    assert {t.name: t.target_commit for t in refs.tags} == {"v1.0.0": hub[1]["v1.0.0"], "v1.1.0": hub[1]["v1.1.0"]}
    assert server.startup_s is not None and server.startup_s < 60


def test_pull_by_tag_sha_and_newest(server, hub, home):
    _, shas = hub
    newest = pull("case-3", endpoint=server.endpoint)
    assert (newest.sha, newest.tag, _seed_of(newest)) == (shas["v1.1.0"], "v1.1.0", 1)
    assert not newest.from_cache
    by_tag = pull("case-3@v1.0.0", endpoint=server.endpoint)
    assert (by_tag.sha, _seed_of(by_tag)) == (shas["v1.0.0"], 0)
    by_sha = pull(f"cbench/case-3@{shas['v1.0.0']}", endpoint=server.endpoint)
    assert by_sha.path == by_tag.path and by_sha.tag == "v1.0.0" and by_sha.from_cache
    assert artifact_files(by_tag.path) == artifact_files(hub[0].parent / "m0") >= {
        "README.md", "circuit.json", "config.json", "meta.json", "model.safetensors", "tokenizer.json",
        "tokenizer_config.json"}
    # the cache is an ordinary huggingface_hub cache
    assert by_tag.path == home / "cache" / "models--cbench--case-3" / "snapshots" / shas["v1.0.0"]


def test_case_name_falls_back_to_tracr(server, home):
    snap = pull("case-5", endpoint=server.endpoint)
    assert snap.repo_id == "cbench/tracr-case-5"


def test_load_dataset_at_each_revision(server, hub, home, tmp_path):
    import cbench

    _, shas = hub
    kw = dict(endpoint=server.endpoint, cache_dir=str(tmp_path / "hf-datasets"))
    d1 = cbench.load_dataset("counterfactuals", "case-3", revision="v1.0.0", **kw)
    d2 = cbench.load_dataset("counterfactuals", "case-3", revision=shas["ds-v1.1.0"], **kw)
    newest = cbench.load_dataset("counterfactuals", "case-3", **kw)
    assert d1["train"].to_list() == ROWS_V1
    assert d2["train"].to_list() == ROWS_V2
    assert newest["train"].to_list() == ROWS_V2
    os.environ["HF_HUB_OFFLINE"] = "1"  # offline afterwards: each revision still answers with its rows
    try:
        off1 = cbench.load_dataset("counterfactuals", "case-3", revision="v1.0.0", cache_dir=kw["cache_dir"])
        off_newest = cbench.load_dataset("counterfactuals", "case-3", cache_dir=kw["cache_dir"])
    finally:
        del os.environ["HF_HUB_OFFLINE"]
    assert off1["train"].to_list() == ROWS_V1 and off_newest["train"].to_list() == ROWS_V2


def test_offline_info_and_load_answer_at_the_pulled_revision(hub, home):
    h, shas = hub
    with HubServer(h) as s:  # a server of our own, stopped below
        endpoint = s.endpoint
        pulled = pull("case-3@v1.0.0", endpoint=endpoint)
    assert pulled.sha == shas["v1.0.0"]
    env = {"CBENCH_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    info = run_cli(["info", "case-3", "--json"], env=env)
    assert info.returncode == 0, info.stderr
    facts = json.loads(info.stdout)
    assert (facts["sha"], facts["version"], facts["case"], facts["circuit_edges"]) == (shas["v1.0.0"], "v1.0.0", "3", 4)
    # stopped server, no HF_HUB_OFFLINE: unreachable, so the cache answers (with a note)
    info2 = run_cli(["info", "case-3", "--endpoint", endpoint], env={"CBENCH_HOME": str(home)})
    assert info2.returncode == 0, info2.stderr
    assert shas["v1.0.0"] in info2.stdout and "answering from the cache" in info2.stderr
    import cbench

    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        art = cbench.load("case-3")
    finally:
        del os.environ["HF_HUB_OFFLINE"]
    assert art.meta["seed"] == 0 and art.path == pulled.path
    model = art.load_model()
    assert model.cfg.n_layers == 1


def test_unknown_case_lists_closest_names(server, home):
    with pytest.raises(UnknownRepoError, match="closest: case-3"):
        pull("case-33", endpoint=None, hub=str(server.hub_dir))
    proc = run_cli(["pull", "cace-3", "--hub", str(server.hub_dir)], env={"CBENCH_HOME": str(home)})
    assert_clean_error(proc, "no case 'cace-3'", "closest: case-3")


def test_unknown_version_lists_tags(server, home):
    proc = run_cli(["pull", "case-3@v9.9.9", "--endpoint", server.endpoint], env={"CBENCH_HOME": str(home)})
    assert_clean_error(proc, "no version v9.9.9", "v1.0.0, v1.1.0")
    with pytest.raises(UnknownRevisionError, match="available: v1.0.0, v1.1.0"):
        pull("case-3@v2", hub=str(server.hub_dir))
    with pytest.raises(UnknownRevisionError, match="no commit"):
        pull("case-3@" + "0" * 40, hub=str(server.hub_dir))


def test_unreachable_hub_with_nothing_cached(home):
    port = free_port()  # nothing listens there
    proc = run_cli(["pull", "case-3", "--endpoint", f"http://127.0.0.1:{port}"], env={"CBENCH_HOME": str(home)})
    assert_clean_error(proc, "cannot reach", "not cached", "--hub DIR", "HF_HUB_OFFLINE=1")
    with pytest.raises(UsageError, match="no-such-hub does not exist"):  # a usage error, not a cache fall-back
        pull("case-3", hub=str(home / "no-such-hub"))
    offline = run_cli(["info", "case-3"], env={"CBENCH_HOME": str(home), "HF_HUB_OFFLINE": "1"})
    assert_clean_error(offline, "offline", "not cached")


def test_sha_mismatch_is_refused_and_leaves_no_trace(server, home):
    with pytest.raises(HashMismatchError, match="README.md"):
        pull("case-7@v1.0.1", endpoint=server.endpoint)
    cache = home / "cache"
    assert not (cache / "models--cbench--case-7").exists()
    assert not any((home / "cache.cbench" / "staging").iterdir())
    assert Cache().entry(RepoRef("cbench/case-7")).get("snapshots", {}) == {}
    proc = run_cli(["pull", "case-7@v1.0.1", "--endpoint", server.endpoint], env={"CBENCH_HOME": str(home)})
    assert_clean_error(proc, "sha256", "refused")
    # the good version of the same repository still pulls
    assert pull("case-7@v1.0.0", endpoint=server.endpoint).tag == "v1.0.0"


def test_half_written_snapshot_is_never_loaded(server, hub, home):
    _, shas = hub
    cache = Cache()
    ref = RepoRef("cbench/case-3")
    # what a pull killed after the move but before the completion marker leaves behind
    partial = cache.snapshot_dir(ref, shas["v1.0.0"])
    partial.mkdir(parents=True)
    (partial / "meta.json").write_text("{half")
    stale = cache.meta / "staging" / "999999999-deadbeef"  # a staging dir of a dead process
    stale.mkdir(parents=True)
    assert cache.snapshot(ref, shas["v1.0.0"]) is None
    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        with pytest.raises(HubUnreachableError):
            pull("case-3@v1.0.0")
    finally:
        del os.environ["HF_HUB_OFFLINE"]
    snap = pull("case-3@v1.0.0", endpoint=server.endpoint)
    assert json.loads((snap.path / "meta.json").read_text())["seed"] == 0
    assert not stale.exists()


def test_pull_killed_midway_then_next_pull_succeeds(server, home):
    env = dict(os.environ, CBENCH_HOME=str(home))
    staging = home / "cache.cbench" / "staging"
    proc = subprocess.Popen(CBENCH + ["pull", "case-3@v1.1.0", "--endpoint", server.endpoint], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    while time.time() < deadline and proc.poll() is None:
        if staging.is_dir() and any(staging.iterdir()):
            break
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert Cache().snapshot(RepoRef("cbench/case-3"), "x" * 40) is None
    assert not Cache().entry(RepoRef("cbench/case-3")).get("snapshots")  # nothing marked complete
    again = run_cli(["pull", "case-3@v1.1.0", "--endpoint", server.endpoint], env={"CBENCH_HOME": str(home)})
    assert again.returncode == 0, again.stderr
    assert "downloaded and verified" in again.stdout
    assert not any(staging.iterdir())


def test_two_concurrent_pulls_both_succeed(server, home):
    env = dict(os.environ, CBENCH_HOME=str(home))
    procs = [subprocess.Popen(CBENCH + ["pull", "case-3@v1.0.0", "--endpoint", server.endpoint], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=180) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    paths = {o[0].strip().splitlines()[-1] for o in outs}
    assert len(paths) == 1
    assert all("Traceback" not in o[1] for o in outs)
    assert sorted(o[0].split("; ")[-1].splitlines()[0] for o in outs) == ["downloaded and verified", "from cache"]


def test_cli_pull_from_hub_dir_starts_and_stops_olah(server, hub, home):
    h, shas = hub
    proc = run_cli(["pull", "case-3", "--hub", str(h)], env={"CBENCH_HOME": str(home)})
    assert proc.returncode == 0, proc.stderr
    assert shas["v1.1.0"] in proc.stdout and "Traceback" not in proc.stderr
    lst = run_cli(["list", "--json", "--hub", str(h)], env={"CBENCH_HOME": str(home)})
    rows = {r["name"]: r for r in json.loads(lst.stdout)}
    assert rows["case-3"]["versions"] == ["v1.0.0", "v1.1.0"]
    assert rows["case-3"]["task_type"] == "categorical" and rows["case-3"]["circuit_edges"] == 4
    assert "tracr-case-5" in rows
    # no olah left behind by the pull: the only one serving this hub is the module's own server
    assert _olah_serving(h) == {server.process.pid}


def test_list_with_an_endpoint_lists_the_servers_repositories(server, hub, home):
    """Was: `cbench list --endpoint URL` listed only the cache."""
    from cli_inprocess import run_main

    lst = run_main(["list", "--json", "--endpoint", server.endpoint])
    assert lst.code == 0 and "listing the cache" not in lst.stderr, lst.stderr
    rows = {(r["repo"], r["type"]): r for r in json.loads(lst.stdout)}
    assert set(rows) == {("cbench/case-3", "model"), ("cbench/case-7", "model"), ("cbench/tracr-case-5", "model"),
                         ("cbench/counterfactuals", "dataset")}
    assert rows[("cbench/case-3", "model")]["versions"] == ["v1.0.0", "v1.1.0"]
    assert rows[("cbench/case-7", "model")]["versions"] == ["v1.0.0", "v1.0.1"]
    assert {r["source"] for r in rows.values()} == {"hub"}
    assert rows[("cbench/case-3", "model")]["task_type"] is None  # nothing cached: the server is not asked for files
    pull("case-3", endpoint=server.endpoint)
    rows = {r["name"]: r for r in json.loads(run_main(["list", "--json", "--type", "model", "--endpoint",
                                                       server.endpoint]).stdout)}
    assert rows["case-3"]["task_type"] == "categorical" and rows["case-3"]["circuit_edges"] == 4
    table = run_main(["list", "--endpoint", server.endpoint])
    assert table.code == 0 and "tracr-case-5" in table.stdout and "counterfactuals" in table.stdout


def _olah_serving(hub_dir: Path) -> set[int]:
    pids = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if (b"olah.server" in args or b"cbench.hub.api" in args) and b"--config" in args:
            try:
                cfg = Path(args[args.index(b"--config") + 1].decode()).read_text()
            except (OSError, IndexError):
                continue
            if str(Path(hub_dir).resolve()) in cfg:
                pids.add(int(proc.name))
    return pids


def test_fresh_clone_pull_seeds_the_default_hub(tmp_path):
    """No hub, no cache: `cbench pull case-3` seeds the per-user hub from the zoo and pulls."""
    import shutil

    zoo = tmp_path / "zoo"
    write_tiny_artifact(tmp_path / "t3", case="3", seed=3)
    shutil.copytree(tmp_path / "t3", zoo / "releases/models/cbench/tracr-case-3/v1.0.0")
    env = {"CBENCH_HOME": str(tmp_path / "home"), "CBENCH_ZOO": str(zoo), "CBENCH_HUB": None,
           "CBENCH_ENDPOINT": None, "HF_HUB_OFFLINE": None}
    proc = run_cli(["pull", "case-3"], env=env)
    assert proc.returncode == 0, proc.stderr
    assert "cbench/tracr-case-3 v1.0.0" in proc.stdout and "Traceback" not in proc.stderr
    assert (tmp_path / "home" / "hub" / "models" / "cbench" / "tracr-case-3" / ".git").is_dir()
    info = run_cli(["info", "case-3", "--json"], env=dict(env, HF_HUB_OFFLINE="1"))
    assert json.loads(info.stdout)["repo"] == "cbench/tracr-case-3"


def test_consecutive_pulls_from_a_hub_directory_start_olah_once(hub, home, monkeypatch):
    """A bench over 57 models started olah 57 times (about 2.5 s each); now the process's pulls
    share one server, kept for a few seconds after the last and stopped then or at exit."""
    from cbench.hub import server as srv

    h, shas = hub
    started: list[HubServer] = []
    real_start = HubServer.start

    def start(self):
        started.append(self)
        return real_start(self)

    monkeypatch.setattr(HubServer, "start", start)
    monkeypatch.setattr(srv, "SHARED_IDLE_S", 0.5)
    first = pull("case-3@v1.0.0", hub=h)
    second = pull("tracr-case-5", hub=h)
    third = pull("counterfactuals@v1.1.0", repo_type="dataset", hub=h)
    assert (first.sha, third.sha) == (shas["v1.0.0"], shas["ds-v1.1.0"]) and second.files > 0
    assert len(started) == 1 and started[0].process.poll() is None  # kept for the next pull
    assert started[0].process.pid in _olah_serving(h)
    deadline = time.monotonic() + 15
    while started[0].process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert started[0].process.poll() is not None  # stopped once idle
    assert started[0].process.pid not in _olah_serving(h)
    pull("case-3@v1.1.0", hub=h)  # the next pull starts a new one
    assert len(started) == 2
    srv.stop_shared_servers()
    assert started[1].process.poll() is not None


def test_a_forked_child_does_not_use_its_parents_shared_server(hub, home):
    from cbench.hub import server as srv

    h, _ = hub
    pull("case-3@v1.0.0", hub=h)
    parent = next(iter(srv._shared.values())).server
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: pulls through a server of its own and stops only that one
        try:
            pull("case-3@v1.1.0", hub=h, cache_dir=str(home / "child-cache"))
            mine = next(iter(srv._shared.values())).server
            os.write(write, str(mine.process.pid).encode())
            srv.stop_shared_servers()
        finally:
            os._exit(0)
    os.close(write)
    child_server = int(os.read(read, 64) or b"0")
    os.waitpid(pid, 0)
    assert child_server and child_server != parent.process.pid
    assert parent.process.poll() is None  # the child left the parent's server alone
