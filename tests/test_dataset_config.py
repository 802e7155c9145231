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
