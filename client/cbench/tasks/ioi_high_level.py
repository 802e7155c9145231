"""The high-level causal model of IOI (InterpBench section 4): duplicate-token head, S-inhibition
head, name mover, on cbench's word-level IOI vocabulary.

Variables (per position ``i`` of ``tokens`` ``[B, P]``, BOS at position 0):

* ``duplicate[i]`` -- the last earlier position holding the same token as ``i``, else -1;
* ``s_inhibition[i]`` -- the token at ``duplicate[i]`` where it is not -1 (the name to inhibit),
  else -1;
* ``name_mover`` -- output logits ``[B, P, d_vocab]``: the running sum over positions ``j <= i``
  of +10 on ``tokens[j]`` when it is a name, and -15 on ``s_inhibition[j]`` where it is not -1.

On "When Mary and John went to the store, John gave the drink to" the last position's logits
are Mary +10, John +20 - 15 = +5 (the second John is a duplicate of the first), so the
prediction is the indirect object. The high-level edges: input -> each node,
duplicate -> S-inhibition, S-inhibition -> name mover, name mover -> output.

The model is written as a three-layer, one-head "transformer" so that cbench's interchange code
treats it like a compiled Tracr model: the nodes are ``a0.h0`` (duplicate), ``a1.h0``
(S-inhibition) and ``a2.h0`` (name mover), each exposed at ``blocks.L.attn.hook_z`` as
``[B, P, 1, width]`` (width 1 for the two position/token variables, stored as floats, which are
exact for these integers; ``d_vocab`` for the name mover). :func:`cbench.tasks.interchange.run_interchanged`
and ``run_with_cache`` work on it through those hooks (what ``cbench verify`` uses), and
``forward(tokens, source, mask)`` interchanges per example by masks without hooks (what SIIT
training uses: the same protocol as ``cbench_builders.siit.interchange.ComponentForward``). Its
output at the last position is what a low-level model is trained and verified against; at the
other positions its running sums have no meaning for the task (the low-level model predicts the
next word there).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import torch

from cbench.errors import ArtifactError
from cbench.artifacts.transformer_lens_adapter import HookedRootModule, HookPoint

NODES = {"duplicate": "a0.h0", "s_inhibition": "a1.h0", "name_mover": "a2.h0"}
EDGES = ("input->a0.h0", "input->a1.h0", "input->a2.h0", "a0.h0->a1.h0", "a1.h0->a2.h0", "a2.h0->logits")
NAME_BONUS = 10.0
INHIBITION = -15.0
HIGH_LEVEL_KIND = "ioi"  # meta.json "high_level": {"kind": "ioi", ...}


def duplicate_positions(tokens: torch.Tensor) -> torch.Tensor:
    """``[B, P]``: the last earlier position with the same token, else -1."""
    B, P = tokens.shape
    same = tokens[:, :, None] == tokens[:, None, :]  # [B, i, j]
    earlier = torch.ones(P, P, dtype=torch.bool).tril(-1)
    match = same & earlier
    pos = torch.arange(P).expand(B, P, P)
    return torch.where(match, pos, torch.full_like(pos, -1)).amax(-1)


def inhibited_tokens(tokens: torch.Tensor, duplicate: torch.Tensor) -> torch.Tensor:
    """``[B, P]``: the token at ``duplicate`` where it is not -1, else -1."""
    took = tokens.gather(1, duplicate.clamp(min=0))
    return torch.where(duplicate >= 0, took, torch.full_like(took, -1))


def name_mover_logits(tokens: torch.Tensor, inhibited: torch.Tensor, is_name: torch.Tensor) -> torch.Tensor:
    """``[B, P, d_vocab]``: running sums of +10 on each name seen and -15 on each inhibited token."""
    V = is_name.shape[0]
    step = torch.zeros(*tokens.shape, V)
    step.scatter_(2, tokens[..., None], (NAME_BONUS * is_name[tokens].float())[..., None])
    inh = inhibited.clamp(min=0)[..., None]
    step.scatter_add_(2, inh, (INHIBITION * (inhibited >= 0).float())[..., None])
    return step.cumsum(1)


@dataclass
class IOIActs:
    """The node values of a source batch, as ``z[layer]`` ``[B, P, 1, width]``."""

    z: list[torch.Tensor]

    def index(self, idx: torch.Tensor) -> "IOIActs":
        return IOIActs([z[idx] for z in self.z])


class _Attn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.hook_z = HookPoint()


class _Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = _Attn()


class IOIHighLevel(HookedRootModule):
    """The IOI causal model over a vocabulary of ``d_vocab`` tokens of which ``name_ids`` are names."""

    component_forward = True  # speaks the SIIT trainer's component protocol itself

    def __init__(self, d_vocab: int, name_ids: Sequence[int]):
        super().__init__()
        self.d_vocab = int(d_vocab)
        is_name = torch.zeros(self.d_vocab, dtype=torch.bool)
        ids = torch.as_tensor(list(name_ids), dtype=torch.long)
        if len(ids) == 0 or int(ids.min()) < 0 or int(ids.max()) >= self.d_vocab:
            raise ArtifactError(f"IOI high-level model: name ids must be in [0, {self.d_vocab})")
        is_name[ids] = True
        self.register_buffer("is_name", is_name, persistent=False)
        self.blocks = torch.nn.ModuleList([_Block() for _ in NODES])
        self.names = list(NODES.values())  # mask columns, as ComponentForward's
        self.index = {n: i for i, n in enumerate(self.names)}
        self.setup()

    @classmethod
    def from_meta(cls, meta: Mapping) -> "IOIHighLevel":
        """From a model's ``meta.json``: ``input_tokens`` and ``high_level.name_tokens``."""
        hl = meta.get("high_level") or {}
        if hl.get("kind") != HIGH_LEVEL_KIND:
            raise ArtifactError(f"case {meta.get('case')}: meta.json names no IOI high-level model")
        tokens = list(meta["input_tokens"])
        where = {t: i for i, t in enumerate(tokens)}
        missing = [n for n in hl.get("name_tokens", []) if n not in where]
        if missing or not hl.get("name_tokens"):
            raise ArtifactError(f"case {meta.get('case')}: IOI name tokens missing from the vocabulary: {missing[:5]}")
        return cls(len(tokens), [where[n] for n in hl["name_tokens"]])

    def forward(self, tokens: torch.Tensor, source: IOIActs | None = None, mask: torch.Tensor | None = None,
                collect: bool = False):
        """Logits ``[B, P, d_vocab]``; where ``mask[b, c]`` is set (columns :attr:`names`), node ``c``
        of example ``b`` takes its value from ``source`` (and downstream nodes see it). With
        ``collect`` returns ``(logits, IOIActs)``."""
        tokens = torch.as_tensor(tokens, dtype=torch.long)
        B, P = tokens.shape

        def node(layer: int, value: torch.Tensor) -> torch.Tensor:
            z = self.blocks[layer].attn.hook_z(value.reshape(B, P, 1, -1).float())
            if mask is not None and source is not None:
                z = torch.where(mask[:, layer, None, None, None], source.z[layer], z)
            return z

        dup = node(0, duplicate_positions(tokens))
        inh = node(1, inhibited_tokens(tokens, dup[:, :, 0, 0].round().long()))
        nm = node(2, name_mover_logits(tokens, inh[:, :, 0, 0].round().long(), self.is_name))
        logits = nm[:, :, 0, :]
        if collect:
            return logits, IOIActs([dup, inh, nm])
        return logits

    def acts(self, tokens: torch.Tensor) -> IOIActs:
        """Every node's value on ``tokens`` (the source cache of an interchange)."""
        with torch.no_grad():
            return self.forward(tokens, collect=True)[1]

    def mask(self, batch: int, columns: Mapping[str, torch.Tensor | bool] | None = None) -> torch.Tensor:
        m = torch.zeros(batch, len(self.names), dtype=torch.bool)
        for n, sel in (columns or {}).items():
            m[:, self.index[n]] = sel
        return m


def last_position_valid(tokens: torch.Tensor) -> torch.Tensor:
    """``[B, P]`` valid mask of an IOI batch: only the last position (the answer) is scored."""
    valid = torch.zeros(tokens.shape, dtype=torch.bool)
    valid[:, -1] = True
    return valid
