"""Publishing into a hub directory and seeding the default hub (no server needed)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

import cbench.hub as hubmod
from cbench.errors import PublishError, UsageError
from hub_helpers import artifact_files, assert_clean_error, run_cli, write_tiny_artifact, write_tiny_dataset


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    d = tmp_path_factory.mktemp("artifacts")
    write_tiny_artifact(d / "v1", seed=0)
    write_tiny_artifact(d / "v2", seed=1, description="second")
    return d


def _state(repo):
    """Everything a refusal must leave alone: refs, HEAD, object count, working tree files."""
    refs = hubmod.git(repo, "for-each-ref", "--format=%(refname) %(objectname)")
    head = hubmod.git(repo, "rev-parse", "HEAD")
    files = sorted((p.relative_to(repo).as_posix(), p.read_bytes()) for p in repo.rglob("*")
                   if p.is_file() and ".git" not in p.parts)
    return refs, head, files


def test_publish_two_versions_commit_and_tag(tmp_path, artifacts):
    hub = tmp_path / "hub"
    r1 = hubmod.publish(artifacts / "v1", "cbench/case-3", "model", "v1.0.0", hub=hub)
    r2 = hubmod.publish(artifacts / "v2", "cbench/case-3", "model", "v1.1.0", hub=hub)
    h = hubmod.Hub(hub)
    assert h.repos("model") == ["cbench/case-3"]
    assert h.refs("cbench/case-3") == {"v1.0.0": r1.commit, "v1.1.0": r2.commit}
    repo = hub / "models" / "cbench" / "case-3"
    assert hubmod.git(repo, "log", "--format=%s", "-n1", r2.commit) == "Release cbench/case-3 v1.1.0"
    assert hubmod.git(repo, "cat-file", "-t", "v1.1.0") == "tag"  # annotated
    assert hubmod.git(repo, "rev-parse", f"{r2.commit}^") == r1.commit
    # the commit's tree is exactly the release directory
    listed = set(hubmod.git(repo, "ls-tree", "-r", "--name-only", r1.commit).split())
    assert listed == artifact_files(artifacts / "v1") >= {"README.md", "circuit.json", "config.json", "meta.json",
                                                           "model.safetensors", "tokenizer.json", "tokenizer_config.json"}
    assert h.read_file("cbench/case-3", "v1.0.0", "meta.json") == (artifacts / "v1" / "meta.json").read_bytes()
    # the working tree shows the newest version
    assert (repo / "meta.json").read_bytes() == (artifacts / "v2" / "meta.json").read_bytes()


def test_publish_is_deterministic(tmp_path, artifacts):
    shas = []
    for name in ("a", "b"):
        r1 = hubmod.publish(artifacts / "v1", "cbench/case-3", "model", "v1.0.0", hub=tmp_path / name)
        r2 = hubmod.publish(artifacts / "v2", "cbench/case-3", "model", "v1.1.0", hub=tmp_path / name)
        shas.append((r1.commit, r2.commit, hubmod.Hub(tmp_path / name).refs("cbench/case-3")))
        tag = hubmod.git(tmp_path / name / "models/cbench/case-3", "rev-parse", "refs/tags/v1.1.0")
        shas[-1] += (tag,)
    assert shas[0] == shas[1]
    out = hubmod.git(tmp_path / "a" / "models/cbench/case-3", "log", "--format=%an <%ae> %ad %cn", "--date=unix",
                     "-n1")
    assert out == f"{hubmod.AUTHOR_NAME} <{hubmod.AUTHOR_EMAIL}> {hubmod.version_timestamp('v1.1.0')} " \
                  f"{hubmod.AUTHOR_NAME}"


def test_refuses_reused_and_lower_versions_leaving_repo_untouched(tmp_path, artifacts):
    hub = tmp_path / "hub"
    hubmod.publish(artifacts / "v1", "cbench/case-3", "model", "v1.0.0", hub=hub)
    hubmod.publish(artifacts / "v2", "cbench/case-3", "model", "v1.2.0", hub=hub)
    repo = hub / "models/cbench/case-3"
    before = _state(repo)
    with pytest.raises(PublishError, match="already has v1.2.0"):
        hubmod.publish(artifacts / "v1", "cbench/case-3", "model", "v1.2.0", hub=hub)
    with pytest.raises(PublishError, match="lower than .* newest version v1.2.0"):
        hubmod.publish(artifacts / "v1", "cbench/case-3", "model", "v1.1.9", hub=hub)
    assert _state(repo) == before
    with pytest.raises(UsageError, match="not a version"):
        hubmod.publish(artifacts / "v1", "cbench/case-3", "model", "1.3", hub=hub)


def test_refuses_schema_violations_with_paths(tmp_path, artifacts):
    bad = tmp_path / "bad"
    shutil.copytree(artifacts / "v1", bad)
    circuit = json.loads((bad / "circuit.json").read_text())
    circuit["granularity"] = "neuron"
    circuit["edges"] = []
    (bad / "circuit.json").write_text(json.dumps(circuit))
    (bad / "extra.json").write_text("{not json")
    with pytest.raises(PublishError) as exc:
        hubmod.publish(bad, "cbench/case-3", "model", "v1.0.0", hub=tmp_path / "hub")
    msg = str(exc.value)
    assert "circuit.json: $.granularity" in msg and "circuit.json: $.edges" in msg
    assert "extra.json: not JSON" in msg
    assert not (tmp_path / "hub" / "models" / "cbench" / "case-3").exists()


def test_refuses_model_with_wrong_manifest(tmp_path, artifacts):
    bad = tmp_path / "bad"
    shutil.copytree(artifacts / "v1", bad)
    (bad / "README.md").write_text("changed after the manifest was written\n")
    with pytest.raises(PublishError, match="README.md does not match its sha256"):
        hubmod.publish(bad, "cbench/case-3", "model", "v1.0.0", hub=tmp_path / "hub")
    assert not hubmod.Hub(tmp_path / "hub").has_repo("cbench/case-3")


def test_publish_cli_refusal_is_one_line(tmp_path, artifacts):
    hub = tmp_path / "hub"
    ok = run_cli(["publish", str(artifacts / "v1"), "--repo", "cbench/case-3", "--version", "v1.0.0",
                  "--hub", str(hub)])
    assert ok.returncode == 0, ok.stderr
    assert "published cbench/case-3 v1.0.0" in ok.stdout
    again = run_cli(["publish", str(artifacts / "v1"), "--repo", "cbench/case-3", "--version", "v1.0.0",
                     "--hub", str(hub)])
    assert_clean_error(again, "already has v1.0.0")


def test_dataset_publish(tmp_path):
    ds = write_tiny_dataset(tmp_path / "ds", [{"x": 1, "y": 2}])
    r = hubmod.publish(ds, "cbench/counterfactuals", "dataset", "v1.0.0", hub=tmp_path / "hub")
    assert hubmod.Hub(tmp_path / "hub").repos("dataset") == ["cbench/counterfactuals"]
    assert r.commit in hubmod.Hub(tmp_path / "hub").refs("cbench/counterfactuals", "dataset").values()


def _zoo(tmp_path, artifacts):
    zoo = tmp_path / "zoo"
    base = zoo / "releases" / "models" / "cbench" / "case-3"
    shutil.copytree(artifacts / "v2", base / "v1.1.0")
    shutil.copytree(artifacts / "v1", base / "v1.0.0")
    write_tiny_dataset(zoo / "releases" / "datasets" / "cbench" / "counterfactuals" / "v1.0.0", [{"x": 1}])
    return zoo


def test_seeding_from_zoo_in_version_order(tmp_path, artifacts, monkeypatch):
    zoo = _zoo(tmp_path, artifacts)
    monkeypatch.setenv("CBENCH_HOME", str(tmp_path / "home"))
    done = hubmod.ensure_seeded(zoo=zoo)
    assert [(r.repo_id, r.version) for r in done] == [("cbench/case-3", "v1.0.0"), ("cbench/case-3", "v1.1.0"),
                                                     ("cbench/counterfactuals", "v1.0.0")]
    assert hubmod.ensure_seeded(zoo=zoo) == []  # nothing new: the stamp answers
    # a new zoo version tops the hub up
    shutil.copytree(artifacts / "v1", zoo / "releases/models/cbench/case-3/v1.2.0")
    assert [r.version for r in hubmod.ensure_seeded(zoo=zoo)] == ["v1.2.0"]
    assert hubmod.Hub(hubmod.default_hub_dir()).versions("cbench/case-3") == ["v1.0.0", "v1.1.0", "v1.2.0"]


def test_seeding_reports_progress_per_repository(tmp_path, artifacts, capsys):
    """`cbench hub serve` on a fresh default hub says k of N repositories and an ETA while it seeds
    (it was silent for about 25 s)."""
    from cbench.cli.hub_cmds import _SeedProgress

    zoo = _zoo(tmp_path, artifacts)
    calls = []
    hubmod.ensure_seeded(tmp_path / "hub", zoo=zoo, progress=lambda k, n, ref: calls.append((k, n, ref.repo_id)))
    assert calls == [(1, 2, "cbench/case-3"), (2, 2, "cbench/counterfactuals")]
    calls.clear()
    shutil.copytree(artifacts / "v1", zoo / "releases/models/cbench/case-3/v1.2.0")
    hubmod.ensure_seeded(tmp_path / "hub", zoo=zoo, progress=lambda k, n, ref: calls.append((k, n, ref.repo_id)))
    assert calls == [(1, 1, "cbench/case-3")]  # only what needed publishing is counted
    show = _SeedProgress(tmp_path / "hub")
    ticks = iter([1.0, 1.5, 4.0, 6.0])
    show.clock, show.t0 = (lambda: next(ticks)), 0.0
    for k in (1, 2, 3, 4):
        show(k, 4, hubmod.RepoRef(f"cbench/case-{k}"))
    err = capsys.readouterr().err.splitlines()
    assert err == [f"seeding {tmp_path / 'hub'} from the zoo: 1/4 repositories (cbench/case-1), 1.0 s, about 3 s left",
                   f"seeding {tmp_path / 'hub'} from the zoo: 3/4 repositories (cbench/case-3), 4.0 s, about 1 s left",
                   f"seeding {tmp_path / 'hub'} from the zoo: 4/4 repositories (cbench/case-4), 6.0 s, done"]


def test_two_processes_seeding_at_once(tmp_path, artifacts):
    zoo = _zoo(tmp_path, artifacts)
    env = {"CBENCH_HOME": str(tmp_path / "home"), "CBENCH_ZOO": str(zoo)}
    code = "from cbench.hub.seeding import ensure_seeded; print(len(ensure_seeded()))"
    import os

    procs = [subprocess.Popen([sys.executable, "-c", code], env=dict(os.environ, **env), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert sorted(int(o[0]) for o in outs) == [0, 3]
    assert hubmod.Hub(tmp_path / "home" / "hub").versions("cbench/case-3") == ["v1.0.0", "v1.1.0"]


def test_relative_paths_and_olah_unservable_files(tmp_path, monkeypatch):
    src = tmp_path / "src"
    src.mkdir()
    (src / "README.md").write_text("# data\n")
    (src / "blob.bin").write_bytes(bytes(range(128, 256)))  # 128 bytes, not UTF-8
    monkeypatch.chdir(tmp_path)
    with pytest.raises(PublishError, match="blob.bin: a binary file of 128 bytes"):
        hubmod.publish("src", "cbench/data", "dataset", "v1.0.0", hub="hub")
    (src / "blob.bin").write_bytes(bytes(range(128, 256)) * 2)  # 256 bytes: fine
    r = hubmod.publish("src", "cbench/data", "dataset", "v1.0.0", hub="hub")
    assert hubmod.Hub(tmp_path / "hub").read_file("cbench/data", r.commit, "blob.bin", "dataset") == \
        bytes(range(128, 256)) * 2
