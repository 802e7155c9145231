"""Everything cbench needs from TransformerLens, in one place.

This is the ONLY module of the client that imports ``transformer_lens``. The rest of cbench
talks to models through:

* :func:`config_to_json` / :func:`config_from_json`: a ``HookedTransformerConfig`` as plain,
  deterministic JSON (``config.json`` of an artifact) and back;
* :func:`build_model`: a CPU ``HookedTransformer`` in eval mode with the edge-level hooks on
  (``use_attn_result``, ``use_split_qkv_input``, ``use_hook_mlp_in``), optionally loaded with
  a state dict;
* :func:`model_state_dict`: the weights to save (parameters only, contiguous, CPU, sorted);
* hook-name helpers (:func:`resid_pre_hook`, :func:`head_output_hook`, :func:`qkv_input_hook`,
  :func:`mlp_in_hook`, :func:`mlp_out_hook`, :func:`resid_post_hook`, ...) and the map from the
  canonical graph's node names to hook points (:func:`node_output_hook`,
  :func:`node_input_hook`);
* :func:`output_values`, the output convention: a numerical task's model has
  ``d_vocab_out == 1`` and outputs one value per position; a categorical task's model outputs
  logits over ``meta["output_classes"]`` (the config/meta consistency check is
  :func:`cbench.artifacts.model.check_output_convention`, which needs no TransformerLens).

Written against TransformerLens 3.9 (the last line with ``HookedTransformer``), whose facts this
module relies on (read from its source):

* ``HookedTransformerConfig`` is a dataclass; ``__post_init__`` derives ``n_params``,
  ``attn_scale`` (sqrt(d_head)), ``initializer_range`` (0.8/sqrt(d_model) for gpt2 init),
  ``d_vocab_out`` (= d_vocab when -1), ``rotary_dim`` and ``device``, and **reseeds Python,
  NumPy and torch globally when ``seed`` is set** — we shield callers from that reseeding;
* ``HookedTransformer.__init__`` calls ``init_weights()`` (which reseeds torch with
  ``cfg.seed``) when ``cfg.init_weights``; every component shares the model's one cfg object, so
  ``set_use_*`` flags take effect at once;
* attention registers persistent buffers ``mask`` (empty) and ``IGNORE`` (-inf), and for rotary
  embeddings ``rotary_sin``/``rotary_cos``: all derived from the config, so artifacts do not
  store them and loading tolerates them (older TransformerLens saved a full-size ``mask``);
* hook points: ``hook_embed``, ``hook_pos_embed``, ``blocks.L.hook_resid_pre``,
  ``blocks.L.hook_{q,k,v}_input`` ([batch, pos, head, d_model], needs use_split_qkv_input),
  ``blocks.L.attn.hook_result`` ([batch, pos, head, d_model], needs use_attn_result),
  ``blocks.L.hook_attn_out``, ``blocks.L.hook_resid_mid``, ``blocks.L.hook_mlp_in`` (needs
  use_hook_mlp_in, not for attn-only models), ``blocks.L.hook_mlp_out``,
  ``blocks.L.hook_resid_post``, ``unembed.hook_in``/``unembed.hook_out``.

What changes for TransformerLens 4: ``HookedTransformer`` and ``HookedTransformerConfig`` are
gone; models come from ``TransformerBridge`` (``boot_native`` for config-built models), whose
config class is ``TransformerBridgeConfig`` and whose hook names are the bridge's aliases. As of
4.x the config-built bridge offers neither per-head ``hook_result`` nor split q/k/v inputs, so
:func:`build_model` would have to provide them (e.g. by computing per-head outputs from ``hook_z``
and ``W_O`` and feeding q/k/v inputs through a custom attention module). Only this file would
change: the JSON config format stays (the field names are the 3.9 config's, which the bridge
config mostly shares), the state-dict key names would need a rename table here, and the hook
helpers below are the one place hook strings are spelled.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import random
import warnings
from typing import Any, Iterator, Mapping

import numpy as np
import torch

from cbench.errors import ArtifactError, GraphError

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import transformer_lens
    from transformer_lens import HookedTransformer
    from transformer_lens.config import HookedTransformerConfig
    from transformer_lens.hook_points import HookedRootModule, HookPoint  # hand-written high-level models

__all__ = [
    "HookedTransformer",
    "HookedTransformerConfig",
    "HookedRootModule",
    "HookPoint",
    "TRANSFORMER_LENS_VERSION",
    "config_to_json",
    "config_from_json",
    "build_model",
    "from_hf_model",
    "enable_edge_hooks",
    "model_state_dict",
    "model_config_json",
    "embed_hook",
    "pos_embed_hook",
    "resid_pre_hook",
    "resid_mid_hook",
    "resid_post_hook",
    "final_resid_hook",
    "head_output_hook",
    "qkv_input_hook",
    "attn_out_hook",
    "z_hook",
    "pattern_hook",
    "mlp_in_hook",
    "mlp_out_hook",
    "unembed_in_hook",
    "logits_hook",
    "node_output_hook",
    "node_input_hook",
    "output_values",
]

TRANSFORMER_LENS_VERSION: str = getattr(transformer_lens, "__version__", "unknown")

# Config fields never written to config.json:
#   device: a property of where a model runs, not of the model (cbench builds on CPU);
#   n_params: always recomputed by __post_init__;
#   the hook switches: cbench's loader always turns the edge-level ones on (build_model), and
#   they change no weights, so an artifact's bytes do not depend on how the model was hooked.
_DROPPED_FIELDS = frozenset(
    {
        "device",
        "n_params",
        "use_attn_result",
        "use_split_qkv_input",
        "use_hook_mlp_in",
        "use_attn_in",
    }
)

# Keys of state-dict entries that are buffers derived from the config (not weights).
_DERIVED_BUFFER_SUFFIXES = (".attn.mask", ".attn.IGNORE", ".attn.rotary_sin", ".attn.rotary_cos")


# ---------------------------------------------------------------------------- config <-> JSON
def _config_fields() -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(HookedTransformerConfig)}


def _dtype_to_str(dtype: Any) -> str:
    if isinstance(dtype, torch.dtype):
        return str(dtype).removeprefix("torch.")
    if isinstance(dtype, str):
        return _dtype_to_str(_dtype_from_str(dtype))
    raise ArtifactError(f"config dtype {dtype!r} is not a torch dtype")


def _dtype_from_str(name: Any) -> torch.dtype:
    if isinstance(name, torch.dtype):
        return name
    if not isinstance(name, str):
        raise ArtifactError(f"config.json: dtype must be a string like 'float32' (got {name!r})")
    dtype = getattr(torch, name.removeprefix("torch."), None)
    if not isinstance(dtype, torch.dtype):
        raise ArtifactError(f"config.json: dtype {name!r} is not a torch dtype (e.g. 'float32')")
    return dtype


def _plain(value: Any, key: str) -> Any:
    """``value`` as plain JSON types, or raise ``TypeError`` when it has none."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        f = float(value)
        if not math.isfinite(f):
            raise TypeError(f"{key} is not finite")
        return f
    if isinstance(value, (list, tuple)):
        return [_plain(v, key) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(v, key) for k, v in value.items()}
    raise TypeError(f"{key} has type {type(value).__name__}")


