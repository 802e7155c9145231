"""Released models under TransformerLens 4.3, in its own environment (``.venv-tl4``, made by
``make setup-tl4``; ``make test`` makes it): each model's ``bridge/`` files booted with
``TransformerBridge.boot_native`` and its tokenizer, exactly as the card says, give cbench's outputs
and BOS at position 0.

The TransformerLens 4 side runs as a subprocess (``tests/tl4_load_models.py``) under that
environment's interpreter (``$CBENCH_TL4_PYTHON`` overrides it). Without it the tests skip, saying
so, except on CI (``CI`` set), where a missing environment is a failure. The default suite loads a
sample (one model of each kind) in one subprocess; ``-m slow`` loads every released model.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from cbench.artifacts.model import read_model_artifact
from cbench.artifacts.tokenizer import token_string

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_plain_transformer_lens import ALL, artifact_dirs, example_texts

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = Path(__file__).resolve().parent / "tl4_load_models.py"
# one model of each kind (SIIT with its Tracr sub-artifact, IIT, Tracr, stress, variables, IOI); the
# subprocess's TransformerLens 4 import is most of the cost
SAMPLE = [p for p in ALL if p.parent.name in {"case-3", "case-13", "iit-case-21", "tracr-case-2", "stress-and-1",
                                               "var-shared-1", "ioi"}]


def tl4_python() -> Path:
    path = Path(os.environ.get("CBENCH_TL4_PYTHON") or ROOT / ".venv-tl4" / "bin" / "python")
    if not path.is_file():
        reason = (f"no TransformerLens 4.3 environment at {path} (`make setup-tl4` creates it; `make test` "
                  "does too)")
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return path


def run_tl4(version_dirs: list[Path], tmp_path: Path) -> tuple[str, dict[str, dict], dict[str, list[str]]]:
    python = tl4_python()
    jobs, texts = [], {}
    for v in version_dirs:
        for d in artifact_dirs(v):
            art = read_model_artifact(d, verify=False)
            pad = art.meta.get("pad_token")
            texts[str(d)] = example_texts(art.meta, art.config["n_ctx"])
            jobs.append({"dir": str(d), "bos": token_string(art.meta["bos_token"]),
                         "pad": None if pad is None else token_string(pad), "name": f"cbench/{v.parent.name}",
                         "texts": texts[str(d)]})
    (tmp_path / "jobs.json").write_text(json.dumps(jobs))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    proc = subprocess.run([str(python), str(SCRIPT), str(tmp_path / "jobs.json"), str(tmp_path / "out.json")],
                          check=False, capture_output=True, text=True, timeout=1800, env=env, cwd=tmp_path)
    assert proc.returncode == 0, f"TransformerLens 4 run failed:\n{proc.stderr[-3000:]}"
    out = json.loads((tmp_path / "out.json").read_text())
    return out["transformer_lens"], {r["dir"]: r for r in out["results"]}, texts


def compare(results: dict[str, dict], texts: dict[str, list[str]]) -> list[str]:
    failures = []
    for d, r in results.items():
        if "error" in r:
            failures.append(f"{d}: {r['error']}")
            continue
        model = read_model_artifact(d).load_model()
        for text, tokens, logits in zip(texts[d], r["tokens"], r["logits"]):
            want_tokens = model.to_tokens(text)[0].tolist()
            if tokens != want_tokens:
                failures.append(f"{d}: to_tokens({text!r}) = {tokens}, cbench gives {want_tokens}")
                continue
            with torch.no_grad():
                want = model(torch.tensor([tokens]))[0]
            got = torch.tensor(logits)
            tol = 1e-4 + 1e-5 * want.abs().max().item()
            if got.shape != want.shape or (got - want).abs().max().item() > tol:
                failures.append(f"{d}: outputs on {text!r} differ from cbench's")
    return failures


def test_sample_loads_in_transformer_lens_4_and_gives_cbench_outputs(tmp_path):
    version, results, texts = run_tl4(SAMPLE, tmp_path)
    assert version.startswith("4.3"), f"the TransformerLens 4 environment has {version}"
    assert len(results) == sum(len(artifact_dirs(v)) for v in SAMPLE)
    failures = compare(results, texts)
    assert not failures, "\n".join(failures)
    case3 = next(r for d, r in results.items() if Path(d).parent.name == "case-3")
    assert all(t[0] == 0 for t in case3["tokens"])


@pytest.mark.slow
def test_every_released_model_loads_in_transformer_lens_4(tmp_path):
    _version, results, texts = run_tl4(ALL, tmp_path)
    failures = compare(results, texts)
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures[:20])
