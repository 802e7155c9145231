"""Case specifications for InterpBench's appendix-H cases (paper Table 11) in model_zoo/cases/.

Every spec file: SPEC has the required keys with the right types and program() builds a RASP
expression that the RASP evaluator can run. Compiling every case belongs to
`cbench build tracr --all`; here three representative cases (a SelectorWidth, a Map, and an
Aggregate over a computed index) are compiled with tracr and checked against the evaluator.
"""

from __future__ import annotations

import importlib.util
import itertools
import random
from pathlib import Path

import pytest

CASES_DIR = Path(__file__).resolve().parents[1] / "model_zoo" / "cases"

# Table 11 of the paper (appendix H), in the paper's order. Case 19 is also a main case
# (appendix G) and its spec is the main one, so it is checked by the main cases' tests.
TABLE_11 = [
    "2", "7", "14", "15", "19", "24", "25", "30", "31", "39", "40", "41", "43", "44", "45", "46",
    "49", "50", "51", "52", "53", "54", "55", "56", "58", "60", "62", "63", "64", "65", "66", "67",
    "68", "69", "70", "71", "72", "73", "75", "77", "79", "80", "82", "83", "84", "85", "86", "87",
    "90", "91", "95", "93", "97", "101", "102", "103", "104", "105", "106", "111", "122", "129",
    "130", "114", "110", "113", "121", "124",
]
MAIN_CASES = {"3", "4", "8", "11", "13", "18", "19", "20", "21", "26", "29", "33", "34", "35", "36", "37"}
APPENDIX_H = [c for c in TABLE_11 if c not in MAIN_CASES]

REQUIRED = {
    "schema": str, "id": str, "description": str, "task_type": str, "vocab": list,
    "min_seq_len": int, "max_seq_len": int, "bos": str, "causal": bool, "label_positions": str,
    "source": str, "seed": int, "training": dict,
}
TRAINING = {
    "algorithm": str, "lr": float, "lr_end": float, "betas": list, "batch_size": int, "epochs": int,
    "iit_weight": float, "siit_weight": float, "behavior_weight": float, "strict_prob": float,
}


def _path(case_id: str) -> Path:
    return CASES_DIR / f"case_{int(case_id):03d}.py"


