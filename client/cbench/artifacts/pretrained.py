"""Real models by name, directory or object, for the runtime (``cbench discover --model``).

:func:`load_model` takes

* a ``HookedTransformer`` (its edge-level hooks are turned on, nothing else changes);
* a Hugging Face ``transformers`` checkpoint directory (``config.json`` + weights, and a
  tokenizer when one is saved there): read with ``AutoModelForCausalLM.from_pretrained`` with
  ``local_files_only``, converted by TransformerLens's own config and weight converters, with no
  weight processing (the model computes what the checkpoint computes);
* a hub name (``"gpt2"``, ``"Qwen/Qwen2.5-0.5B"``, ...): the same through the Hugging Face
  cache; offline (``HF_HUB_OFFLINE=1``) only what is cached, and a name not cached is one line;
* a checkpoint in TransformerLens's own layout (``attn-only-4l`` by name, or a directory so
  laid out): :mod:`cbench.artifacts.transformer_lens_repos`.

* a TransformerLens 4.x ``TransformerBridge`` (GPT-2, GPT-NeoX, Llama, Qwen-2, Gemma-2): its
  Hugging Face model as the runtime's model, built by :mod:`cbench.artifacts.bridge_model` in plain
  torch (TransformerLens 4 has no ``HookedTransformer``); a bridge with processed weights is one line.

``dtype``: ``float32``,
``bfloat16`` or ``float16`` (the weights are converted once, at load).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import torch

from cbench.errors import UnsupportedModelError, UsageError

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}

# TransformerLens guesses the architecture of a model from its *name* when it contains these
# (its table of official Llama and Gemma models): a local directory so named is read through a
# neutrally named link instead, so its own config.json decides
_NAME_SNIFFED = ("llama", "gemma")


def dtype_of(name: str | torch.dtype) -> torch.dtype:
    """The torch dtype for ``float32``, ``bfloat16`` or ``float16``; one line for anything else."""
    if isinstance(name, torch.dtype):
        if name in DTYPES.values():
            return name
        name = str(name).replace("torch.", "")
    if name not in DTYPES:
        raise UsageError(f"unknown dtype {name!r} (use float32, bfloat16 or float16)")
    return DTYPES[name]


def is_checkpoint_dir(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a Hugging Face ``transformers`` checkpoint directory (not a cbench
    model artifact, which has a meta.json)."""
    p = Path(path)
    return p.is_dir() and (p / "config.json").is_file() and not (p / "meta.json").is_file()


def load_model(model, dtype: str | torch.dtype = "float32"):
    """A ``HookedTransformer`` with the edge-level hooks on, from a model object, a checkpoint
    directory or a hub name; from a ``TransformerBridge``, a
    :class:`~cbench.artifacts.bridge_model.BridgeModel` (see the module docstring)."""
    torch_dtype = dtype_of(dtype)
    from cbench.artifacts import bridge_model

    if isinstance(model, torch.nn.Module) and bridge_model.is_bridge(model):
        return bridge_model.from_bridge(model, torch_dtype)  # no TransformerLens import: it may be 4.x here
    from cbench.artifacts import transformer_lens_adapter as tla

    if isinstance(model, torch.nn.Module):
        if isinstance(model, tla.HookedTransformer):
            if next(model.parameters()).dtype != torch_dtype and torch_dtype != torch.float32:
                torch.nn.Module.to(model, torch_dtype)  # TransformerLens's own .to() prints a line
                model.cfg.dtype = torch_dtype
            return tla.enable_edge_hooks(model)
        raise UsageError(f"a model must be a HookedTransformer, a TransformerBridge, a checkpoint directory or a hub name "
                         f"(got a {type(model).__name__})")
    if not isinstance(model, (str, os.PathLike)):
        raise UsageError(f"a model must be a HookedTransformer, a TransformerBridge, a checkpoint directory or a hub name "
                         f"(got {type(model).__name__})")
    name = str(model)
    path = Path(name)
    from cbench.artifacts import transformer_lens_repos as tl_repos

    if path.exists() and tl_repos.is_transformer_lens_dir(path):  # attn-only-4l and its kind
        return tl_repos.load_transformer_lens_dir(path, torch_dtype)
    repo = None if path.exists() else tl_repos.native_repo(name)
    if repo is not None:
        return tl_repos.load_native_repo(repo, torch_dtype)
    if path.exists() and not is_checkpoint_dir(path):
        raise UsageError(f"{name} is not a Hugging Face checkpoint directory (no config.json)")
    return _from_transformers(name, path.exists(), torch_dtype)