def config_to_json(cfg: HookedTransformerConfig | Mapping[str, Any]) -> dict[str, Any]:
    """A ``HookedTransformerConfig`` as a plain JSON dict, enough to rebuild the model identically.

    Every dataclass field is kept except ``device``, ``n_params`` (derived) and the hook
    switches (``use_attn_result``, ``use_split_qkv_input``, ``use_hook_mlp_in``,
    ``use_attn_in``); ``dtype`` becomes a string such as ``"float32"``; NumPy scalars become
    Python numbers. Fields whose values have no JSON form are dropped. Keys come out sorted, so
    equal configs give equal JSON bytes.
    """
    if isinstance(cfg, Mapping):
        cfg = config_from_json(cfg, strict=False)
    if not isinstance(cfg, HookedTransformerConfig):
        raise ArtifactError(f"expected a HookedTransformerConfig, got {type(cfg).__name__}")
    out: dict[str, Any] = {}
    for name in _config_fields():
        if name in _DROPPED_FIELDS:
            continue
        value = getattr(cfg, name)
        saved = getattr(cfg, "_cbench_before_tokenizer", None)
        if saved and name in saved:  # what attach_tokenizer changed is not part of the model
            value = saved[name]
        if name == "dtype":
            out[name] = _dtype_to_str(value)
            continue
        try:
            out[name] = _plain(value, name)
        except TypeError:
            continue  # not JSON-serialisable (nothing cbench's models set): leave it out
    return dict(sorted(out.items()))


