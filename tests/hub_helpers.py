"""Small artifacts and datasets for the hub tests (built here, nothing downloaded)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CBENCH = [sys.executable, "-m", "cbench.cli"]


def tiny_model(seed: int = 0, d_vocab_out: int = 3):
    from cbench.artifacts.transformer_lens_adapter import build_model

    cfg = {"n_layers": 1, "d_model": 8, "n_heads": 2, "d_head": 4, "d_mlp": 16, "d_vocab": 5,
           "d_vocab_out": d_vocab_out, "n_ctx": 5, "act_fn": "relu", "normalization_type": None,
           "seed": seed, "attention_dir": "causal"}
    return build_model(cfg)


def tiny_meta(case: str = "3", seed: int = 0, description: str = "tiny test model") -> dict:
    return {"schema": "cbench/model-meta/v1", "case": case, "model_kind": "siit", "task_type": "categorical",
            "description": description, "input_tokens": ["BOS", "a", "b", "c", "x"], "bos_token": "BOS",
            "pad_token": None, "output_classes": ["0", "1", "2"], "min_seq_len": 2, "max_seq_len": 5,
            "causal": True, "seed": seed, "training": {"lr": 0.001}, "metrics": {"accuracy": 1.0, "iia": 1.0,
                                                                                   "siia": 1.0},
            "dataset_revision": None, "training_time_s": 1.0, "hardware": "cpu", "cbench_version": "0.1.0"}


def tiny_circuit(case: str = "3") -> dict:
    return {"schema": "cbench/circuit/v1", "case": case, "model_kind": "siit", "granularity": "qkv",
            "graph": {"n_layers": 1, "n_heads": 2, "has_mlp": True, "parallel_attn_mlp": False},
            "nodes": ["input", "a0.h0", "m0", "logits"],
            "edges": ["input->a0.h0<q>", "input->a0.h0<v>", "a0.h0->m0", "m0->logits"]}


def write_tiny_artifact(path: Path, case: str = "3", seed: int = 0, description: str = "tiny test model",
                        tags: tuple[str, ...] = ("cbench",)):
    from cbench.artifacts.model import write_model_artifact

    readme = f"---\nlicense: mit\ntags: [{', '.join(tags)}]\n---\n# case-{case}\n\n{description} (seed {seed}).\n"
    return write_model_artifact(path, tiny_model(seed), tiny_meta(case, seed, description), circuit=tiny_circuit(case),
                                readme=readme)


def write_tiny_dataset(path: Path, rows: list[dict], config: str = "case-3") -> Path:
    """A dataset directory: one parquet file per split under data/<config>/, and a card whose
    ``configs:`` make ``load_dataset(path, config)`` work."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    d = path / "data" / config
    d.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), d / "train.parquet")
    card = ("---\nlicense: mit\nconfigs:\n"
            f"- config_name: {config}\n  data_files:\n  - split: train\n    path: data/{config}/train.parquet\n"
            "---\n# counterfactuals\n\nTest dataset.\n")
    (path / "README.md").write_text(card)
    return path


def run_cli(args: list[str], env: dict | None = None, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    full_env = dict(os.environ)
    if env:
        full_env.update({k: v for k, v in env.items() if v is not None})
        for k, v in env.items():
            if v is None:
                full_env.pop(k, None)
    return subprocess.run(CBENCH + args, capture_output=True, text=True, env=full_env, timeout=timeout, **kw)


def run_in_process(capsys, *argv) -> tuple[int, str, str]:
    """``cbench ARGV`` through the CLI's entry point in this process: (exit code, stdout, stderr)."""
    from cbench.cli import main

    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


def assert_clean_error(proc: subprocess.CompletedProcess, *needles: str) -> str:
    """A non-zero exit, one ``error:`` line, no traceback; returns stderr."""
    assert proc.returncode != 0, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith("error: "), proc.stderr
    for n in needles:
        assert n in proc.stderr, (n, proc.stderr)
    return proc.stderr


def artifact_files(path: Path) -> set[str]:
    """Every file of an artifact directory, as relative POSIX paths (what a hub commit of it holds)."""
    return {p.relative_to(path).as_posix() for p in Path(path).rglob("*") if p.is_file()}


def read_json(p: Path) -> dict:
    return json.loads(Path(p).read_text())


def publish_tiny_versions(root: Path, hub: Path, versions, dates: dict | None = None, describe: bool = False) -> dict:
    """Publish a tiny model (seed i) as ``versions[i]`` of ``cbench/case-3`` to ``hub``; ``{version: commit}``."""
    import cbench.hub as hubmod

    shas = {}
    for i, version in enumerate(versions):
        kw = {"description": f"model {version}"} if describe else {}
        write_tiny_artifact(root / f"m{i}", seed=i, **kw)
        shas[version] = hubmod.publish(root / f"m{i}", "cbench/case-3", "model", version, hub=hub,
                                       date=(dates or {}).get(version)).commit
    return shas


@pytest.fixture(scope="module", autouse=True)
def scratch_zoo(tmp_path_factory):
    """A test world with no zoo (``CBENCH_ZOO`` an empty directory) for the whole module.

    The zoo's ``releases/index.json`` pins the commit of every version it released, on every hub
    (:func:`cbench.hub.pull.check_pins`); a module that publishes its own tiny models as
    ``cbench/case-3`` and pulls them by the zoo's names must not be held to those pins, so it
    imports this fixture (``from hub_helpers import scratch_zoo  # noqa: F401``). Tests of the
    pins set ``CBENCH_ZOO`` to a zoo of their own."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CBENCH_ZOO", str(tmp_path_factory.mktemp("no-zoo")))
        yield