def _from_transformers(name: str, local: bool, dtype: torch.dtype):
    import transformers

    from cbench.artifacts import transformer_lens_adapter as tla

    from transformers.utils import logging as hf_logging

    offline = local or os.environ.get("HF_HUB_OFFLINE", "").strip() not in ("", "0", "false", "False")
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # one line per error, nothing else on stderr
    try:
        hf_model = transformers.AutoModelForCausalLM.from_pretrained(name, dtype=dtype, local_files_only=offline)
    except (OSError, ValueError) as e:
        if local:
            raise UsageError(f"cannot read the checkpoint in {name}: {str(e).splitlines()[0]}") from None
        how = " (HF_HUB_OFFLINE is set: only cached models load)" if offline else ""
        raise UsageError(f"model {name!r} could not be loaded{how}: {str(e).splitlines()[0]}") from None
    finally:
        if bars:
            hf_logging.enable_progress_bar()
    hf_model.eval()
    tokenizer = None
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(name, local_files_only=offline)
    except (OSError, ValueError, TypeError):
        tokenizer = None  # token ids only
    with tempfile.TemporaryDirectory() as tmp:
        source = name
        if local and any(w in name.lower() for w in _NAME_SNIFFED):
            source = os.path.join(tmp, "checkpoint")
            os.symlink(Path(name).resolve(), source)
        arch = (getattr(hf_model.config, "architectures", None) or ["?"])[0]
        cfg_dict = gemma2_config(hf_model.config) if arch == "Gemma2ForCausalLM" else None
        try:
            return tla.from_hf_model(source, hf_model, tokenizer, dtype=dtype, cfg_dict=cfg_dict)
        except (ValueError, KeyError, AttributeError, NotImplementedError) as e:
            raise UnsupportedModelError(f"TransformerLens cannot convert {arch} ({name}): "
                                        f"{str(e).splitlines()[0][:200]}") from None


def gemma2_config(hf) -> dict:
    """TransformerLens's Gemma-2 config from a ``transformers`` ``Gemma2Config`` (TransformerLens
    3.9 has Gemma-2 configs for the hub names only; the same fields as its table, read from the
    checkpoint)."""
    kinds = getattr(hf, "layer_types", None) or ["sliding_attention", "full_attention"] * (hf.num_hidden_layers // 2 + 1)
    rope = getattr(hf, "rope_parameters", None) or {}
    return {
        "model_name": "gemma-2", "original_architecture": "Gemma2ForCausalLM",
        "d_model": hf.hidden_size, "d_head": hf.head_dim, "n_heads": hf.num_attention_heads,
        "n_key_value_heads": hf.num_key_value_heads, "d_mlp": hf.intermediate_size, "n_layers": hf.num_hidden_layers,
        "n_ctx": hf.max_position_embeddings, "eps": hf.rms_norm_eps, "d_vocab": hf.vocab_size,
        "act_fn": getattr(hf, "hidden_activation", None) or "gelu_pytorch_tanh", "normalization_type": "RMS",
        "positional_embedding_type": "rotary", "rotary_dim": hf.head_dim,
        "rotary_base": float(rope.get("rope_theta", getattr(hf, "rope_theta", 10000.0))),
        "use_attn_scale": True, "attn_scale": float(hf.query_pre_attn_scalar) ** 0.5,
        "use_local_attn": True, "window_size": hf.sliding_window,
        "attn_types": ["local" if k == "sliding_attention" else "global" for k in kinds[:hf.num_hidden_layers]],
        "attn_scores_soft_cap": float(hf.attn_logit_softcapping or -1.0),
        "output_logits_soft_cap": float(hf.final_logit_softcapping or -1.0),
        "gated_mlp": True, "final_rms": True, "use_normalization_before_and_after": True,
        "tokenizer_prepends_bos": True,
    }