@contextlib.contextmanager
def _preserved_global_rng() -> Iterator[None]:
    """Restore Python's, NumPy's and torch's global RNG states on exit.

    ``HookedTransformerConfig(seed=...)`` reseeds all three and ``init_weights`` reseeds torch;
    loading a model must not change the random numbers a caller draws next.
    """
    py_state = random.getstate()
    np_state = np.random.get_state()
    torch_state = torch.random.get_rng_state()
    try:
        yield
    finally:
        random.setstate(py_state)
        np.random.set_state(np_state)
        torch.random.set_rng_state(torch_state)


def _config_kwargs(d: Mapping[str, Any], strict: bool) -> dict[str, Any]:
    if not isinstance(d, Mapping):
        raise ArtifactError(f"config.json must be a JSON object (got {type(d).__name__})")
    fields = _config_fields()
    unknown = sorted(k for k in d if k not in fields and k not in _DROPPED_FIELDS)
    if unknown and strict:
        raise ArtifactError(
            f"config.json has fields TransformerLens {TRANSFORMER_LENS_VERSION} does not know: "
            + ", ".join(unknown)
        )
    missing = [k for k in ("n_layers", "d_model", "n_ctx", "d_head", "d_vocab") if k not in d]
    if missing:
        raise ArtifactError("config.json misses required fields: " + ", ".join(missing))
    kwargs = {k: v for k, v in d.items() if k in fields and k not in _DROPPED_FIELDS}
    if "dtype" in kwargs:
        kwargs["dtype"] = _dtype_from_str(kwargs["dtype"])
    kwargs["device"] = "cpu"
    return kwargs


