"""Model artifacts: write, read back, verify (cbench.artifacts.model + cbench.artifacts.transformer_lens_adapter)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import torch

import cbench.artifacts as A
from cbench.artifacts import transformer_lens_adapter as tla
from cbench.errors import ArtifactError, ArtifactSchemaError, CbenchError, HashMismatchError, SchemaError

N_CTX = 5
TOKENS = ["BOS", "a", "b", "c", "x"]


def _config(attn_only=False, d_vocab_out=1, seed=7, **kw):
    base = dict(n_layers=2, n_heads=2, d_model=16, d_head=8, n_ctx=N_CTX, d_vocab=len(TOKENS),
                d_vocab_out=d_vocab_out, act_fn="relu", normalization_type="LN", attn_only=attn_only,
                seed=seed, original_architecture="cbench-test")
    if not attn_only:
        base["d_mlp"] = 32
    base.update(kw)
    return tla.HookedTransformerConfig(**base)


def _random_model(cfg):
    model = tla.build_model(tla.config_to_json(cfg))
    # make biases and layer norms non-trivial too, so every tensor round trip is exercised
    gen = torch.Generator().manual_seed(123)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=gen))
    return model


def _meta(task_type="numerical", classes=None, case="3", kind="siit"):
    return {
        "schema": "cbench/model-meta/v1",
        "case": case,
        "model_kind": kind,
        "task_type": task_type,
        "description": "Fraction of previous tokens that are 'x'.",
        "input_tokens": TOKENS,
        "bos_token": "BOS",
        "pad_token": None,
        "output_classes": classes,
        "min_seq_len": 2,
        "max_seq_len": N_CTX,
        "causal": True,
        "seed": 0,
        "training": None if kind == "tracr" else {"algorithm": "siit", "lr": 0.001},
        "metrics": None if kind == "tracr" else {"accuracy": 1.0, "iia": 1.0, "siia": 0.99},
        "dataset_revision": None,
        "training_time_s": None,
        "hardware": None,
        "cbench_version": "0.1.0",
    }


def _circuit(kind="siit", attn_only=False):
    if attn_only:
        nodes, edges = ["input", "a1.h0", "logits"], ["input->a1.h0<v>", "a1.h0->logits"]
    else:
        nodes, edges = ["input", "m0", "a1.h0", "logits"], ["input->m0", "m0->a1.h0<v>", "a1.h0->logits"]
    return {"schema": "cbench/circuit/v1", "case": "3", "model_kind": kind, "granularity": "qkv",
            "graph": {"n_layers": 2, "n_heads": 2, "has_mlp": not attn_only, "parallel_attn_mlp": False},
            "nodes": nodes, "edges": edges}


def _correspondence():
    return {"schema": "cbench/correspondence/v1", "case": "3",
            "graph": {"n_layers": 2, "n_heads": 2, "has_mlp": True, "parallel_attn_mlp": False},
            "seed": 0,
            "nodes": [{"high_level": "is_x", "high_level_node": "m0",
                       "low_level": [{"node": "m0", "hook": "blocks.0.hook_mlp_out", "head": None}]},
                      {"high_level": "frac_prevs", "high_level_node": "a1.h0",
                       "low_level": [{"node": "a1.h1", "hook": "blocks.1.attn.hook_result", "head": 1}]}]}


def _tokens(n=16, seed=0):
    gen = torch.Generator().manual_seed(seed)
    toks = torch.randint(1, len(TOKENS), (n, N_CTX), generator=gen)
    toks[:, 0] = 0  # BOS
    return toks


def _hashes(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): A.sha256_file(p) for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def mlp_model():
    return _random_model(_config())


@pytest.fixture(scope="module")
def attn_model():
    return _random_model(_config(attn_only=True, d_vocab_out=3))


@pytest.fixture()
def written(tmp_path, mlp_model):
    path = tmp_path / "case-3"
    A.write_model_artifact(path, mlp_model, _meta(), circuit=_circuit(), correspondence=_correspondence(),
                           readme="# case 3\n")
    return path


# ---------------------------------------------------------------------------- round trips
def test_config_json_round_trip():
    for cfg in (_config(), _config(attn_only=True, d_vocab_out=3), _config(normalization_type=None, seed=None),
                _config(dtype=torch.float64, attention_dir="bidirectional", positional_embedding_type="shortformer")):
        j = tla.config_to_json(cfg)
        assert json.loads(json.dumps(j)) == j  # plain JSON
        assert list(j) == sorted(j)
        assert isinstance(j["dtype"], str) and j["dtype"] in ("float32", "float64")
        assert "device" not in j and "n_params" not in j and "use_attn_result" not in j
        for key in ("n_layers", "d_model", "n_ctx", "d_head", "n_heads", "d_mlp", "d_vocab", "d_vocab_out", "act_fn",
                    "normalization_type", "attn_only", "positional_embedding_type", "default_prepend_bos",
                    "original_architecture", "seed", "init_mode", "initializer_range", "attention_dir"):
            assert key in j, key
        back = tla.config_from_json(j)
        assert isinstance(back, tla.HookedTransformerConfig)
        assert tla.config_to_json(back) == j
        assert back.dtype == cfg.dtype and back.n_params == cfg.n_params and back.device == "cpu"


def test_config_from_json_leaves_global_rng_alone():
    j = tla.config_to_json(_config(seed=3))
    torch.manual_seed(99)
    expected = torch.rand(3)
    torch.manual_seed(99)
    tla.config_from_json(j)
    tla.build_model(j)
    assert torch.equal(torch.rand(3), expected)


def test_config_from_json_refuses_bad_configs():
    j = tla.config_to_json(_config())
    with pytest.raises(ArtifactError, match="does not know: no_such_field"):
        tla.config_from_json({**j, "no_such_field": 1})
    assert tla.config_from_json({**j, "no_such_field": 1}, strict=False).n_layers == 2
    with pytest.raises(ArtifactError, match="dtype"):
        tla.config_from_json({**j, "dtype": "float33"})
    with pytest.raises(ArtifactError, match="misses required fields: n_layers"):
        tla.config_from_json({k: v for k, v in j.items() if k != "n_layers"})
    with pytest.raises(ArtifactError, match="act_fn"):
        tla.config_from_json({**j, "act_fn": "nope"})


def test_build_model_is_seeded_and_hooked():
    j = tla.config_to_json(_config(seed=11))
    a, b = tla.build_model(j), tla.build_model(j)
    for (ka, va), (kb, vb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert ka == kb and torch.equal(va, vb)
    assert a.cfg.use_attn_result and a.cfg.use_split_qkv_input and a.cfg.use_hook_mlp_in
    assert not a.training
    assert tla.config_to_json(a.cfg) == j


@pytest.mark.parametrize("which", ["mlp", "attn_only"])
def test_write_read_identical_logits(tmp_path, which, mlp_model, attn_model):
    model = mlp_model if which == "mlp" else attn_model
    meta = _meta() if which == "mlp" else _meta("categorical", ["p", "q", "r"])
    path = tmp_path / which
    art = A.write_model_artifact(path, model, meta, circuit=_circuit(attn_only=which != "mlp"))
    assert art.verified and art.path == path

    back = A.read_model_artifact(path)
    want = tla.config_to_json(model.cfg)
    if want.get("dtype") == "float32":  # the writer leaves TransformerLens's default dtype out
        del want["dtype"]
    assert back.config == {**want, "default_prepend_bos": True}
    assert back.meta["case"] == "3" and back.circuit["edges"] == _circuit(attn_only=which != "mlp")["edges"]
    assert back.correspondence is None and back.tracr is None
    assert back.graph.n_layers == 2 and back.graph.n_heads == 2 and back.graph.has_mlp == (which == "mlp")
    loaded = back.load_model()
    assert loaded.cfg.use_attn_result and loaded.cfg.use_split_qkv_input
    assert loaded.cfg.use_hook_mlp_in == (which == "mlp")

    toks = _tokens()
    tla.enable_edge_hooks(model)  # same hook settings on both sides: same arithmetic
    with torch.no_grad():
        expected, got = model(toks), loaded(toks)
    assert got.shape == (16, N_CTX, 1 if which == "mlp" else 3)
    assert torch.equal(expected, got)
    # the hooks the runtime patches exist and fire
    names = [tla.head_output_hook(1), tla.qkv_input_hook(0, "q"), tla.qkv_input_hook(1, "v"),
             tla.resid_pre_hook(0), tla.resid_post_hook(1)]
    if which == "mlp":
        names += [tla.mlp_in_hook(1), tla.mlp_out_hook(0)]
    with torch.no_grad():
        _, cache = loaded.run_with_cache(toks, names_filter=lambda n: n in names)
    assert set(cache.keys()) == set(names)
    assert cache[tla.head_output_hook(1)].shape == (16, N_CTX, 2, 16)
    assert cache[tla.qkv_input_hook(0, "q")].shape == (16, N_CTX, 2, 16)
    values = tla.output_values(got, back.task_type)
    assert values.shape == ((16, N_CTX) if which == "mlp" else (16, N_CTX, 3))


def test_state_dict_and_header(written, mlp_model):
    art = A.read_model_artifact(written)
    sd = art.state_dict()
    own = tla.model_state_dict(mlp_model)
    assert list(sd) == list(own) or sorted(sd) == sorted(own)
    assert all(torch.equal(sd[k], own[k]) for k in own)
    assert not any(k.endswith((".mask", ".IGNORE")) for k in sd)
    assert art.weights_metadata() == {"format": "pt", "cbench_format": "cbench-model/v1", "case": "3",
                                      "model_kind": "siit"}
    # the standard reader agrees with our serialiser
    from safetensors import safe_open

    with safe_open(str(written / "model.safetensors"), framework="pt") as fh:
        assert fh.metadata()["cbench_format"] == "cbench-model/v1"
        assert torch.equal(fh.get_tensor("embed.W_E"), own["embed.W_E"])


def test_meta_files_lists_every_file(written):
    meta = json.loads((written / "meta.json").read_text())
    assert set(meta["files"]) == {"config.json", "model.safetensors", "circuit.json", "correspondence.json",
                                  "README.md", "tokenizer.json", "tokenizer_config.json"}
    for rel, digest in meta["files"].items():
        assert A.sha256_file(written / rel) == digest
    assert meta["schema"] == "cbench/model-meta/v1"
    assert (written / "README.md").read_text() == "# case 3\n"
    # JSON bytes are deterministic: sorted keys, indent 2, trailing newline
    raw = (written / "meta.json").read_bytes()
    assert raw == A.dumps_json(meta) and raw.endswith(b"}\n")


def test_write_twice_is_byte_identical(tmp_path, mlp_model):
    a, b = tmp_path / "a", tmp_path / "b"
    for p in (a, b):
        A.write_model_artifact(p, mlp_model, _meta(), circuit=_circuit(), correspondence=_correspondence(),
                               readme="card")
    assert _hashes(a) == _hashes(b)
    # and a model rebuilt from the artifact writes the same bytes again
    c = tmp_path / "c"
    A.write_model_artifact(c, A.read_model_artifact(a).load_model(), _meta(), circuit=_circuit(),
                           correspondence=_correspondence(), readme="card")
    assert _hashes(a) == _hashes(c)


def test_safetensors_bytes_deterministic_across_processes(tmp_path, written):
    import subprocess
    import sys

    code = ("import sys; from cbench import artifacts as A; a = A.read_model_artifact(sys.argv[1]); "
            "sys.stdout.buffer.write(A._safetensors_bytes(a.state_dict(), "
            "{'format': 'pt', 'cbench_format': A.MODEL_FORMAT, 'case': '3', 'model_kind': 'siit'}))")
    out = subprocess.run([sys.executable, "-c", code, str(written)], capture_output=True, check=True).stdout
    assert out == (written / "model.safetensors").read_bytes()


def test_subartifact_tracr(tmp_path, mlp_model, attn_model):
    tracr = tmp_path / "tracr-case-3"
    A.write_model_artifact(tracr, attn_model, _meta("categorical", ["p", "q", "r"], kind="tracr"),
                           circuit=_circuit("tracr", attn_only=True))
    siit = tmp_path / "case-3"
    A.write_model_artifact(siit, mlp_model, _meta(), circuit=_circuit(), correspondence=_correspondence(),
                           subartifacts={"tracr": tracr})
    art = A.read_model_artifact(siit)
    files = art.meta["files"]
    assert {"tracr/meta.json", "tracr/config.json", "tracr/model.safetensors", "tracr/circuit.json"} <= set(files)
    sub = art.tracr
    assert sub is not None and sub.meta["model_kind"] == "tracr" and sub.path == siit / "tracr"
    toks = _tokens()
    with torch.no_grad():
        assert torch.equal(sub.load_model()(toks), A.read_model_artifact(tracr).load_model()(toks))
    # a tampered file inside the sub-artifact is caught by the parent's manifest
    w = siit / "tracr" / "config.json"
    w.write_text(w.read_text().replace('"n_ctx": 5', '"n_ctx": 6'))
    with pytest.raises(HashMismatchError, match="tracr/config.json"):
        A.read_model_artifact(siit)


# ---------------------------------------------------------------------------- refusals
def test_tampered_weights_refused_by_hash(written):
    w = written / "model.safetensors"
    data = bytearray(w.read_bytes())
    data[-3] ^= 0x01
    w.write_bytes(bytes(data))
    with pytest.raises(HashMismatchError) as e:
        A.read_model_artifact(written)
    msg = str(e.value)
    assert "model.safetensors" in msg and "expected" in msg and "\n" not in msg
    # without verify the weights still load (the caller asked for no checks)
    assert A.read_model_artifact(written, verify=False).config["n_layers"] == 2


def test_state_dict_rechecks_hash_after_verification(written):
    art = A.read_model_artifact(written)
    w = written / "model.safetensors"
    data = bytearray(w.read_bytes())
    data[-1] ^= 0xFF
    w.write_bytes(bytes(data))
    with pytest.raises(HashMismatchError):
        art.load_model()


def test_meta_schema_violation_refused(written):
    m = written / "meta.json"
    meta = json.loads(m.read_text())
    meta["model_kind"] = "gpt"
    m.write_text(json.dumps(meta))
    with pytest.raises(ArtifactSchemaError) as e:
        A.read_model_artifact(written)
    assert isinstance(e.value, SchemaError) and isinstance(e.value, ArtifactError)
    assert "model_kind" in str(e.value)


def test_extra_unlisted_file_refused(written):
    (written / "notes.txt").write_text("hello")
    with pytest.raises(ArtifactError, match="not listed in meta.json: notes.txt"):
        A.read_model_artifact(written)
    (written / "notes.txt").unlink()
    (written / ".gitattributes").write_text("*.safetensors filter=lfs\n")  # dotfiles are fine
    (written / "sub").mkdir()
    (written / "sub" / "x.bin").write_bytes(b"x")
    with pytest.raises(ArtifactError, match="sub/x.bin"):
        A.read_model_artifact(written)


def test_missing_and_broken_files(tmp_path, written):
    with pytest.raises(ArtifactError, match="no such directory"):
        A.read_model_artifact(tmp_path / "nope")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ArtifactError, match="not a directory"):
        A.read_model_artifact(tmp_path / "file")
    (written / "circuit.json").unlink()
    with pytest.raises(ArtifactError, match="circuit.json is listed in meta.json but missing"):
        A.read_model_artifact(written)
    (written / "config.json").write_text("{not json")
    with pytest.raises(ArtifactError) as e:
        A.read_model_artifact(written, verify=False)
    assert "config.json" in str(e.value) and "\n" not in str(e.value)
    (written / "meta.json").unlink()
    with pytest.raises(ArtifactError, match="meta.json is missing"):
        A.read_model_artifact(written)


def test_inconsistent_documents_refused(tmp_path, mlp_model):
    with pytest.raises(ArtifactError, match="d_vocab_out 1"):  # categorical meta on a 1-output model
        A.write_model_artifact(tmp_path / "a", mlp_model, _meta("categorical", ["p", "q"]))
    bad_circuit = _circuit()
    bad_circuit["edges"] = ["input->a5.h0<q>"]
    with pytest.raises(ArtifactError, match="a5.h0"):
        A.write_model_artifact(tmp_path / "b", mlp_model, _meta(), circuit=bad_circuit)
    bad_corr = _correspondence()
    bad_corr["graph"]["n_heads"] = 4
    with pytest.raises(ArtifactError, match="n_heads"):
        A.write_model_artifact(tmp_path / "c", mlp_model, _meta(), correspondence=bad_corr)
    with pytest.raises(ArtifactError, match="input_tokens"):
        A.write_model_artifact(tmp_path / "d", mlp_model, {**_meta(), "input_tokens": ["BOS", "a"]})
    assert not any(tmp_path.iterdir())  # nothing written, no temp dirs left behind


def test_failed_write_leaves_existing_artifact_untouched(written, mlp_model, attn_model):
    before = _hashes(written)
    with pytest.raises(ArtifactError, match="already exists"):
        A.write_model_artifact(written, attn_model, _meta("categorical", ["p", "q", "r"]))
    bad = _meta()
    del bad["task_type"]
    with pytest.raises(SchemaError, match="task_type"):
        A.write_model_artifact(written, mlp_model, bad, overwrite=True)
    assert _hashes(written) == before
    assert sorted(p.name for p in written.parent.iterdir()) == [written.name]  # no temp dirs left
    # overwrite=True with good input replaces it
    A.write_model_artifact(written, attn_model, _meta("categorical", ["p", "q", "r"]), overwrite=True)
    assert A.read_model_artifact(written).config["attn_only"] is True
    assert sorted(p.name for p in written.parent.iterdir()) == [written.name]


def test_write_json_is_deterministic_and_atomic(tmp_path):
    p = tmp_path / "x.json"
    A.write_json(p, {"b": 1, "a": [1, 2], "é": "ü"})
    assert p.read_bytes() == '{\n  "a": [\n    1,\n    2\n  ],\n  "b": 1,\n  "é": "ü"\n}\n'.encode()
    with pytest.raises(ArtifactError, match="JSON"):
        A.write_json(p, {"a": float("nan")})
    assert json.loads(p.read_text())["b"] == 1  # the old file survives
    assert [q.name for q in tmp_path.iterdir()] == ["x.json"]


def test_hook_name_helpers():
    assert tla.resid_pre_hook(0) == "blocks.0.hook_resid_pre"
    assert tla.head_output_hook(3) == "blocks.3.attn.hook_result"
    assert tla.qkv_input_hook(1, "k") == "blocks.1.hook_k_input"
    assert tla.mlp_in_hook(2) == "blocks.2.hook_mlp_in" and tla.mlp_out_hook(2) == "blocks.2.hook_mlp_out"
    assert tla.resid_post_hook(1) == "blocks.1.hook_resid_post" and tla.final_resid_hook(2) == "blocks.1.hook_resid_post"
    assert tla.node_output_hook("input") == ("blocks.0.hook_resid_pre", None)
    assert tla.node_output_hook("a1.h3") == ("blocks.1.attn.hook_result", 3)
    assert tla.node_output_hook("m0") == ("blocks.0.hook_mlp_out", None)
    assert tla.node_input_hook("a1.h3", "v") == ("blocks.1.hook_v_input", 3)
    assert tla.node_input_hook("m1") == ("blocks.1.hook_mlp_in", None)
    assert tla.node_input_hook("logits", n_layers=2) == ("blocks.1.hook_resid_post", None)
    with pytest.raises(CbenchError):
        tla.node_output_hook("logits")
    with pytest.raises(ValueError):
        tla.qkv_input_hook(0, "x")


def test_build_model_refuses_mismatched_weights(mlp_model):
    j = tla.config_to_json(mlp_model.cfg)
    sd = tla.model_state_dict(mlp_model)
    sd_missing = {k: v for k, v in sd.items() if k != "unembed.W_U"}
    with pytest.raises(ArtifactError, match="missing 1 .unembed.W_U"):
        tla.build_model(j, sd_missing)
    with pytest.raises(ArtifactError, match="shape"):
        tla.build_model(j, {**sd, "unembed.W_U": torch.zeros(16, 7)})
    with pytest.raises(ArtifactError, match="unexpected"):
        tla.build_model(j, {**sd, "blocks.9.attn.W_Q": torch.zeros(1)})
    # config-derived buffers of any shape are tolerated (older TransformerLens saved a full mask)
    m = tla.build_model(j, {**sd, "blocks.0.attn.mask": torch.ones(9, 9, dtype=torch.bool),
                            "blocks.0.attn.IGNORE": torch.tensor(-1e5)})
    assert torch.equal(m.blocks[0].attn.W_Q, mlp_model.blocks[0].attn.W_Q)


@pytest.mark.parametrize("variant", ["rotary", "float64", "no_norm_bidirectional"])
def test_round_trip_variants(tmp_path, variant):
    kw = {"rotary": dict(positional_embedding_type="rotary"),
          "float64": dict(dtype=torch.float64),
          "no_norm_bidirectional": dict(normalization_type=None, attention_dir="bidirectional")}[variant]
    model = _random_model(_config(**kw))
    meta = {**_meta(), "causal": variant != "no_norm_bidirectional"}
    art = A.write_model_artifact(tmp_path / variant, model, meta)
    loaded = art.load_model()
    assert not any("rotary" in k or k.endswith(".mask") for k in art.state_dict())
    toks = _tokens()
    tla.enable_edge_hooks(model)
    with torch.no_grad():
        assert torch.equal(model(toks), loaded(toks))
    assert art.state_dict()["embed.W_E"].dtype == model.cfg.dtype


def test_hugging_face_snapshot_layout_with_symlinks(tmp_path, written):
    """A snapshot's files are symlinks into a blob store; they verify like regular files."""
    blobs, snap = tmp_path / "blobs", tmp_path / "snapshot"
    blobs.mkdir()
    snap.mkdir()
    for rel in A.artifact_files(written):
        blob = blobs / A.sha256_file(written / rel)
        blob.write_bytes((written / rel).read_bytes())
        (snap / rel).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(blob, snap / rel)
    art = A.read_model_artifact(snap)
    assert art.meta["case"] == "3"
    os.unlink(snap / "README.md")
    os.symlink(blobs / "missing", snap / "README.md")
    with pytest.raises(ArtifactError, match="README.md"):
        A.read_model_artifact(snap)


