"""Smaller CLI conventions: natural sort and datasets in `list`, Choice types from the
registries, builders that leave tracked files alone unless told."""

from __future__ import annotations

import json

from click.testing import CliRunner

from cbench.cli import cli
from hub_helpers import run_cli


def test_list_is_natural_and_shows_datasets_without_seeding(tmp_path):
    env = {"CBENCH_HOME": str(tmp_path / "home"), "CBENCH_HUB": None, "CBENCH_ENDPOINT": None, "HF_HUB_OFFLINE": None}
    proc = run_cli(["list", "--json"], env=env)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    models = [r["name"] for r in rows if r["type"] == "model"]
    assert models.index("case-3") < models.index("case-11") < models.index("case-33")
    assert {"counterfactuals", "circuits"} <= {r["name"] for r in rows if r["type"] == "dataset"}
    assert not (tmp_path / "home" / "hub" / "models").exists()  # nothing was seeded to list
    from cbench.hub.pull import natural_key

    assert sorted(["case-11", "case-3", "tracr-case-2", "case-3b"], key=natural_key) == \
        ["case-3", "case-3b", "case-11", "tracr-case-2"]
    # the "available:" list of an unknown case is in the same order
    from cbench.hub.pull import _unknown_repo_message

    msg = _unknown_repo_message("zzz", ["cbench/zzz"], "model", ["cbench/case-11", "cbench/case-3", "cbench/case-101"],
                                "hub X")
    assert msg.endswith("available: case-3, case-11, case-101")


def test_methods_metrics_and_ablations_are_choices_from_the_registries():
    from cbench.discovery import METHODS
    from cbench.tasks.metrics import METRICS

    out = CliRunner().invoke(cli, ["discover", "--help"]).output
    assert "[" + "|".join(METHODS) + "]" in out.replace("\n", "").replace(" ", "")
    r = CliRunner().invoke(cli, ["discover", "case-3", "-m", "acdcc"])
    assert r.exit_code == 2 and "unknown method 'acdcc' (did you mean: acdc?)" in r.output
    r = CliRunner().invoke(cli, ["evaluate", "x.json", "--metric", "kll"])
    assert r.exit_code == 2 and "unknown metric 'kll'" in r.output and ", ".join(METRICS) in r.output
    r = CliRunner().invoke(cli, ["evaluate", "x.json", "--ablation", "mean2"])
    assert r.exit_code == 2


def test_siit_report_never_overwrites_the_tracked_report_by_default(tmp_path):
    (tmp_path / "build" / "siit").mkdir(parents=True)
    proc = run_cli(["build", "siit-report"], cwd=tmp_path)
    assert proc.returncode != 0 and ("nothing written" in proc.stderr or "no report written" in proc.stderr)
    assert not (tmp_path / "build" / "siit-vs-iit.md").exists()
    help_text = run_cli(["build", "siit-report", "--help"]).stdout
    assert "--update-zoo" in help_text and "build/siit-vs-iit.md" in help_text