def config_from_json(d: Mapping[str, Any], strict: bool = True) -> HookedTransformerConfig:
    """The ``HookedTransformerConfig`` of a config.json dict (device ``cpu``).

    ``strict`` refuses fields this TransformerLens does not know (set it to False to drop
    them, e.g. when importing a config written by another TransformerLens version). Building
    the config does not disturb the caller's global random state (3.9 reseeds everything when
    ``seed`` is set). Bad configs raise :class:`~cbench.errors.ArtifactError`.
    """
    kwargs = _config_kwargs(d, strict)
    with _preserved_global_rng(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return HookedTransformerConfig(**kwargs)
        except (AssertionError, ValueError, TypeError) as e:
            raise ArtifactError(f"config.json does not make a valid HookedTransformerConfig: {e}") from None


def model_config_json(model: HookedTransformer) -> dict[str, Any]:
    """:func:`config_to_json` of a model's config."""
    return config_to_json(model.cfg)


# ---------------------------------------------------------------------------- building models
def enable_edge_hooks(model: HookedTransformer) -> HookedTransformer:
    """Turn on the hooks edge-level work needs: per-head results, split q/k/v inputs, MLP inputs,
    and grouped-query attention ungrouped (``hook_k_input``/``hook_v_input`` per query head, the
    runtime's and the EAP-IG library's k and v destinations; the same numbers).

    ``use_hook_mlp_in`` only for models with MLPs (TransformerLens refuses it otherwise).
    Returns the model for chaining.

    Note: with ``use_attn_result`` the heads' outputs are summed explicitly, so logits differ
    from the hooks-off model in the last float bits (~1e-6). Compare models bit for bit only
    under the same hook settings.
    """
    model.set_use_attn_result(True)
    model.set_use_split_qkv_input(True)
    if getattr(model.cfg, "n_key_value_heads", None) is not None:  # a k and v input per query head
        model.set_ungroup_grouped_query_attention(True)
    if not model.cfg.attn_only:
        model.set_use_hook_mlp_in(True)
    return model


def _is_derived_buffer(key: str) -> bool:
    return key.endswith(_DERIVED_BUFFER_SUFFIXES)


def build_model(
    config_json: Mapping[str, Any] | HookedTransformerConfig,
    state_dict: Mapping[str, torch.Tensor] | None = None,
    *,
    strict_config: bool = True,
) -> HookedTransformer:
    """A CPU ``HookedTransformer`` in eval mode with :func:`enable_edge_hooks` applied.

    With ``state_dict`` the weights are loaded from it: every parameter must be present with
    the right shape and dtype, no unknown keys (config-derived buffers such as the attention
    ``mask``/``IGNORE`` are ignored whatever their shape). Without it the model is initialised
    as TransformerLens would from the config (so a config with a ``seed`` gives the same weights
    every time). Either way the caller's global random state is left as it was.
    """
    if isinstance(config_json, HookedTransformerConfig):
        config_json = config_to_json(config_json)
    kwargs = _config_kwargs(config_json, strict_config)
    init_weights = bool(kwargs.get("init_weights", True))
    tokenizer_name = kwargs.get("tokenizer_name")
    # never fetch a tokenizer (cbench's models take token ids), never spend time on an init
    # that the state dict overwrites; both fields are restored on the model's config below.
    kwargs["tokenizer_name"] = None
    if state_dict is not None:
        kwargs["init_weights"] = False
    with _preserved_global_rng(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            cfg = HookedTransformerConfig(**kwargs)
            model = HookedTransformer(cfg, move_to_device=False)
        except (AssertionError, ValueError, TypeError, RuntimeError) as e:
            raise ArtifactError(f"config.json does not make a valid HookedTransformer: {e}") from None
    model.cfg.init_weights = init_weights
    model.cfg.tokenizer_name = tokenizer_name
    if state_dict is not None:
        _load_weights(model, state_dict)
    torch.nn.Module.to(model, "cpu")  # TransformerLens's own .to() prints a message
    model.eval()
    enable_edge_hooks(model)
    return model


def from_hf_model(source: str, hf_model, tokenizer=None, dtype: torch.dtype = torch.float32,
                  cfg_dict: Mapping[str, Any] | None = None) -> HookedTransformer:
    """A ``HookedTransformer`` from a ``transformers`` causal LM and its checkpoint directory or
    hub name ``source`` (the config is converted by TransformerLens's own
    ``get_pretrained_model_config``, the weights by ``get_pretrained_state_dict``), with no
    weight processing (no folded norms, no centring: the model computes what the checkpoint
    does), on CPU, in eval mode, with :func:`enable_edge_hooks`. ``cfg_dict``: the config
    instead, for architectures whose conversion TransformerLens 3.9 keys on hub names only."""
    from transformer_lens import loading_from_pretrained as loading

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if cfg_dict is not None:
            cfg = HookedTransformerConfig(**dict(cfg_dict, device="cpu", dtype=dtype, init_weights=False))
        else:
            cfg = loading.get_pretrained_model_config(source, fold_ln=False, device="cpu", dtype=dtype)
        state_dict = loading.get_pretrained_state_dict(source, cfg, hf_model, dtype=dtype)
        model = HookedTransformer(cfg, tokenizer, move_to_device=False)
        model.load_and_process_state_dict(state_dict, fold_ln=False, center_writing_weights=False,
                                          center_unembed=False, fold_value_biases=False,
                                          refactor_factored_attn_matrices=False)
    model.eval()
    return enable_edge_hooks(model)


def attach_tokenizer(model: HookedTransformer, tokenizer, bos: str, pad: str | None = None,
                     name: str | None = None) -> HookedTransformer:
    """Give ``model`` a cbench word-level tokenizer (a :class:`tokenizers.Tokenizer`, see
    :mod:`cbench.artifacts.tokenizer`), so ``to_tokens("x a b")`` prepends BOS, ``to_str_tokens`` and
    ``to_string`` map ids back, and padding uses the case's PAD token.

    TransformerLens 3.9 takes a ``transformers`` tokenizer: the ``tokenizers`` object is wrapped
    in ``PreTrainedTokenizerFast`` with ``add_bos_token=True`` (so ``set_tokenizer`` keeps it as
    it is instead of reloading it by name) and ``default_prepend_bos`` is turned on (cbench's
    inputs always start with BOS; the post-processor adds it, TransformerLens sees that)."""
    from transformers import PreTrainedTokenizerFast

    wrapped = PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token=bos, pad_token=pad or bos,
                                      eos_token=pad or bos, add_bos_token=True,
                                      model_max_length=model.cfg.n_ctx, name_or_path=name or "cbench")
    touched = ("default_prepend_bos", "tokenizer_prepends_bos")
    before = getattr(model.cfg, "_cbench_before_tokenizer", None) or {k: getattr(model.cfg, k) for k in touched}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.set_tokenizer(wrapped, default_padding_side="right")
    model.cfg.default_prepend_bos = True
    # config_to_json writes the model's own values, not these runtime tokenizer settings
    object.__setattr__(model.cfg, "_cbench_before_tokenizer", before)
    return model


def _load_weights(model: HookedTransformer, state_dict: Mapping[str, torch.Tensor]) -> None:
    own = model.state_dict()
    wanted = {k for k in own if not _is_derived_buffer(k)}
    given = {k: v for k, v in state_dict.items() if not _is_derived_buffer(k)}
    missing = sorted(wanted - set(given))
    unexpected = sorted(set(given) - wanted)
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"missing {len(missing)} ({', '.join(missing[:5])}{', ...' if len(missing) > 5 else ''})")
        if unexpected:
            parts.append(
                f"unexpected {len(unexpected)} ({', '.join(unexpected[:5])}{', ...' if len(unexpected) > 5 else ''})"
            )
        raise ArtifactError("weights do not match config.json: " + "; ".join(parts))
    for k, v in given.items():
        if not isinstance(v, torch.Tensor):
            raise ArtifactError(f"weight {k} is not a tensor")
        if tuple(v.shape) != tuple(own[k].shape):
            raise ArtifactError(
                f"weight {k} has shape {tuple(v.shape)}, config.json needs {tuple(own[k].shape)}"
            )
        if v.dtype != own[k].dtype:
            raise ArtifactError(f"weight {k} has dtype {v.dtype}, config.json says {own[k].dtype}")
    model.load_state_dict(given, strict=False)


