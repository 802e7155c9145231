"""Dense floors for the stress tier (issue 45, item 2): a background in which every edge outside
the circuit carries a small, non-zero true effect, as in real models, so that a method must rank
effects instead of detecting non-zero ones.

The sparse floor of the first designs (:func:`cbench_builders.stress.designs._floor`: a few
distractor heads copying a token into the answer) gives an effect to about 5 % of the edges outside
the circuit; the other 95 % have an exact effect of 0, and any positive score ranks ahead of them.
:func:`dense_floor` adds, on top of a design's hand-set weights:

* **value taps**: every head's value reads a small random mix of every residual dimension written so
  far (the token, position and every slot), so an edge from any earlier node into a head's ``v``
  carries what that node wrote;
* **answer taps**: every head writes a small random vector of its value into the answer slot, so
  every head's output reaches the logits directly (its edge to ``logits``) and through any later
  head or MLP that reads it;
* **query and key taps** on a dimension no mechanism uses: small random reads of the residual, so
  the attention of heads that are not saturated moves with every edge into their ``q`` and ``k``;
* **floor neurons** on free MLP slots: always active (bias 1), reading a small random mix of the
  residual and writing a small random vector into the answer, so every edge into an MLP and the
  MLP's edge to the logits carry an effect.

All taps are ``scale`` (default 0.03) times standard normal numbers from ``seed``. The added weights
are kept in ``Kit.floor_W`` (name -> the array added), so a high-level model (a SIIT counterpart's)
can take them out again. The floor gate (``floor_share_above_resolution``,
:mod:`cbench.verify.mechanisms`) measures the share of outside edges whose exact patching score is
above the numerical resolution; edges that cannot carry one are named by the design (e.g. ``q``/``k``
edges into a head whose attention is saturated on one position: the softmax's derivative there is
about ``e^-gap``).
"""

from __future__ import annotations

import numpy as np

from cbench_builders.stress.kit import Kit

QK_DIM = -1  # the last query/key dimension: no hand-set head uses it (they use 0 and 1)
WIDTH = 4  # the floor channel's dimensions
CHANNEL_READ = 0.3  # how strongly a tap reads the channel itself, relative to other dimensions


def dense_floor(k: Kit, seed: int, read: float = 0.3, write: float = 1.0, out: float = 0.1, qk: float = 0.5,
                n_neurons: int = 2, quiet: dict[str, float] | None = None) -> None:
    """Give every edge of ``k`` outside its hand-set mechanism a small first-order effect, in place.

    A **floor channel** (a ``WIDTH``-dimensional slot ``floor``) carries it: every head reads the
    residual (every dimension written so far, the channel included) with weights ``read`` into its
    spare value dimensions (``d_head - len(vocab)`` of them, at least one) and writes them into the
    channel with weights ``write``; ``n_neurons`` floor neurons per MLP (always active: bias 1) do the
    same; the logits read the channel with weights ``out``; every head's query and key read the
    residual on their last dimension with weights ``qk`` (it moves the attention of heads that are not
    saturated on one position). Weights are those scales times standard normal numbers from ``seed``.
    ``quiet`` scales the reads of some slots (a decoy's loud slot at ``1/gain``). The added arrays are
    kept in ``k.floor_W`` (a high-level model can take them out again)."""
    rng = np.random.default_rng(seed)
    V = len(k.vocab)
    spare = np.arange(V, k.d_head)
    if len(spare) == 0:
        raise ValueError("a dense floor needs d_head > len(vocab): one spare value dimension at least")
    written = np.arange(k._next)
    weight = np.ones(len(written))
    for slot, factor in (quiet or {}).items():
        weight[k.slots[slot]] = factor
    if "floor" not in k.slots:
        k.slots["floor"] = k._alloc(WIDTH)
    ch = np.arange(k.slots["floor"].start, k.slots["floor"].stop)
    reads = np.concatenate([written, ch])
    w_reads = np.concatenate([weight, np.full(len(ch), CHANNEL_READ)])  # the channel read weakly: no growth with depth
    added: dict[str, np.ndarray] = {}

    def add(name: str, index, values) -> None:
        delta = np.zeros_like(k.W[name])
        delta[index] = values
        k.W[name] += delta
        added[name] = added.get(name, 0) + delta

    for layer in range(k.n_layers):
        p = f"blocks.{layer}.attn."
        for h in range(k.n_heads):
            add(p + "W_V", (h, reads[:, None], spare[None, :]),
                read * w_reads[:, None] * rng.standard_normal((len(reads), len(spare))))
            add(p + "W_O", (h, spare[:, None], ch[None, :]), write * rng.standard_normal((len(spare), len(ch))))
            add(p + "W_Q", (h, reads, QK_DIM), qk * w_reads * rng.standard_normal(len(reads)))
            add(p + "W_K", (h, reads, QK_DIM), qk * w_reads * rng.standard_normal(len(reads)))
        m = f"blocks.{layer}.mlp."
        for _ in range(n_neurons):
            n = k.mlp_used[layer]
            if n >= k.d_mlp:
                break
            k.mlp_used[layer] += 1
            add(m + "W_in", (reads, n), read * w_reads * rng.standard_normal(len(reads)))
            add(m + "b_in", (n,), 1.0)
            add(m + "W_out", (n, ch), write * rng.standard_normal(len(ch)))
    add("unembed.W_U", (ch[:, None], np.arange(V)[None, :]), out * rng.standard_normal((len(ch), V)))
    for name, v in added.items():
        k.floor_W[name] = k.floor_W.get(name, 0) + np.asarray(v)
