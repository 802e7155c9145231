"""Cards follow the Hub's metadata conventions: huggingface_hub's own card parsing reads them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from huggingface_hub import DatasetCard, ModelCard

from cbench_builders.release.cards import render_card

RELEASES = Path(__file__).resolve().parents[1] / "model_zoo" / "releases"


def _siit_context() -> dict:
    d = RELEASES / "models/cbench/case-3/v1.0.0"
    meta = json.loads((d / "meta.json").read_text())
    meta["training"].setdefault("correspondence", "random")
    return {"case": "3", "kind": "siit", "meta": meta, "config": json.loads((d / "config.json").read_text()),
            "correspondence": json.loads((d / "correspondence.json").read_text()),
            "circuit": json.loads((d / "circuit.json").read_text()), "effects": meta["node_effects"],
            "released": True, "reasons": [], "repo": "cbench/case-3", "gates": meta["release_gates"],
            "verify": {"gates": [{"name": "complement_edge_effect", "value": 0.002, "pairs": 1000, "op": "<=",
                                  "threshold": 0.01, "passed": True}], "edges": []}}


def test_siit_model_card_has_model_index_datasets_citations_and_a_snippet(tmp_path):
    text = render_card("siit_model", _siit_context())
    card = ModelCard(text)
    data = card.data
    assert data.license == "mit" and data.library_name == "transformer-lens"
    assert data.datasets == ["cbench/counterfactuals", "cbench/circuits"]
    results = {r.metric_type: r for r in data.eval_results}
    assert set(results) == {"accuracy", "iia", "siia", "gate/complement_edge_effect"}
    assert results["iia"].metric_value >= 0.995 and results["iia"].dataset_config == "case-3"
    assert results["gate/complement_edge_effect"].metric_value == pytest.approx(0.002)
    assert data.to_dict()["model-index"][0]["name"] == "cbench/case-3"
    # the lead's release-gates table and the new sections are all in the body
    for needle in ("## Release gates", "complement_edge_effect", "## Use from Python", "model.to_tokens(",
                   "## Limitations", "@inproceedings{gupta2024interpbench", "lindner2023tracr", "mueller2025mib"):
        assert needle in card.text, needle
    # and it round-trips through the library's loader
    p = tmp_path / "README.md"
    p.write_text(text)
    assert ModelCard.load(p).data.eval_results[0].metric_type == "accuracy"


def test_python_snippet_of_the_card_runs(monkeypatch, tmp_path):
    """The card's example input tokenizes with the model's tokenizer."""
    import re

    from cbench.artifacts.model import read_model_artifact

    text = render_card("siit_model", _siit_context())
    example = re.search(r'model.to_tokens\("([^"]*)"\)', text).group(1)
    model = read_model_artifact(RELEASES / "models/cbench/case-3/v1.0.0").load_model()
    assert model.to_str_tokens(example) == ["BOS", *example.split()]


def test_circuits_card_has_dataset_info_and_a_default_config(tmp_path):
    import datasets

    from cbench_builders.datasets.build import write_circuits_card

    root = tmp_path / "circuits"
    shutil.copytree(RELEASES / "datasets/cbench/circuits/v1.2.0", root)
    card = DatasetCard.load(write_circuits_card(root))
    configs = card.data.configs
    assert [c["config_name"] for c in configs if c.get("default")] == ["case-3"]
    info = {i["config_name"]: i for i in card.data.dataset_info}
    assert set(info) == {c["config_name"] for c in configs}
    assert {f["name"] for f in info["case-3"]["features"]} >= {"edge", "src", "dst", "in_circuit"}
    rows = info["case-3"]["splits"][0]["num_examples"]
    ds = datasets.load_dataset(str(root))  # no config named: the default one
    assert ds["train"].num_rows == rows and "a1.h0->logits" in ds["train"]["edge"]
    assert "## Citation" in card.text and "## Limitations" in card.text


def _released(name: str, version: str) -> tuple[dict, dict, dict]:
    d = RELEASES / "models" / "cbench" / name / version
    return tuple(json.loads((d / f).read_text()) for f in ("meta.json", "circuit.json", "config.json"))


def _loading_examples(text: str) -> list[str]:
    import re

    section = text.split("## Load without cbench", 1)[1].split("\n## ", 1)[0]
    return re.findall(r'to_tokens\("(.*)"\)', section)


def test_the_stress_and_variables_builders_cards_load_without_cbench_with_a_real_example():
    """``cbench build stress`` and ``cbench build variables`` render the loading section with the
    example input the re-release gives (the stress tier's 31 dense-floor cards said
    ``to_tokens("")``: no example at all; the variables card had no section), so a re-release would
    change nothing in them."""
    from cbench_builders.release.cards import example_input, refresh_card
    from cbench_builders.stress.build import card as stress_card
    from cbench_builders.stress.registry import DESIGNS as STRESS
    from cbench_builders.variables.build import card as variables_card
    from cbench_builders.variables.designs import design
    from cbench.verify.gates import Gate, VerifyReport

    def report(meta):
        return VerifyReport(meta["case"], meta["model_kind"], [
            Gate(n, p, g[p], g["op"], g["threshold"], g["passed"])
            for n, g in meta["gates"].items() for p in ("validation", "fresh") if p in g], [])

    meta, circuit, config = _released("stress-or-6", "v1.0.0")
    text = stress_card(STRESS["or-6"](), meta, circuit, report(meta), config)
    assert _loading_examples(text) == [example_input(meta)] * 2 and example_input(meta) == "a b c"
    assert refresh_card(text, meta, "cbench/stress-or-6") == (text, [])
    meta, circuit, config = _released("var-shared-1", "v1.0.0")
    text = variables_card(design("var-shared-1"), meta, circuit, report(meta), config, {"m0": {"fvu": 0.01}})
    assert text.index("## Use") < text.index("## Load without cbench") < text.index("## Limitations")
    assert _loading_examples(text) == [example_input(meta)] * 2 and example_input(meta)
    assert refresh_card(text, meta, "cbench/var-shared-1") == (text, [])
