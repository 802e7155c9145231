"""Hand-set transformers: named subspaces of the residual stream, heads that attend to one
position and copy a variable, MLP neurons with chosen weights, and the unembedding.

Every stress model is a ``HookedTransformer`` without layer norms (``normalization_type=None``)
whose weights are written here, so each mechanism is exact: a head copies what it is told to
copy, with the attention it is told to have, and nothing else. Layout of the residual stream:

* ``tok`` (one dimension per vocabulary token) and ``bos``: the token embedding;
* ``pos`` (one per position) and ``one`` (1 at every position): the positional embedding;
* named slots (:meth:`Kit.slot`), each as wide as the vocabulary, that heads and MLPs write.

A head reads position ``p`` by putting ``one`` in its query and ``pos[p]`` in its key with a
logit gap ``gap`` (after TransformerLens's ``1/sqrt(d_head)``): its attention on ``p`` is
``e^gap / (e^gap + n_ctx - 1)``. Its value reads a slot (``tok`` or another) and its output
adds ``gain`` times that slot's vector into another slot.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch


@dataclass
class Kit:
    vocab: list[str]  # the content tokens (output classes too): ids 1..V; BOS is id 0
    n_ctx: int
    n_layers: int
    n_heads: int
    d_head: int
    d_mlp: int
    d_model: int
    name: str = "stress"
    slots: dict[str, slice] = field(default_factory=dict)
    _next: int = 0
    W: dict[str, np.ndarray] = field(default_factory=dict)
    mlp_used: list[int] = field(default_factory=list)
    floor_W: dict[str, np.ndarray] = field(default_factory=dict)  # what a dense floor added (stress.floors)

    def __post_init__(self):
        V, L, H, dh, dm, D = len(self.vocab), self.n_layers, self.n_heads, self.d_head, self.d_mlp, self.d_model
        if dh < V:
            raise ValueError("d_head must hold a vocabulary-wide value")
        self.W = {
            "embed.W_E": np.zeros((V + 1, D)), "pos_embed.W_pos": np.zeros((self.n_ctx, D)),
            "unembed.W_U": np.zeros((D, V)), "unembed.b_U": np.zeros(V),
        }
        for layer in range(L):
            p = f"blocks.{layer}."
            self.W.update({
                p + "attn.W_Q": np.zeros((H, D, dh)), p + "attn.W_K": np.zeros((H, D, dh)),
                p + "attn.W_V": np.zeros((H, D, dh)), p + "attn.W_O": np.zeros((H, dh, D)),
                p + "attn.b_Q": np.zeros((H, dh)), p + "attn.b_K": np.zeros((H, dh)),
                p + "attn.b_V": np.zeros((H, dh)), p + "attn.b_O": np.zeros(D),
                p + "mlp.W_in": np.zeros((D, dm)), p + "mlp.b_in": np.zeros(dm),
                p + "mlp.W_out": np.zeros((dm, D)), p + "mlp.b_out": np.zeros(D),
            })
        self.mlp_used = [0] * L
        tok = self.slot("tok")
        self.slots["bos"] = self._alloc(1)
        self.slots["one"] = self._alloc(1)
        pos = self._alloc(self.n_ctx)
        self.slots["pos"] = pos
        for i in range(V):
            self.W["embed.W_E"][i + 1, tok.start + i] = 1.0
        self.W["embed.W_E"][0, self.slots["bos"].start] = 1.0
        for p in range(self.n_ctx):
            self.W["pos_embed.W_pos"][p, pos.start + p] = 1.0
            self.W["pos_embed.W_pos"][p, self.slots["one"].start] = 1.0

    # ------------------------------------------------------------------ residual stream
    def _alloc(self, width: int) -> slice:
        s = slice(self._next, self._next + width)
        self._next += width
        if self._next > self.d_model:
            raise ValueError(f"d_model {self.d_model} is too small for the slots asked for")
        return s

    def slot(self, name: str) -> slice:
        """A vocabulary-wide subspace of the residual stream, allocated on first use."""
        if name not in self.slots:
            self.slots[name] = self._alloc(len(self.vocab))
        return self.slots[name]

    # ------------------------------------------------------------------ components
    def head(self, layer: int, h: int, attend: int, read: str, write: str, gain: float = 1.0,
             gap: float = 30.0, key_noise: np.ndarray | None = None) -> None:
        """Head ``a{layer}.h{h}``: every position attends to position ``attend`` with logit gap
        ``gap`` and adds ``gain * resid[read]`` of that position into ``write``."""
        p, V = f"blocks.{layer}.attn.", len(self.vocab)
        one, pos = self.slots["one"].start, self.slots["pos"].start
        scale = math.sqrt(self.d_head)  # TransformerLens divides the scores by sqrt(d_head)
        self.W[p + "W_Q"][h, one, 0] = 1.0
        self.W[p + "W_K"][h, pos + attend, 0] = gap * scale
        if key_noise is not None:  # other positions' keys: small differences (a real model's floor)
            for q, v in enumerate(key_noise):
                if q != attend:
                    self.W[p + "W_K"][h, pos + q, 0] = float(v) * scale
        src, dst = self.slot(read), self.slot(write)
        for i in range(V):
            self.W[p + "W_V"][h, src.start + i, i] = 1.0
            self.W[p + "W_O"][h, i, dst.start + i] += gain

    def neuron(self, layer: int, reads: dict[str, np.ndarray | float], bias: float,
               writes: dict[str, np.ndarray]) -> int:
        """One MLP neuron of ``m{layer}``: ``relu(sum_slot reads[slot] . resid[slot] + bias)``
        times ``writes[slot]`` into each slot (vectors over the vocabulary, or a scalar read of
        the ``one`` slot under the name ``"one"``). Returns the neuron's index."""
        n = self.mlp_used[layer]
        if n >= self.d_mlp:
            raise ValueError(f"m{layer} has no free neuron (d_mlp {self.d_mlp})")
        self.mlp_used[layer] += 1
        p = f"blocks.{layer}.mlp."
        for name, w in reads.items():
            s = self.slots[name] if name in ("one", "bos") else self.slot(name)
            self.W[p + "W_in"][s, n] += np.asarray(w, dtype=np.float64)
        self.W[p + "b_in"][n] = bias
        for name, w in writes.items():
            s = self.slot(name)
            self.W[p + "W_out"][n, s] += np.asarray(w, dtype=np.float64)
        return n

    def unembed(self, read: str, gain: float = 1.0) -> None:
        """Logits read ``gain * resid[read]`` (added to what other slots contribute)."""
        s = self.slot(read)
        for i in range(len(self.vocab)):
            self.W["unembed.W_U"][s.start + i, i] += gain

    # ------------------------------------------------------------------ the model
    def config(self) -> dict:
        return dict(n_layers=self.n_layers, d_model=self.d_model, d_head=self.d_head, n_heads=self.n_heads,
                    d_mlp=self.d_mlp, d_vocab=len(self.vocab) + 1, d_vocab_out=len(self.vocab), n_ctx=self.n_ctx,
                    act_fn="relu", normalization_type=None, attention_dir="bidirectional",
                    positional_embedding_type="standard", original_architecture="cbench-stress",
                    model_name=self.name, default_prepend_bos=False, seed=0, dtype="float32")

    def model(self):
        """The HookedTransformer with these weights (float32)."""
        from cbench.artifacts.transformer_lens_adapter import build_model

        return build_model(self.config(), {k: torch.as_tensor(v, dtype=torch.float32) for k, v in self.W.items()})
