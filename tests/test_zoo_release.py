"""The released artifacts kept in model_zoo/ (what every fresh clone's hub is seeded from)."""

import hashlib
import json
from pathlib import Path

from cbench.artifacts.model import verify_artifact
from cbench.schemas import check

RELEASES = Path(__file__).resolve().parents[1] / "model_zoo" / "releases"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_index_is_valid_and_matches_every_released_file():
    index = json.loads((RELEASES / "index.json").read_text())
    check(index, "benchmark-index")
    assert len({c["case"] for c in index["cases"]}) == len(index["cases"]) >= 16
    n = 0
    for entry in index["cases"]:
        for model in entry["models"]:
            org, name = model["repo"].split("/")
            for v in model["versions"]:
                root = RELEASES / "models" / org / name / v["version"]
                for rel, sha in v["files"].items():
                    assert _sha256(root / rel) == sha, (model["repo"], v["version"], rel)
                    n += 1
    assert n > 0
    main = {"3", "4", "8", "11", "13", "18", "19", "20", "21", "26", "29", "33", "34", "35", "36", "37"}
    assert main <= {c["case"] for c in index["cases"]}
    assert {d["repo"] for d in index["datasets"]} >= {"cbench/counterfactuals", "cbench/circuits", "cbench/ioi",
                                                      "cbench/tracr-programs"}


def test_released_siit_models_verify_and_pass_the_gates():
    siit = sorted((RELEASES / "models" / "cbench").glob("case-*/v*"))
    assert siit, "no SIIT model released"
    for path in siit:
        art = verify_artifact(path)
        meta = json.loads((path / "meta.json").read_text())
        assert meta["model_kind"] == "siit"
        assert meta["metrics"]["iia"] >= 0.995 and meta["metrics"]["siia"] >= 0.995, path
        assert (path / "tracr" / "meta.json").is_file() and (path / "correspondence.json").is_file()
        assert meta["released"] is True and meta["release_gate_failures"] == []
        out = [e["resample"] for e in meta["node_effects"] if not e["in_circuit"]]
        assert max(out) <= 0.01, path
        assert "## Node effects" in (path / "README.md").read_text()  # the node-effect table is on the card


def test_the_zoo_holds_siit_and_iit_models_for_all_16_main_cases():
    from cbench_builders.cases.specs import MAIN_CASES

    models = RELEASES / "models" / "cbench"
    for case in MAIN_CASES:
        for name in (f"case-{case}", f"iit-case-{case}"):
            assert sorted((models / name).glob("v*/meta.json")), f"{name} is not released"
        iit = json.loads(sorted((models / f"iit-case-{case}").glob("v*/meta.json"))[-1].read_text())
        assert iit["model_kind"] == "iit" and iit["training"]["siit_weight"] == 0.0
        assert iit["metrics"]["iia"] >= 0.995


def test_the_index_version_never_goes_back(tmp_path):
    """Releasing a new repository at v1.0.0 after the benchmark reached v1.1.0 keeps the index at v1.1.0."""
    import shutil

    from cbench_builders.release.zoo import write_index

    zoo = tmp_path / "zoo"
    src = RELEASES / "models" / "cbench" / "tracr-case-3" / "v1.0.0"
    shutil.copytree(src, zoo / "releases" / "models" / "cbench" / "tracr-case-3" / "v1.0.0")
    (zoo / "releases" / "index.json").write_text(json.dumps({"version": "v1.1.0"}))
    assert json.loads(write_index(zoo, "v1.0.0").read_text())["version"] == "v1.1.0"
    index = json.loads(write_index(zoo, "v1.2.0").read_text())
    assert index["version"] == "v1.2.0"
    check(index, "benchmark-index")
    assert [c["case"] for c in index["cases"]] == ["3"]
