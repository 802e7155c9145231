"""Builder commands that used to succeed while doing nothing useful: now one line, non-zero exit."""

from __future__ import annotations

import json

from cli_inprocess import assert_one_clean_error, run_main
from hub_helpers import write_tiny_artifact


def test_release_with_nothing_new_keeps_the_index(tmp_path):
    zoo, built = tmp_path / "zoo", tmp_path / "siit"
    (zoo / "releases").mkdir(parents=True)
    write_tiny_artifact(built / "case-3")
    dirs = ["--zoo", str(zoo), "--siit-dir", str(built), "--tracr-dir", str(tmp_path / "none"),
            "--datasets-dir", str(tmp_path / "none")]
    assert run_main(["build", "release", "--version", "v1.0.0", *dirs]).code == 0
    assert run_main(["build", "release", "--version", "v1.1.0", *dirs]).code == 0
    index = zoo / "releases" / "index.json"
    before = index.read_bytes()
    assert json.loads(before)["version"] == "v1.1.0"
    res = run_main(["build", "release", "--version", "v1.0.0", *dirs])  # everything already released at v1.0.0
    assert_one_clean_error(res, 2, "nothing new to release at v1.0.0", "left at v1.1.0")
    res = run_main(["build", "release", "--version", "v1.1.0", *dirs])  # same version: a no-op, exit 0
    assert res.code == 0 and "nothing new" in res.stdout
    assert index.read_bytes() == before
    assert_one_clean_error(run_main(["build", "release", "--version", "v1.2.0", "--only", "nope", *dirs]), 2,
                           "--only nope")
    assert_one_clean_error(run_main(["build", "release", "--version", "1.2", *dirs]), 2, "not a version")
    assert index.read_bytes() == before


def test_siit_report_without_models_writes_nothing(tmp_path):
    (tmp_path / "models").mkdir()
    out = tmp_path / "report.md"
    res = run_main(["build", "siit-report", "--models", str(tmp_path / "models"), "--out", str(out)])
    assert_one_clean_error(res, 1, "no case has both a SIIT model")
    assert not out.exists()
    res = run_main(["build", "siit-report", "--models", str(tmp_path / "models"), "--out", "/dev/null"])
    assert_one_clean_error(res, 2, "character device")
