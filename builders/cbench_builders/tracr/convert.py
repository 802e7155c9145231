"""Convert an assembled Tracr model into a TransformerLens HookedTransformer (through the adapter).

Weight map (REFERENCE.md, "Tracr -> TransformerLens"):

* attention ``query``/``key``/``value`` ``w``: ``d_model x (n_heads d_head)`` -> ``W_Q/W_K/W_V``
  ``n_heads x d_model x d_head`` (Tracr lays heads out head-major), biases likewise;
* attention ``linear`` -> ``W_O`` ``n_heads x d_head x d_model``;
* MLP ``linear_1``/``linear_2`` -> ``W_in``/``W_out`` (Tracr zero-pads every MLP to the widest);
* ``W_E``: Tracr's token embedding (one-hot token direction plus the constant ``one``
  direction), rows re-ordered to cbench's token ids: BOS first, then the vocab in spec order,
  then PAD when the case pads (Tracr's own PAD row is dropped when the case never pads);
* ``W_pos``: Tracr's positional embedding (row 0, the BOS position, is zero; position p >= 1 is
  ``indices:p-1``);
* ``W_U``: the projection of the residual stream onto the output space: one logit per output
  class for categorical programs (class i is ``output_classes[i]``, Tracr's output basis order),
  one value for numerical ones.

act_fn relu, no normalization, attention ``causal`` or ``bidirectional`` as compiled; Tracr's
attention scale 1/sqrt(key_size) is TransformerLens's default 1/sqrt(d_head).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from cbench.errors import ArtifactError, BuildError

from cbench_builders.tracr.compile import CompiledCase

NONE_CLASS = "None"  # how a None output class is written in meta.json (JSON scalars exclude null)


@dataclass
class ConvertedModel:
    """A compiled case as a HookedTransformer plus its input/output vocabularies."""

    model: Any  # HookedTransformer
    config: dict
    input_tokens: list  # token of each input id (BOS first)
    output_values: list | None  # Python value of each output class (categorical) or None
    output_classes: list | None  # the same, as JSON scalars (meta.json)

    @property
    def token_to_id(self) -> dict:
        return {t: i for i, t in enumerate(self.input_tokens)}


def json_class(value: Any) -> Any:
    """An output value as a JSON scalar: None -> "None", non-finite floats and tuples -> str."""
    if value is None:
        return NONE_CLASS
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        f = float(value)
        return f if math.isfinite(f) else str(f)
    if isinstance(value, str):
        return value
    return str(value)


def _np(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float32)


def convert(compiled: CompiledCase) -> ConvertedModel:
    """The HookedTransformer equivalent of ``compiled`` (float32, CPU, edge hooks on)."""
    import torch
    from tracr.craft import vectorspace_fns

    from cbench.artifacts.transformer_lens_adapter import build_model

    case = compiled.case
    asm = compiled.assembled
    mc = asm.model_config
    params = asm.params
    d_model = compiled.residual_space.num_dims
    n_heads, d_head, d_mlp, n_layers = mc.num_heads, mc.key_size, mc.mlp_hidden_size, mc.num_layers

    input_tokens = [case.bos, *case.vocab] + ([case.pad] if case.pad is not None else [])
    enc = asm.input_encoder.encoding_map
    missing = [t for t in input_tokens if t not in enc]
    if missing:
        raise BuildError(f"case {case.id}: Tracr's token embedding has no row for {missing!r}")

    if compiled.categorical:
        output_values = [d.value for d in compiled.output_space.basis]
        output_classes = [json_class(v) for v in output_values]
        if len(set(map(repr, output_classes))) != len(output_classes):
            raise BuildError(f"case {case.id}: two output classes have the same JSON form: {output_classes!r}")
        d_vocab_out = len(output_values)
    else:
        output_values = output_classes = None
        d_vocab_out = 1
        if compiled.output_space.num_dims != 1:
            raise BuildError(f"case {case.id}: a numerical output needs one output direction, "
                             f"Tracr made {compiled.output_space.num_dims}")

    config = {
        "model_name": f"tracr-case-{case.id}",
        "n_layers": int(n_layers),
        "d_model": int(d_model),
        "n_ctx": int(case.max_seq_len + 1),
        "d_head": int(d_head),
        "n_heads": int(n_heads),
        "d_mlp": int(d_mlp),
        "d_vocab": len(input_tokens),
        "d_vocab_out": int(d_vocab_out),
        "act_fn": "relu",
        "normalization_type": None,
        "attention_dir": "causal" if case.causal else "bidirectional",
        "positional_embedding_type": "standard",
        "default_prepend_bos": False,
        "original_architecture": "tracr",
        "dtype": "float32",
    }

    sd: dict[str, np.ndarray] = {}
    tok = _np(params["token_embed"]["embeddings"])
    sd["embed.W_E"] = tok[[enc[t] for t in input_tokens]]
    sd["pos_embed.W_pos"] = _np(params["pos_embed"]["embeddings"])

    def heads(w):  # d_model x (H K) -> H x d_model x K
        return _np(w).reshape(d_model, n_heads, d_head).transpose(1, 0, 2)

    for layer in range(n_layers):
        attn = f"transformer/layer_{layer}/attn"
        mlp = f"transformer/layer_{layer}/mlp"
        for ours, theirs in (("Q", "query"), ("K", "key"), ("V", "value")):
            sd[f"blocks.{layer}.attn.W_{ours}"] = heads(params[f"{attn}/{theirs}"]["w"])
            sd[f"blocks.{layer}.attn.b_{ours}"] = _np(params[f"{attn}/{theirs}"]["b"]).reshape(n_heads, d_head)
        sd[f"blocks.{layer}.attn.W_O"] = _np(params[f"{attn}/linear"]["w"]).reshape(n_heads, d_head, d_model)
        sd[f"blocks.{layer}.attn.b_O"] = _np(params[f"{attn}/linear"]["b"])
        sd[f"blocks.{layer}.mlp.W_in"] = _np(params[f"{mlp}/linear_1"]["w"])
        sd[f"blocks.{layer}.mlp.b_in"] = _np(params[f"{mlp}/linear_1"]["b"])
        sd[f"blocks.{layer}.mlp.W_out"] = _np(params[f"{mlp}/linear_2"]["w"])
        sd[f"blocks.{layer}.mlp.b_out"] = _np(params[f"{mlp}/linear_2"]["b"])
    sd["unembed.W_U"] = _np(vectorspace_fns.project(compiled.residual_space, compiled.output_space).matrix)
    sd["unembed.b_U"] = np.zeros(d_vocab_out, dtype=np.float32)

    expected = {"embed.W_E": (len(input_tokens), d_model), "pos_embed.W_pos": (case.max_seq_len + 1, d_model),
                "unembed.W_U": (d_model, d_vocab_out)}
    for layer in range(n_layers):
        expected[f"blocks.{layer}.attn.W_Q"] = (n_heads, d_model, d_head)
        expected[f"blocks.{layer}.attn.W_O"] = (n_heads, d_head, d_model)
        expected[f"blocks.{layer}.mlp.W_in"] = (d_model, d_mlp)
        expected[f"blocks.{layer}.mlp.W_out"] = (d_mlp, d_model)
    for key, shape in expected.items():
        if sd[key].shape != shape:
            raise BuildError(f"case {case.id}: converted weight {key} has shape {sd[key].shape}, expected {shape}")

    try:
        model = build_model(config, {k: torch.from_numpy(np.array(v, dtype=np.float32, copy=True)) for k, v in sd.items()})
    except ArtifactError as exc:
        raise BuildError(f"case {case.id}: the converted weights do not make a HookedTransformer: {exc}") from None
    return ConvertedModel(model=model, config=config, input_tokens=input_tokens, output_values=output_values,
                          output_classes=output_classes)