def model_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The weights to save: every state-dict entry but config-derived buffers, as contiguous
    CPU tensors (detached clones), in sorted key order."""
    sd = model.state_dict()
    return {k: sd[k].detach().to("cpu").contiguous().clone() for k in sorted(sd) if not _is_derived_buffer(k)}


# ---------------------------------------------------------------------------- hook names
def embed_hook() -> str:
    """Token embedding output ([batch, pos, d_model])."""
    return "hook_embed"


def pos_embed_hook() -> str:
    """Positional embedding output ([batch, pos, d_model]); absent for rotary models."""
    return "hook_pos_embed"


def resid_pre_hook(layer: int) -> str:
    """Residual stream entering block ``layer`` ([batch, pos, d_model])."""
    return f"blocks.{int(layer)}.hook_resid_pre"


def resid_mid_hook(layer: int) -> str:
    """Residual stream between attention and MLP (models with sequential MLPs only)."""
    return f"blocks.{int(layer)}.hook_resid_mid"


def resid_post_hook(layer: int) -> str:
    """Residual stream leaving block ``layer`` ([batch, pos, d_model])."""
    return f"blocks.{int(layer)}.hook_resid_post"


def final_resid_hook(n_layers: int) -> str:
    """The residual stream the unembedding reads (before ``ln_final``)."""
    return resid_post_hook(int(n_layers) - 1)


def head_output_hook(layer: int) -> str:
    """Per-head outputs of layer ``layer`` ([batch, pos, head, d_model]); b_O is not included
    (it is added once after the heads are summed)."""
    return f"blocks.{int(layer)}.attn.hook_result"


def qkv_input_hook(layer: int, qkv: str) -> str:
    """The residual-stream input of each head's query/key/value ([batch, pos, head, d_model])."""
    if qkv not in ("q", "k", "v"):
        raise ValueError(f"qkv must be 'q', 'k' or 'v' (got {qkv!r})")
    return f"blocks.{int(layer)}.hook_{qkv}_input"


