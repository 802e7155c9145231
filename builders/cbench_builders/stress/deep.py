"""Mechanism (i) of the stress tier, a large, deep circuit: several tokens each relayed through
every layer by a chain of heads and MLP neurons, then combined by a weighted vote.

Chain c carries the token at position ``p_c``. In layer 0 its head copies that token into a slot;
in each later layer the chain's head reads the slot the previous head wrote *and* the copy that
MLP neurons of the previous layer made of it (half of each), so both edges into the head carry
the token; the last layer's heads write it into the answer with weight ``w_c``. The answer is the
token with the largest total weight. Every edge of every chain changes the answer on some inputs
(the gates check each against the floor), every head sits in the circuit, and the circuit spans
every layer. The floor: each chain head also writes its token straight into the answer with a
small gain, so the heads' direct edges to the logits have small, non-zero effects."""

from __future__ import annotations

import numpy as np

from cbench_builders.stress.designs import ANSWER_GAIN, V, Prediction, StressDesign, _kit, _qk_marks


def _two_slot_head(k, layer: int, h: int, attend: int, a: str, b: str) -> None:
    """Head ``a{layer}.h{h}`` attends to ``attend`` (logit gap 30) with a value that reads slot
    ``a`` plus slot ``b``; its outputs are set by :func:`_write`."""
    p = f"blocks.{layer}.attn."
    one, pos = k.slots["one"].start, k.slots["pos"].start
    k.W[p + "W_Q"][h, one, 0] = 1.0
    k.W[p + "W_K"][h, pos + attend, 0] = 30.0 * np.sqrt(k.d_head)
    for slot in (a, b):
        s = k.slot(slot)
        for i in range(V):
            k.W[p + "W_V"][h, s.start + i, i] = 1.0


def _write(k, layer: int, h: int, dst: str, gain: float) -> None:
    """Add ``gain`` times head ``a{layer}.h{h}``'s value into slot ``dst``."""
    s = k.slot(dst)
    for i in range(V):
        k.W[f"blocks.{layer}.attn.W_O"][h, i, s.start + i] += gain


def _chains(name: str, n_layers: int, positions: list[int], weights: list[float], seed: int) -> StressDesign:
    n = len(positions)
    k = _kit(n_layers, n_heads=n, d_mlp=V * n, d_model=16 + 2 * n_layers * n * V)
    rng = np.random.default_rng(seed)
    edges: dict[str, str] = {}
    for c, pos in enumerate(positions):
        for layer in range(n_layers):
            head = f"a{layer}.h{c}"
            if layer == 0:
                k.head(layer, c, attend=pos, read="tok", write=f"R0_{c}")
                edges[f"input->{head}<v>"] = "chain"
            else:  # the value reads the previous head's slot plus the MLP's copy of it: half of each
                _two_slot_head(k, layer, c, pos, f"R{layer - 1}_{c}", f"M{layer - 1}_{c}")
                edges[f"a{layer - 1}.h{c}->{head}<v>"] = "chain"
                edges[f"m{layer - 1}->{head}<v>"] = "chain"
            dst = f"R{layer}_{c}" if layer < n_layers - 1 else "ans"
            gain = 1.0 if layer == 0 else 0.5 * (weights[c] if dst == "ans" else 1.0)
            _write(k, layer, c, dst, gain)
            if layer < n_layers - 1:  # the MLP's copy for the next layer (relu of a non-negative one-hot)
                for v in range(V):
                    e = np.eye(V)[v]
                    k.neuron(layer, {f"R{layer}_{c}": e}, 0.0, {f"M{layer}_{c}": e})
                edges[f"{head}->m{layer}"] = "chain"
                # the floor: a small direct write of the carried token into the answer
                _write(k, layer, c, "ans", float(rng.uniform(0.001, 0.003)))
            else:
                edges[f"{head}->logits"] = "chain"
    k.unembed("ans", ANSWER_GAIN)
    heads = [f"a{layer}.h{c}" for layer in range(n_layers) for c in range(n)]
    chains = {f"chain{c}": [e for e in edges if e.endswith(f".h{c}") or f".h{c}<" in e or f".h{c}->" in e]
              for c in range(n)}
    return StressDesign(
        name, "deep",
        f"A large, deep circuit: {n} tokens each relayed through all {n_layers} layers by a chain of heads and "
        f"MLP neurons ({len(edges)} edges with signal), combined by a weighted vote (weights "
        f"{', '.join(f'{w:g}' for w in weights)}).",
        k, edges, _qk_marks(heads),
        [{"kind": "deep", "chains": chains, "min_edges": 50, "min_layers": n_layers, "chain_min": 0.05}],
        {
            "activation-patching": Prediction("pass", "every edge's exact effect is above the floor"),
            "acdc": Prediction("pass", "exact evaluations; each edge changes the KL on its own"),
            "eap": Prediction("pass", "the chains are linear but for the relay neurons' kink, which halves the "
                                      "estimate of an MLP branch and keeps it far above the floor"),
            "eap-ig-inputs": Prediction("pass", "as EAP"), "eap-ig-activations": Prediction("pass", "as EAP"),
            "nap": Prediction("partial", "node scores give every edge between two circuit nodes a high score, and "
                                         "most edges between this circuit's nodes (across chains) are outside it"),
            "sp": Prediction("partial", "node masks: as NAP, every edge between kept nodes counts as found"),
            "edge-sp": Prediction("partial", "a sparsity penalty over this many edges trades away the lightest "
                                             "chain's edges"),
        })


def deep_1() -> StressDesign:
    """Three chains through seven layers: 60 edges with signal."""
    return _chains("stress-deep-1", 7, [1, 2, 3], [1.0, 0.7, 0.45], seed=19)


def deep_2() -> StressDesign:
    """Four chains through six layers: 68 edges with signal."""
    return _chains("stress-deep-2", 6, [1, 2, 3, 4], [1.0, 0.75, 0.5, 0.35], seed=20)
