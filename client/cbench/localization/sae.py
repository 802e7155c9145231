"""Sparse autoencoders for the DBM-over-SAE featurizer: one small SAE per hidden vector (site).

No public SAE exists for cbench's models, so each variables model is released with its own
(``saes.safetensors`` beside the weights, trained by the builder with :func:`train_sae` on the
activations of the model's train pairs); for a model without one, the featurizer trains one the
same way, seeded, on the train split's activations.

An SAE of a width-``m`` vector with ``n`` features: ``f(h) = relu((h - b_dec) W_enc + b_enc)``,
``h ≈ f W_dec + b_dec`` (rows of ``W_dec`` of unit norm), trained with Adam on the squared
reconstruction error plus ``l1`` times the mean L1 norm of ``f``. Keys in the file:
``<site key>.<W_enc|b_enc|W_dec|b_dec>``, site keys from :func:`site_key`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import torch

from cbench.errors import ArtifactError

SAE_FILE = "saes.safetensors"
EXPANSION = 4  # features per dimension of the vector


@dataclass
class SAE:
    W_enc: torch.Tensor  # [m, n]
    b_enc: torch.Tensor  # [n]
    W_dec: torch.Tensor  # [n, m]
    b_dec: torch.Tensor  # [m]

    def encode(self, h: torch.Tensor) -> torch.Tensor:
        return torch.relu((h - self.b_dec) @ self.W_enc + self.b_enc)

    def decode(self, f: torch.Tensor) -> torch.Tensor:
        return f @ self.W_dec + self.b_dec

    @property
    def n_features(self) -> int:
        return int(self.W_enc.shape[1])

    def tensors(self, key: str) -> dict[str, torch.Tensor]:
        return {f"{key}.{n}": getattr(self, n).contiguous() for n in ("W_enc", "b_enc", "W_dec", "b_dec")}


def site_key(site) -> str:
    """``mlp_out.0``, ``head_z.1.2``, ``resid_pre.1``: the file's key of a pyvene site."""
    return f"{site.kind}.{site.layer}" + ("" if site.head is None else f".{site.head}")


def train_sae(acts: torch.Tensor, seed: int = 0, steps: int = 400, l1: float = 3e-3, lr: float = 3e-3,
              expansion: int = EXPANSION, batch_size: int = 512) -> tuple[SAE, dict]:
    """An SAE of ``acts`` ``[N, m]`` (seeded; deterministic) and ``{"mse", "l0", "fvu"}`` on them."""
    gen = torch.Generator().manual_seed(int(seed))
    x = acts.detach().float()
    N, m = x.shape
    n = max(1, expansion * m)
    W_dec = torch.randn(n, m, generator=gen)
    W_dec = W_dec / W_dec.norm(dim=1, keepdim=True)
    params = {"W_enc": W_dec.T.clone().requires_grad_(True), "b_enc": torch.zeros(n, requires_grad=True),
              "W_dec": W_dec.clone().requires_grad_(True), "b_dec": x.mean(0).clone().requires_grad_(True)}
    opt = torch.optim.Adam(params.values(), lr=lr)
    scale = float(x.var(0).sum().clamp(min=1e-8))
    for _ in range(int(steps)):
        idx = torch.randint(0, N, (min(batch_size, N),), generator=gen)
        xb = x[idx]
        f = torch.relu((xb - params["b_dec"]) @ params["W_enc"] + params["b_enc"])
        rec = f @ params["W_dec"] + params["b_dec"]
        loss = ((rec - xb) ** 2).sum(1).mean() / scale + l1 * f.abs().sum(1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            params["W_dec"] /= params["W_dec"].norm(dim=1, keepdim=True).clamp(min=1e-8)
    sae = SAE(*(params[k].detach().clone() for k in ("W_enc", "b_enc", "W_dec", "b_dec")))
    with torch.no_grad():
        f = sae.encode(x)
        err = ((sae.decode(f) - x) ** 2).sum(1).mean()
    return sae, {"fvu": round(float(err) / scale, 6), "l0": round(float((f > 0).float().sum(1).mean()), 3),
                 "n_features": n}


def save_saes(path: str | Path, saes: Mapping[str, SAE]) -> Path:
    from safetensors.torch import save_file

    tensors: dict[str, torch.Tensor] = {}
    for key, sae in sorted(saes.items()):
        tensors.update(sae.tensors(key))
    save_file(tensors, str(path), metadata={"format": "cbench-saes/v1"})
    return Path(path)


def load_saes(path: str | Path) -> dict[str, SAE]:
    """Every SAE in a ``saes.safetensors`` file, by site key."""
    from safetensors.torch import load_file

    try:
        t = load_file(str(path))
    except (OSError, ValueError, RuntimeError) as e:  # a damaged file: one clear error
        raise ArtifactError(f"{path}: cannot read the SAEs ({e})") from None
    keys = sorted({k.rsplit(".", 1)[0] for k in t})
    try:
        return {k: SAE(t[f"{k}.W_enc"], t[f"{k}.b_enc"], t[f"{k}.W_dec"], t[f"{k}.b_dec"]) for k in keys}
    except KeyError as e:
        raise ArtifactError(f"{path}: SAE tensor {e} is missing") from None


def artifact_saes(artifact) -> dict[str, SAE]:
    """The SAEs released beside a model artifact (empty when it has none)."""
    path = Path(artifact.path) / SAE_FILE
    return load_saes(path) if path.is_file() else {}