def test_truncated_weights_without_verify_give_one_clear_error(written):
    w = written / "model.safetensors"
    w.write_bytes(w.read_bytes()[:50])
    art = A.read_model_artifact(written, verify=False)
    with pytest.raises(ArtifactError) as e:
        art.load_model()
    assert "model.safetensors" in str(e.value)
    w.write_bytes(b"\xff" * 4)
    with pytest.raises(ArtifactError, match="not a safetensors file"):
        A.read_safetensors_header(w)


def test_write_refuses_non_models_and_bad_subartifacts(tmp_path, mlp_model):
    with pytest.raises(ArtifactError, match="HookedTransformer"):
        A.write_model_artifact(tmp_path / "x", object(), _meta())
    for name in ("../evil", "meta.json", ".hidden", "/abs"):
        with pytest.raises(ArtifactError, match="sub-artifact name"):
            A.write_model_artifact(tmp_path / "x", mlp_model, _meta(), subartifacts={name: tmp_path})
    with pytest.raises(ArtifactError, match="does not exist"):
        A.write_model_artifact(tmp_path / "x", mlp_model, _meta(), subartifacts={"tracr": tmp_path / "nope"})
    assert not (tmp_path / "x").exists()
    assert [p.name for p in tmp_path.iterdir()] == []


