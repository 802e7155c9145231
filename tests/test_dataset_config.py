"""cbench.load_dataset(name, config) fetches only that config's files."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import cbench.hub as hubmod
from cbench.errors import UsageError
from cbench.hub.loading import config_snapshot, load_dataset


def _two_config_dataset(path):
    for config, rows in (("case-3", [{"x": 1}, {"x": 2}]), ("case-4", [{"x": 7}] * 50)):
        d = path / config
        d.mkdir(parents=True)
        pq.write_table(pa.Table.from_pylist(rows), d / "train.parquet")
    card = "---\nlicense: mit\nconfigs:\n"
    for config in ("case-3", "case-4"):
        card += f"- config_name: {config}\n  data_files:\n  - split: train\n    path: {config}/train.parquet\n"
    (path / "README.md").write_text(card + "---\n# test\n")


def test_only_the_configs_files_are_downloaded(tmp_path, monkeypatch):
    monkeypatch.setenv("CBENCH_HOME", str(tmp_path / "home"))
    # this hub holds the test's own cbench/counterfactuals v1.0.0, not the zoo's: no zoo, no zoo pins
    monkeypatch.setenv("CBENCH_ZOO", str(tmp_path / "no-zoo"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    _two_config_dataset(tmp_path / "ds")
    hubmod.publish(tmp_path / "ds", "cbench/counterfactuals", "dataset", "v1.0.0", hub=tmp_path / "hub")
    snap = config_snapshot("counterfactuals", "case-3", hub=tmp_path / "hub")
    assert snap.extra["config"] == "case-3" and snap.tag == "v1.0.0"
    path = snap.path
    got = sorted(p.relative_to(path).as_posix() for p in path.rglob("*") if p.is_file())
    assert got == ["README.md", "case-3/train.parquet"]
    ds = load_dataset("counterfactuals", "case-3", hub=tmp_path / "hub")
    assert ds["train"]["x"] == [1, 2]
    with pytest.raises(UsageError, match="no config 'case-9'; configs: case-3, case-4"):
        config_snapshot("counterfactuals", "case-9", hub=tmp_path / "hub")


def test_a_whole_snapshot_is_checked_once_per_block(tmp_path, monkeypatch):
    """Inside ``snapshots_checked_once`` (a bench), the second config of a cached whole snapshot
    does not hash its files again; outside the block, and for another hub, every call checks."""
    import cbench.hub.cache_verify as cv
    from cbench.hub.loading import snapshots_checked_once
    from cbench.hub.pull import pull

    monkeypatch.setenv("CBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CBENCH_ZOO", str(tmp_path / "no-zoo"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    _two_config_dataset(tmp_path / "ds")
    hubmod.publish(tmp_path / "ds", "cbench/counterfactuals", "dataset", "v1.0.0", hub=tmp_path / "hub")
    pull("counterfactuals", repo_type="dataset", hub=tmp_path / "hub")  # the whole snapshot, cached
    checks = []
    real = cv.check_cached
    monkeypatch.setattr(cv, "check_cached", lambda *a, **k: checks.append(a[1]) or real(*a, **k))
    with snapshots_checked_once():
        a = config_snapshot("counterfactuals", "case-3", hub=tmp_path / "hub")
        b = config_snapshot("counterfactuals", "case-4", hub=tmp_path / "hub")
    assert a.path == b.path and len(checks) == 1
    config_snapshot("counterfactuals", "case-3", hub=tmp_path / "hub")
    config_snapshot("counterfactuals", "case-4", hub=tmp_path / "hub")
    assert len(checks) == 3  # outside the block: each call checks


def test_the_zoo_listing_is_read_once_per_block(tmp_path):
    """Inside the block a zoo's release listing is read once (a release added meanwhile shows
    after the block, where every call reads the directories again)."""
    from cbench.hub.loading import snapshots_checked_once
    from cbench.hub.zoo import zoo_releases

    (tmp_path / "releases" / "models" / "cbench" / "case-3" / "v1.0.0").mkdir(parents=True)
    with snapshots_checked_once():
        first = zoo_releases(tmp_path)
        (tmp_path / "releases" / "models" / "cbench" / "case-3" / "v1.1.0").mkdir()
        again = zoo_releases(tmp_path)
        again[next(iter(again))]["v9.9.9"] = tmp_path  # a caller's change stays its own
        assert zoo_releases(tmp_path) == first
    assert sorted(next(iter(first.values()))) == ["v1.0.0"]
    assert sorted(next(iter(zoo_releases(tmp_path).values()))) == ["v1.0.0", "v1.1.0"]
