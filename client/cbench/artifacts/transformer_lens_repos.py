"""Checkpoints in TransformerLens's own layout, which ``transformers`` cannot read: Neel Nanda's
toy models (``attn-only-1l`` .. ``attn-only-4l``, ``gelu-*``, ``solu-*``: the docstring circuit's
model is ``attn-only-4l``) and models saved the same way.

Such a repository holds ``config.json`` in TransformerLens's training layout (``d_model``,
``n_layers``, ``n_heads``, ``d_head``, ``d_mlp``, ``n_ctx``, ``d_vocab``, ``act_fn``,
``attn_only``, ``normalization`` or ``normalization_type``, ``shortformer_pos``, optionally
``tokenizer_name``) and the weights as TransformerLens state-dict keys, in ``model.safetensors``
or a ``*final.pth`` file (read with ``torch.load(weights_only=True)`` in a child process, as
InterpBench's weights are: tensors only, no code, a crash there one line).

:func:`load_transformer_lens_dir` reads a local copy; a TransformerLens model name whose weights
live in such a repository (``attn-only-4l`` -> ``NeelNanda/Attn_Only_4L512W_C4_Code``) is read
from the Hugging Face cache (``snapshot_download``; offline, with ``HF_HUB_OFFLINE=1``, only a
cached snapshot). TransformerLens's own ``from_pretrained`` lists the repository's files over the
network first, so it cannot load these models offline; this does.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from cbench.errors import UsageError

# TransformerLens's model names whose repositories hold TransformerLens-layout weights
NATIVE_ORGS = ("NeelNanda/",)
REQUIRED = ("d_model", "n_layers", "n_heads", "d_head", "n_ctx", "d_vocab", "act_fn")


def _config_json(path: Path) -> dict | None:
    try:
        d = json.loads((path / "config.json").read_text())
    except (OSError, ValueError):
        return None
    return d if isinstance(d, dict) else None


def is_transformer_lens_dir(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a directory in TransformerLens's training layout (its config.json has
    ``d_model``/``n_layers``/``n_heads`` and no ``model_type``, which every ``transformers`` config has)."""
    p = Path(path)
    d = _config_json(p) if p.is_dir() else None
    return d is not None and "model_type" not in d and all(k in d for k in ("d_model", "n_layers", "n_heads"))


def native_repo(name: str) -> str | None:
    """The Hugging Face repository of a TransformerLens model name whose weights are in
    TransformerLens's layout (``attn-only-4l`` -> ``NeelNanda/Attn_Only_4L512W_C4_Code``), else None."""
    from transformer_lens.loading_from_pretrained import get_official_model_name

    try:
        official = get_official_model_name(name)
    except (ValueError, KeyError):
        return None
    return official if official.startswith(NATIVE_ORGS) else None


def hooked_config(d: dict, dtype: torch.dtype) -> dict:
    """The ``HookedTransformerConfig`` fields of a training-layout config.json (the mapping
    TransformerLens's ``convert_neel_model_config`` makes)."""
    missing = [k for k in REQUIRED if k not in d]
    if missing:
        raise UsageError(f"config.json lacks {', '.join(missing)} (a TransformerLens-layout checkpoint needs them)")
    norm = d.get("normalization_type", d.get("normalization"))
    return {
        "d_model": d["d_model"], "n_layers": d["n_layers"], "n_heads": d["n_heads"], "d_head": d["d_head"],
        "d_mlp": d.get("d_mlp") if not d.get("attn_only") else None, "n_ctx": d["n_ctx"], "d_vocab": d["d_vocab"],
        "act_fn": d["act_fn"], "attn_only": bool(d.get("attn_only", False)), "normalization_type": norm,
        "final_rms": bool(d.get("final_rms", False)),
        "positional_embedding_type": "shortformer" if d.get("shortformer_pos") else "standard",
        "tokenizer_name": d.get("tokenizer_name"), "original_architecture": d.get("architecture", "neel"),
        "dtype": str(dtype).replace("torch.", ""), "seed": None,
    }


def _weights(path: Path) -> dict:
    st = path / "model.safetensors"
    if st.is_file():
        from safetensors.torch import load_file

        return load_file(str(st))
    pth = sorted(path.glob("*final.pth"))
    if not pth:
        raise UsageError(f"{path} has no weights (model.safetensors or a *final.pth file)")
    from cbench.artifacts.interpbench_import import read_pth_state_dict

    return read_pth_state_dict(pth[0])  # torch.load(weights_only=True) in a child process


def _tokenizer(path: Path, name: str | None, offline: bool):
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    if (path / "tokenizer.json").is_file():
        return PreTrainedTokenizerFast.from_pretrained(str(path))
    if name:
        try:
            return AutoTokenizer.from_pretrained(name, local_files_only=offline)
        except (OSError, ValueError, TypeError):
            return None  # token ids only
    return None


def load_transformer_lens_dir(path: str | os.PathLike, dtype: torch.dtype = torch.float32, offline: bool = True):
    """A ``HookedTransformer`` (edge hooks on) from a TransformerLens-layout directory: its
    config and weights as they are (no weight processing), its tokenizer when it has one."""
    from cbench.artifacts import transformer_lens_adapter as tla
    from cbench.errors import ArtifactError

    p = Path(path)
    d = _config_json(p)
    if d is None:
        raise UsageError(f"{p} has no readable config.json")
    cfg = hooked_config(d, dtype)
    state = {k: v.to(dtype) if v.is_floating_point() else v for k, v in _weights(p).items()}
    try:
        model = tla.build_model(cfg, state, strict_config=False)
    except ArtifactError as e:
        raise UsageError(f"cannot load {p}: {e}") from None
    tokenizer = _tokenizer(p, cfg["tokenizer_name"], offline)
    if tokenizer is not None:
        model.set_tokenizer(tokenizer, default_padding_side="right")
    return model


def load_native_repo(repo: str, dtype: torch.dtype = torch.float32):
    """The model of ``repo`` (see :func:`native_repo`) through the Hugging Face cache."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    offline = os.environ.get("HF_HUB_OFFLINE", "").strip() not in ("", "0", "false", "False")
    try:
        path = snapshot_download(repo, local_files_only=offline,
                                 allow_patterns=["config.json", "*final.pth", "model.safetensors", "tokenizer*",
                                                 "special_tokens_map.json"])
    except (LocalEntryNotFoundError, HfHubHTTPError, OSError, ValueError) as e:
        how = " (HF_HUB_OFFLINE is set: only cached models load)" if offline else ""
        raise UsageError(f"model {repo!r} could not be loaded{how}: {str(e).splitlines()[0][:200]}") from None
    return load_transformer_lens_dir(path, dtype, offline=offline)