def test_a_write_removes_temporaries_a_killed_write_left_but_not_fresh_ones(mlp_model, tmp_path):
    """Only a killed process leaves ``.NAME.tmp-*`` beside an artifact; the next write of that
    artifact removes old ones and keeps one that may belong to a write in progress."""
    path = tmp_path / "case-3"
    old = tmp_path / ".case-3.tmp-0123456789ab"
    fresh = tmp_path / ".case-3.tmp-ba9876543210"
    other = tmp_path / ".case-4.tmp-0123456789ab"
    for d in (old, fresh, other):
        d.mkdir()
        (d / "model.safetensors").write_bytes(b"half")
    long_ago = time.time() - 2 * A.STALE_TEMPORARY_S
    os.utime(old, (long_ago, long_ago))
    os.utime(other, (long_ago, long_ago))
    A.write_model_artifact(path, mlp_model, _meta(), circuit=_circuit())
    assert not old.exists() and fresh.is_dir() and other.is_dir()
    assert (path / "meta.json").is_file()


def test_a_plain_checkpoint_is_named_as_one_not_as_a_broken_artifact(tmp_path):
    """A Hugging Face checkpoint (config.json with a model_type, no meta.json), such as lm-tiny, is
    said to have no ground truth; a directory with neither is "not a model artifact"."""
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_layer": 2}))
    with pytest.raises(ArtifactError, match="plain Hugging Face checkpoint without ground truth.*--model DIR"):
        A.read_model_artifact(tmp_path / "ckpt")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "config.json").write_text(json.dumps({"n_layers": 2}))
    with pytest.raises(ArtifactError, match=r"not a model artifact \(meta.json is missing\)"):
        A.read_model_artifact(tmp_path / "other")