def _load(case_id: str):
    path = _path(case_id)
    spec = importlib.util.spec_from_file_location(f"cbench_case_{case_id}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PRESENT = [c for c in APPENDIX_H if _path(c).exists()]


def test_most_appendix_h_cases_have_a_spec():
    # Cases tracr cannot compile exactly are listed in model_zoo/appendix-h-not-compiled.md.
    assert len(APPENDIX_H) == 67
    assert len(PRESENT) >= 60, sorted(set(APPENDIX_H) - set(PRESENT), key=int)


@pytest.mark.parametrize("case_id", PRESENT)
def test_spec_has_required_keys_and_types(case_id):
    module = _load(case_id)
    assert module.__doc__ and f"Case {case_id}" in module.__doc__
    spec = module.SPEC
    for key, typ in REQUIRED.items():
        assert key in spec, key
        assert isinstance(spec[key], typ), (key, spec[key])
    assert "pad" in spec and (spec["pad"] is None or isinstance(spec["pad"], str))
    assert spec["schema"] == "cbench/case/v1"
    assert spec["id"] == case_id
    assert spec["description"].strip()
    assert spec["task_type"] in {"categorical", "numerical"}
    assert spec["label_positions"] == "all-but-bos"
    assert spec["source"] in {"original", "cbench"}
    assert spec["bos"] == "BOS"
    assert 1 <= spec["min_seq_len"] <= spec["max_seq_len"] <= 16
    if spec["min_seq_len"] < spec["max_seq_len"]:
        assert spec["pad"] == "PAD"  # variable-length inputs are batched with PAD
    vocab = spec["vocab"]
    assert vocab and len(vocab) == len(set(vocab)) <= 20
    assert spec["bos"] not in vocab and spec["pad"] not in vocab
    assert all(isinstance(t, (str, int, float)) and not isinstance(t, bool) for t in vocab)
    assert spec["seed"] >= 0
    training = spec["training"]
    for key, typ in TRAINING.items():
        assert isinstance(training[key], typ), (key, training.get(key))
    assert training["algorithm"] == "summed" and training["betas"] == [0.9, 0.9]
    assert (training["lr"], training["lr_end"], training["strict_prob"]) == (1e-3, 2e-4, 0.5)
    if "notes" in spec:
        assert isinstance(spec["notes"], str) and spec["notes"]


@pytest.mark.parametrize("case_id", PRESENT)
def test_spec_matches_case_schema_apart_from_label_positions(case_id):
    from cbench.schemas import validate

    spec = _load(case_id).SPEC
    # The binding case format says label_positions "all-but-bos"; the schema's enum does not have
    # it yet (left to the lead), so only that path is excused.
    violations = [v for v in validate(spec, "case") if v.path != "$.label_positions"]
    assert violations == []


@pytest.mark.parametrize("case_id", PRESENT)
def test_program_builds_a_rasp_expression_that_evaluates(case_id):
    from tracr.rasp import rasp

    module = _load(case_id)
    spec = module.SPEC
    program = module.program()
    assert isinstance(program, rasp.SOp)
    assert rasp.is_numerical(program) == (spec["task_type"] == "numerical")
    rng = random.Random(int(case_id))
    for length in (spec["min_seq_len"], spec["max_seq_len"]):
        tokens = [rng.choice(spec["vocab"]) for _ in range(length)]
        out = rasp.evaluate(program, tokens)
        assert len(out) == length
        assert None not in out, (tokens, out)


def _check_compiled(case_id: str, n_inputs: int = 40) -> None:
    import jax

    jax.config.update("jax_default_matmul_precision", "float32")
    import numpy as np
    from tracr.compiler import compiling
    from tracr.rasp import rasp

    module = _load(case_id)
    spec = module.SPEC
    program = module.program()
    model = compiling.compile_rasp_to_model(
        program, vocab=set(spec["vocab"]), max_seq_len=spec["max_seq_len"],
        compiler_bos=spec["bos"], compiler_pad=spec["pad"], causal=spec["causal"])
    lengths = range(spec["min_seq_len"], spec["max_seq_len"] + 1)
    everything = [list(x) for n in lengths for x in itertools.product(spec["vocab"], repeat=n)]
    inputs = random.Random(0).sample(everything, min(n_inputs, len(everything)))
    width = spec["max_seq_len"] + 1
    rows = [model.input_encoder.encode([spec["bos"]] + x + [spec["pad"]] * (width - 1 - len(x)))
            for x in inputs]
    out = np.asarray(jax.jit(model.forward)(model.params, np.array(rows)).unembedded_output)
    for x, row in zip(inputs, out):
        got = row[1:len(x) + 1].tolist()
        want = rasp.evaluate(program, x)
        if spec["task_type"] == "numerical":
            assert np.allclose(got, want, atol=1e-4), (x, want, got)
        else:
            assert model.output_encoder.decode(got) == want, (x, want, got)


@pytest.fixture(scope="module")
def jax_compilation_cache(request, tmp_path_factory):
    """Most of a tracr compile is XLA compiling eager operations for new shapes; JAX's persistent
    compilation cache (kept in pytest's cache directory when there is one) cuts a warm compile
    from ~5 s to ~1 s."""
    import jax

    if jax.config.jax_compilation_cache_dir is None:
        cache = getattr(request.config, "cache", None)
        where = cache.mkdir("jax-compilation-cache") if cache else tmp_path_factory.mktemp("jax-cache")
        jax.config.update("jax_compilation_cache_dir", str(where))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)


# A SelectorWidth (14), a Map (46), and length -> index -> Aggregate -> SequenceMap (111).
@pytest.mark.parametrize("case_id", ["14", "46", "111"])
def test_representative_cases_compile_and_match_the_evaluator(case_id, jax_compilation_cache):
    _check_compiled(case_id)