def attn_out_hook(layer: int) -> str:
    """The sum of the heads' outputs plus b_O ([batch, pos, d_model])."""
    return f"blocks.{int(layer)}.hook_attn_out"


def z_hook(layer: int) -> str:
    """Attention-weighted values per head ([batch, pos, head, d_head])."""
    return f"blocks.{int(layer)}.attn.hook_z"


def pattern_hook(layer: int) -> str:
    """Attention pattern ([batch, head, query_pos, key_pos])."""
    return f"blocks.{int(layer)}.attn.hook_pattern"


def mlp_in_hook(layer: int) -> str:
    """The MLP's residual input, before its layer norm ([batch, pos, d_model])."""
    return f"blocks.{int(layer)}.hook_mlp_in"


def mlp_out_hook(layer: int) -> str:
    """The MLP's output ([batch, pos, d_model])."""
    return f"blocks.{int(layer)}.hook_mlp_out"


def unembed_in_hook() -> str:
    """The unembedding's input (after ``ln_final`` when there is one)."""
    return "unembed.hook_in"


def logits_hook() -> str:
    """The model's outputs ([batch, pos, d_vocab_out])."""
    return "unembed.hook_out"


def node_output_hook(node: str) -> tuple[str, int | None]:
    """Where a canonical graph node's contribution to the residual stream is found.

    Returns ``(hook_name, head_index_or_None)``: ``input`` -> ``blocks.0.hook_resid_pre``
    (token + positional embedding), ``a{L}.h{H}`` -> (``blocks.L.attn.hook_result``, H),
    ``m{L}`` -> ``blocks.L.hook_mlp_out``. ``logits`` writes nothing and raises GraphError.
    """
    from cbench.graph.graph import _HEAD_RE, _MLP_RE

    if node == "input":
        return resid_pre_hook(0), None
    m = _HEAD_RE.match(node)
    if m:
        return head_output_hook(int(m[1])), int(m[2])
    m = _MLP_RE.match(node)
    if m:
        return mlp_out_hook(int(m[1])), None
    raise GraphError(f"{node!r} is not a node that writes to the residual stream")


def node_input_hook(node: str, qkv: str | None = None, *, n_layers: int | None = None) -> tuple[str, int | None]:
    """Where a canonical graph node reads the residual stream.

    ``a{L}.h{H}`` with ``qkv`` -> (``blocks.L.hook_{qkv}_input``, H); ``m{L}`` ->
    ``blocks.L.hook_mlp_in``; ``logits`` -> the final residual stream (needs ``n_layers``).
    """
    from cbench.graph.graph import _HEAD_RE, _MLP_RE

    m = _HEAD_RE.match(node)
    if m:
        if qkv is None:
            raise GraphError(f"head {node!r} reads through q, k or v: pass qkv")
        return qkv_input_hook(int(m[1]), qkv), int(m[2])
    m = _MLP_RE.match(node)
    if m and qkv is None:
        return mlp_in_hook(int(m[1])), None
    if node == "logits" and qkv is None:
        if n_layers is None:
            raise GraphError("the logits' input hook needs n_layers")
        return final_resid_hook(n_layers), None
    raise GraphError(f"{node!r}{'<' + qkv + '>' if qkv else ''} is not a node input")


# ---------------------------------------------------------------------------- output conventions
def output_values(logits: torch.Tensor, task_type: str) -> torch.Tensor:
    """The model's outputs in task terms.

    ``categorical``: the logits unchanged ([..., pos, n_classes], class i is
    ``meta["output_classes"][i]``). ``numerical``: one value per position ([..., pos]), taken
    from the single output unit (``d_vocab_out == 1``).
    """
    if task_type == "numerical":
        if logits.shape[-1] != 1:
            raise ArtifactError(f"a numerical model must have d_vocab_out 1 (outputs have {logits.shape[-1]})")
        return logits[..., 0]
    if task_type == "categorical":
        return logits
    raise ArtifactError(f"task_type must be 'categorical' or 'numerical' (got {task_type!r})")
