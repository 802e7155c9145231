"""Restricted unpickling and the import of original InterpBench case folders (built here)."""

from __future__ import annotations

import json
import os
import pickle
import shutil

import numpy as np
import pytest
import torch

from cbench.artifacts import legacy_pickle as legacy_pickle
from cbench.errors import UnsafePickleError
from hub_helpers import assert_clean_error, run_cli


class _Evil:
    """Pickles to ``os.system("touch <marker>")``."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_plain_data_dtypes_and_numpy_scalars_load():
    doc = {"n_layers": 2, "dtype": torch.float32, "d": np.float64(0.5), "k": np.int64(3), "t": (1, "a"),
           "s": {1, 2}, "nested": [{"x": None, "b": b"\x00", "c": complex(1, 2)}]}
    for protocol in (0, 2, 4, 5):
        out = legacy_pickle.loads(pickle.dumps(doc, protocol=protocol))
        assert out == doc
        assert out["dtype"] is torch.float32 and isinstance(out["d"], np.floating)


@pytest.mark.parametrize("protocol", [0, 2, 5])
def test_malicious_reduce_is_refused_and_never_runs(tmp_path, protocol):
    marker = tmp_path / "pwned"
    data = pickle.dumps({"cfg": _Evil(marker)}, protocol=protocol)
    with pytest.raises(UnsafePickleError, match=r"asks for (posix|os)\.system"):
        legacy_pickle.loads(data)
    assert not marker.exists()


@pytest.mark.parametrize("target", [("builtins", "eval"), ("builtins", "getattr"), ("subprocess", "Popen"),
                                    ("torch", "load"), ("numpy", "load"), ("copyreg", "_reconstructor")])
def test_other_globals_are_refused(target):
    module, name = target
    if target == ("copyreg", "_reconstructor"):  # allowed only for the config stand-in
        data = b"ccopyreg\n_reconstructor\n(cbuiltins\nset\ncbuiltins\nobject\nNtR."
        with pytest.raises(UnsafePickleError, match="_reconstructor"):
            legacy_pickle.loads(data)
        return
    data = f"c{module}\n{name}\n(S'1+1'\ntR.".encode()
    with pytest.raises(UnsafePickleError, match=f"{module}.{name}"):
        legacy_pickle.loads(data)


def test_pickled_hooked_transformer_config_becomes_field_values(tmp_path):
    from transformer_lens import HookedTransformerConfig

    cfg = HookedTransformerConfig(n_layers=1, d_model=8, n_ctx=5, d_head=4, n_heads=2, d_vocab=5, act_fn="relu",
                                  d_mlp=16, device="cpu")
    out = legacy_pickle.loads(pickle.dumps(cfg))
    assert isinstance(out, dict)
    assert (out["n_layers"], out["d_model"], out["dtype"]) == (1, 8, torch.float32)


def _interpbench_folder(tmp_path, cfg_as_object=False):
    from cbench.artifacts.transformer_lens_adapter import build_model

    cfg = {"n_layers": 2, "d_model": 8, "n_ctx": 5, "d_head": 2, "n_heads": 4, "d_mlp": 32, "d_vocab": 6,
           "d_vocab_out": 1, "act_fn": "gelu", "normalization_type": "LN", "seed": 42, "dtype": torch.float32,
           "device": "cpu", "original_architecture": None}
    model = build_model({k: (str(v).replace("torch.", "") if k == "dtype" else v) for k, v in cfg.items()
                         if k not in ("device", "original_architecture")})
    d = tmp_path / "ib" / "3"
    d.mkdir(parents=True)
    torch.save(model.state_dict(), d / "ll_model.pth")
    if cfg_as_object:
        from transformer_lens import HookedTransformerConfig

        obj = HookedTransformerConfig(**{k: v for k, v in cfg.items() if k != "original_architecture"})
        (d / "ll_model_cfg.pkl").write_bytes(pickle.dumps(obj))
    else:
        (d / "ll_model_cfg.pkl").write_bytes(pickle.dumps(cfg))
    edges = [("blocks.0.hook_resid_pre", "blocks.0.hook_q_input[2]"),
             ("blocks.0.hook_q_input[2]", "blocks.0.attn.hook_q[2]"),  # internal to the head: dropped
             ("blocks.0.attn.hook_result[2]", "blocks.0.hook_mlp_in"),
             ("blocks.0.hook_mlp_out", "blocks.1.hook_v_input[1]"),
             ("blocks.1.attn.hook_result[1]", "blocks.1.hook_resid_post")]
    (d / "edges.pkl").write_bytes(pickle.dumps(edges))
    (d / "meta.json").write_text(json.dumps({"lr": 0.001, "epochs": 3, "iit_weight": 1.0}))
    (tmp_path / "ib" / "benchmark_metadata.json").write_text(json.dumps({
        "name": "InterpBench", "version": "1", "cases": [{"case_id": "3", "task_description":
                                                          "fraction of previous x tokens",
                                                          "vocab": ["a", "b", "c", "x"], "max_seq_len": 5,
                                                          "min_seq_len": 2}]}))
    return d, model


@pytest.mark.parametrize("cfg_as_object", [False, True])
def test_import_interpbench_folder(tmp_path, cfg_as_object):
    from cbench.artifacts.model import read_model_artifact
    from cbench.artifacts.interpbench_import import import_interpbench

    d, model = _interpbench_folder(tmp_path, cfg_as_object)
    art = import_interpbench(d, "3", tmp_path / "out")
    assert art.circuit["edges"] == ["input->a0.h2<q>", "a0.h2->m0", "m0->a1.h1<v>", "a1.h1->logits"]
    assert art.meta["task_type"] == "numerical" and art.meta["output_classes"] is None
    assert art.meta["input_tokens"] == ["BOS", "a", "b", "c", "x", "PAD"]
    assert art.meta["training"] == {"lr": 0.001, "epochs": 3, "iit_weight": 1.0}
    assert art.meta["imported_from"]["format"] == "interpbench"
    art2 = read_model_artifact(tmp_path / "out")  # verified read
    loaded = art2.load_model()
    tokens = torch.tensor([[0, 1, 4, 2, 3]])
    assert torch.allclose(loaded(tokens), model(tokens), atol=1e-6)


def test_import_cli_refuses_malicious_cfg_and_runs_nothing(tmp_path):
    d, _ = _interpbench_folder(tmp_path)
    marker = tmp_path / "pwned"
    (d / "ll_model_cfg.pkl").write_bytes(pickle.dumps(_Evil(marker)))
    proc = run_cli(["import-interpbench", str(d), "--case", "3", "--out", str(tmp_path / "out")])
    assert_clean_error(proc, "refused", "system")
    assert not marker.exists() and not (tmp_path / "out").exists()


def test_import_refuses_malicious_weights(tmp_path):
    from cbench.artifacts.interpbench_import import import_interpbench

    d, _ = _interpbench_folder(tmp_path)
    marker = tmp_path / "pwned"
    torch.save({"w": torch.zeros(1), "evil": _Evil(marker)}, d / "ll_model.pth")
    with pytest.raises(UnsafePickleError, match="system"):
        import_interpbench(d, "3", tmp_path / "out")
    assert not marker.exists() and not (tmp_path / "out").exists()
