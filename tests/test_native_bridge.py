"""The artifact writer's TransformerLens-facing fields and the TransformerLens 4 native form:
``default_prepend_bos`` on for every model that reads BOS, no string ``dtype`` for float32 models,
``bridge/`` files written for models the native form computes and a clear error (and no files) for
the others."""

from __future__ import annotations

import json

import pytest
import torch
from cbench.artifacts import transformer_lens_adapter as tla
from cbench.artifacts.model import read_model_artifact, write_model_artifact
from cbench.artifacts.native_bridge import bridge_files, bridge_problem, to_native
from cbench.errors import ArtifactError

TOKENS = ["BOS", "a", "b", "c", "x"]


def _model(**kw):
    cfg = {"n_layers": 2, "n_heads": 2, "d_model": 8, "d_head": 4, "n_ctx": 5, "d_vocab": len(TOKENS),
           "d_vocab_out": 1, "d_mlp": 16, "act_fn": "gelu", "normalization_type": None, "seed": 3,
           "default_prepend_bos": False}
    cfg.update(kw)
    model = tla.build_model(tla.config_to_json(tla.HookedTransformerConfig(**cfg)))
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=gen))
    return model


def _meta():
    return {"schema": "cbench/model-meta/v1", "case": "3", "model_kind": "siit", "task_type": "numerical",
            "description": "toy", "input_tokens": TOKENS, "bos_token": "BOS", "pad_token": None,
            "output_classes": None, "min_seq_len": 2, "max_seq_len": 4, "causal": True, "seed": 0,
            "training": None, "metrics": None, "dataset_revision": None, "training_time_s": None,
            "hardware": None, "cbench_version": "0.1.0"}


def test_writer_turns_bos_on_drops_float32_and_writes_the_bridge(tmp_path):
    model = _model()
    art = write_model_artifact(tmp_path / "m", model, _meta())
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    assert config["default_prepend_bos"] is True and "dtype" not in config
    # the file as it is makes a HookedTransformerConfig (a string dtype did not)
    assert tla.HookedTransformerConfig(**config).dtype == torch.float32
    assert {"bridge/config.json", "bridge/model.safetensors"} <= set(art.meta["files"])
    bridge = json.loads((tmp_path / "m" / "bridge" / "config.json").read_text())
    assert bridge["architecture"] == "TransformerLensNative" and bridge["default_prepend_bos"] is True
    assert bridge["d_model"] == 8 and bridge["d_vocab_out"] == 1
    loaded = art.load_model()
    assert loaded.to_tokens("x a b").tolist() == [[0, 4, 1, 2]]


def test_native_weights_are_the_models_weights_rearranged():
    model = _model(attn_scale=2.5)  # a scale other than sqrt(d_head) is folded into W_Q
    sd = tla.model_state_dict(model)
    native = to_native(tla.config_to_json(model.cfg), sd)
    w = native.state_dict
    assert native.config["attn_scale"] == pytest.approx(2.0)
    h, dh, d = 2, 4, 8
    assert torch.equal(w["blocks.1.attn.k.weight"], sd["blocks.1.attn.W_K"].permute(0, 2, 1).reshape(h * dh, d))
    assert torch.allclose(w["blocks.0.attn.q.weight"],
                          sd["blocks.0.attn.W_Q"].permute(0, 2, 1).reshape(h * dh, d) * (2.0 / 2.5))
    assert torch.equal(w["blocks.0.attn.o.weight"], sd["blocks.0.attn.W_O"].reshape(h * dh, d).T)
    assert torch.equal(w["blocks.1.mlp.in.weight"], sd["blocks.1.mlp.W_in"].T)
    assert torch.equal(w["unembed.bias"], sd["unembed.b_U"]) and w["unembed.weight"].shape == (1, d)
    # and the function is the same (the torch re-implementation of TransformerLens 4's native forward)
    from test_plain_transformer_lens import native_forward

    tokens = torch.tensor([[0, 4, 1, 2], [0, 3, 3, 1]])
    with torch.no_grad():
        assert torch.allclose(model(tokens), native_forward(native, tokens), atol=1e-5)


@pytest.mark.parametrize("change, words", [
    ({"normalization_type": "LN"}, "normalization 'LN'"),
    ({"positional_embedding_type": "rotary", "rotary_dim": 4}, "positional embeddings"),
    ({"gated_mlp": True}, "a gated MLP"),
    ({"act_fn": "solu_ln"}, "activation 'solu_ln'"),
])
def test_models_without_a_native_form_get_a_clear_error_and_no_files(tmp_path, change, words):
    model = _model(**change)
    config, sd = tla.config_to_json(model.cfg), tla.model_state_dict(model)
    with pytest.raises(ArtifactError, match="TransformerLens 4's native model cannot compute this model") as err:
        to_native(config, sd)
    assert words in str(err.value)
    assert words in bridge_problem(config, sd) and bridge_files(config, sd) == {}
    art = write_model_artifact(tmp_path / "m", model, _meta())
    assert not any(f.startswith("bridge/") for f in art.meta["files"])
    assert read_model_artifact(tmp_path / "m").config["default_prepend_bos"] is True
