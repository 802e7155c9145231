"""The IOI model's architecture (InterpBench's: 6 layers, 4 heads, d_model 64) and a check, without
torch, that a checkpoint file holds weights of that shape: ``cbench build ioi-model --no-train
--checkpoint FILE`` refuses another model's file in a second, before the model code loads."""

from __future__ import annotations

from collections.abc import Mapping

PAPER_ARCHITECTURE = {"n_layers": 6, "n_heads": 4, "d_model": 64, "d_head": 16, "d_mlp": 256}


def expected_shapes(arch: Mapping[str, int] | None = None) -> dict[str, tuple[int | None, ...]]:
    """Shapes of the weights every checkpoint of the model holds (None: any size; the vocabulary
    and context length depend on the data)."""
    a = {**PAPER_ARCHITECTURE, **(arch or {})}
    L, H, D, Dh, M = a["n_layers"], a["n_heads"], a["d_model"], a["d_head"], a["d_mlp"]
    out: dict[str, tuple[int | None, ...]] = {"embed.W_E": (None, D), "pos_embed.W_pos": (None, D),
                                              "unembed.W_U": (D, None)}
    for i in range(L):
        for w in ("W_Q", "W_K", "W_V"):
            out[f"blocks.{i}.attn.{w}"] = (H, D, Dh)
        out[f"blocks.{i}.attn.W_O"] = (H, Dh, D)
        out[f"blocks.{i}.mlp.W_in"] = (D, M)
        out[f"blocks.{i}.mlp.W_out"] = (M, D)
    return out


def checkpoint_problem(header: Mapping, arch: Mapping[str, int] | None = None) -> str | None:
    """What keeps a safetensors header (:func:`cbench.artifacts.serialization.read_safetensors_header`)
    from being a checkpoint of the model, or None."""
    want = expected_shapes(arch)
    shapes = {k: v.get("shape") for k, v in header.items() if k != "__metadata__" and isinstance(v, Mapping)}
    missing = sorted(set(want) - set(shapes))
    if missing:
        return f"{len(missing)} of the model's weights missing (e.g. {missing[0]})"
    n_layers = {k.split(".")[1] for k in shapes if k.startswith("blocks.")}
    if len(n_layers) != len({k.split(".")[1] for k in want if k.startswith("blocks.")}):
        return f"weights of {len(n_layers)} layers, not {({**PAPER_ARCHITECTURE, **(arch or {})})['n_layers']}"
    for k, shape in want.items():
        got = shapes[k]
        if not isinstance(got, list) or len(got) != len(shape) or any(w is not None and g != w
                                                                       for g, w in zip(got, shape)):
            return f"{k} of shape {got}, not {[('any' if w is None else w) for w in shape]}"
    return None
