"""Issue 47: the hub's listings answer from a cache of repository info keyed by commit, so a warm
``list_models()`` runs no git process, and a new release shows up at once (its commit is new)."""

from __future__ import annotations

import cbench.hub as hubmod
import cbench.hub.api as api_mod
from cbench.hub.api import HubRepos
from hub_helpers import write_tiny_artifact


def test_a_warm_listing_runs_no_git_and_sees_a_new_release(tmp_path, monkeypatch):
    hub = tmp_path / "hub"
    for i, name in enumerate(("case-3", "case-4", "tracr-case-5")):
        write_tiny_artifact(tmp_path / name, case=name.rsplit("-", 1)[1], seed=i)
        hubmod.publish(tmp_path / name, f"cbench/{name}", "model", "v1.0.0", hub=hub)
    repos = HubRepos(hub)
    repos.warm()
    cold = repos.listing("model", {"full": ["true"]})
    calls = []
    real_git, real_run = api_mod.git, api_mod.subprocess.run
    monkeypatch.setattr(api_mod, "git", lambda *a, **k: calls.append(a) or real_git(*a, **k))
    monkeypatch.setattr(api_mod.subprocess, "run", lambda *a, **k: calls.append(a) or real_run(*a, **k))
    warm = repos.listing("model", {"full": ["true"]})
    assert warm == cold and [d["id"] for d in warm] == ["cbench/case-3", "cbench/case-4", "cbench/tracr-case-5"]
    assert calls == []  # every answer from the cache, main read from the ref file
    warm[0]["tags"].append("changed by the caller")  # callers get copies: the cache stays as it was
    assert "changed by the caller" not in repos.listing("model", {})[0]["tags"]
    monkeypatch.undo()
    write_tiny_artifact(tmp_path / "case-3b", case="3", seed=9)
    new = hubmod.publish(tmp_path / "case-3b", "cbench/case-3", "model", "v1.1.0", hub=hub).commit
    assert repos.listing("model", {"search": ["case-3"]})[0]["sha"] == new
