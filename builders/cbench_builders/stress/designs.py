"""The stress tier's models, one function per model: each plants one mechanism that makes real
models hard for circuit discovery, with hand-set weights so that the mechanism is exact.

Every model reads a sequence ``BOS x1 x2 x3 x4`` of tokens from an 8-token vocabulary,
bidirectionally, and answers at every position (the answer depends on the tokens, not on the
position). Heads read fixed positions (their queries and keys carry position only, which base
and source share under resample ablation: those q/k edges are marked without signal). Each model
also has a **floor**: distractor heads that copy other positions straight into the answer with
small gains, so edges outside the circuit have small, measured, non-zero effects, as in real
models, and a method must rank effects rather than detect non-zero ones.

Each design carries its ground truth (every circuit edge with its class), the mechanism's gate
spec (checked by ``cbench verify``, :mod:`cbench.verify.mechanisms`), and the **predictions**:
which methods should fail on it and why, written before any bench run (the bench reports where
they held, and a prediction that failed is reported, not tuned away).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cbench_builders.stress.kit import Kit

VOCAB = list("abcdefgh")
V = len(VOCAB)
N_CTX = 5  # BOS + x1..x4
ANSWER_GAIN = 10.0  # logits of the answer slot: far above the floor's gains


@dataclass
class Prediction:
    expect: str  # "fail" (edge AUROC <= 0.75), "pass" (>= 0.90) or "partial" (in between)
    why: str


@dataclass
class StressDesign:
    name: str  # the repository name, e.g. stress-or-1
    mechanism: str  # redundancy, backup, negative, cancellation, saturation, and, decoy, distributed
    description: str
    kit: Kit
    edges: dict[str, str]  # circuit edge -> class (primary, redundant, backup, negative, gate, ...)
    marked: dict[str, str] = field(default_factory=dict)  # circuit edges without signal -> why
    gates: list[dict] = field(default_factory=list)  # the mechanism gates (cbench.verify.mechanisms)
    predictions: dict[str, Prediction] = field(default_factory=dict)
    construction: str = "hand-set weights"
    floor: dict | None = None  # a dense floor's gate: {"min_share": x} (cbench_builders.stress.floors)
    contexts: dict[str, list[list[str]]] = field(default_factory=dict)  # edge -> ablation contexts where it is needed


def _kit(n_layers: int, n_heads: int = 4, d_mlp: int = 32, d_model: int = 96) -> Kit:
    return Kit(vocab=VOCAB, n_ctx=N_CTX, n_layers=n_layers, n_heads=n_heads, d_head=V, d_mlp=d_mlp,
               d_model=d_model)


def _qk_marks(heads: list[str]) -> dict[str, str]:
    why = "reads position only (every query attends to a fixed position), which base and source share"
    return {f"input->{h}<{x}>": why for h in heads for x in "qk"}


def _floor(kit: Kit, free: list[tuple[int, int]], seed: int, low: float = 0.02, high: float = 0.08) -> None:
    """Distractor heads on the ``free`` (layer, head) slots: each copies a random position's
    token into the answer with a small gain (``low``..``high`` of a unit answer)."""
    rng = np.random.default_rng(seed)
    for layer, h in free:
        kit.head(layer, h, attend=int(rng.integers(1, N_CTX)), read="tok", write="ans",
                 gain=float(rng.uniform(low, high)))


def _vote_readout(kit: Kit, layer: int, slot: str, need: int) -> None:
    """``m{layer}``: per token v, clamp(s_v - need + 1, 0, 1) of ``slot`` into the answer: the
    answer is v when at least ``need`` voters say v; more voters change nothing (saturation)."""
    for v in range(V):
        e = np.eye(V)[v]
        kit.neuron(layer, {slot: e}, -(need - 1.0), {"ans": e})
        kit.neuron(layer, {slot: e}, -float(need), {"ans": -e})


def _edges(cls: str, *names: str) -> dict[str, str]:
    return {n: cls for n in names}


# ---------------------------------------------------------------------------- (a) redundancy
def or_1() -> StressDesign:
    """Three heads of layer 0 copy x1; m1 answers when two agree (two of three suffice)."""
    k = _kit(2)
    heads = ["a0.h0", "a0.h1", "a0.h2"]
    for h in range(3):
        k.head(0, h, attend=1, read="tok", write="vote")
    _vote_readout(k, 1, "vote", need=2)
    k.unembed("ans", ANSWER_GAIN)
    _floor(k, [(0, 3), (1, 0), (1, 1), (1, 2), (1, 3)], seed=1)
    edges = {**_edges("redundant", *(f"input->{h}<v>" for h in heads), *(f"{h}->m1" for h in heads)),
             **_edges("primary", "m1->logits")}
    paths = {h: [f"input->{h}<v>", f"{h}->m1"] for h in heads}
    return StressDesign(
        "stress-or-1", "redundancy",
        "Three heads copy the first token and a saturating readout answers as soon as two of them agree: "
        "each path alone is unnecessary, any two together are necessary.",
        k, edges, _qk_marks(heads),
        [{"kind": "redundancy", "groups": paths, "need": 2, "alone_max": 0.05, "together_min": 0.5}],
        _redundancy_predictions())


def or_2() -> StressDesign:
    """The three redundant paths across layers 0, 1 and 2, each reading the input directly."""
    k = _kit(3)
    heads = ["a0.h0", "a1.h1", "a2.h2"]
    for layer, h in ((0, 0), (1, 1), (2, 2)):
        k.head(layer, h, attend=2, read="tok", write="vote")
    _vote_readout(k, 2, "vote", need=2)
    k.unembed("ans", ANSWER_GAIN)
    _floor(k, [(0, 1), (0, 3), (1, 0), (1, 3), (2, 0), (2, 3)], seed=2)
    edges = {**_edges("redundant", *(f"input->{h}<v>" for h in heads), *(f"{h}->m2" for h in heads)),
             **_edges("primary", "m2->logits")}
    paths = {h: [f"input->{h}<v>", f"{h}->m2"] for h in heads}
    return StressDesign(
        "stress-or-2", "redundancy",
        "Three heads in three different layers copy the second token; the readout answers when two agree.",
        k, edges, _qk_marks(heads),
        [{"kind": "redundancy", "groups": paths, "need": 2, "alone_max": 0.05, "together_min": 0.5}],
        _redundancy_predictions())


def _redundancy_predictions() -> dict[str, Prediction]:
    single = ("every redundant edge ablated alone changes nothing (the readout saturates), so a "
              "single-edge estimate is 0 for all of them")
    return {
        "activation-patching": Prediction("fail", "exact single-edge patching: " + single),
        "eap": Prediction("fail", "the gradient at the clean point is 0 past the readout's upper kink: " + single),
        "nap": Prediction("fail", "node attribution at the clean point: the same zero gradient"),
        "eap-ig-inputs": Prediction("pass", "integrating from the ablated input crosses the readout's "
                                            "thresholds, where the gradient is not 0"),
        "eap-ig-activations": Prediction("pass", "as EAP-IG over inputs, per layer"),
        "acdc": Prediction("partial", "prunes the first redundant path it visits (its removal changes "
                                      "nothing while the others hold), keeps the rest"),
        "sp": Prediction("partial", "a sparsity penalty keeps two of three paths"),
        "edge-sp": Prediction("partial", "a sparsity penalty keeps two of three paths"),
        "ugs": Prediction("pass", "random joint masks ablate paths together, where each one matters"),
    }


# ---------------------------------------------------------------------------- (b) backup
def _backup(k: Kit, primary_layer: int, detector_layer: int, attend: int, heads: dict[str, tuple[int, int]]):
    """Primary ``P`` copies x_attend into slot A, read by the answer (gain 1) and by a detector; two
    reference heads R1, R2 copy the same token; the backup MLP writes ``ANSWER``-sized votes for v
    when both references say v and A does not: silent on clean runs, it answers when P is ablated."""
    lp, hp = heads["P"]
    k.head(lp, hp, attend=attend, read="tok", write="A")
    k.unembed("A", 1.0)
    for r in ("R1", "R2"):
        layer, h = heads[r]
        k.head(layer, h, attend=attend, read="tok", write=r)
    for v in range(V):
        e = np.eye(V)[v]
        k.neuron(detector_layer, {"R1": e, "R2": e, "A": -e}, -1.0, {"ans": 3.0 * e})


def backup_1() -> StressDesign:
    k = _kit(1)
    heads = {"P": (0, 0), "R1": (0, 1), "R2": (0, 2)}
    _backup(k, 0, 0, 1, heads)
    k.unembed("ans", 1.0)
    _floor(k, [(0, 3)], seed=3, low=0.01, high=0.03)
    edges = {**_edges("primary", "input->a0.h0<v>", "a0.h0->logits"),
             **_edges("backup", "a0.h0->m0", "input->a0.h1<v>", "a0.h1->m0", "input->a0.h2<v>", "a0.h2->m0",
                      "m0->logits")}
    return StressDesign(
        "stress-backup-1", "backup",
        "A primary head copies the first token into the answer; a backup MLP, silent on clean runs, "
        "writes the answer when the primary's output disagrees with two reference heads (as IOI's backup "
        "name movers take over when the name movers are ablated).",
        k, edges, _qk_marks(["a0.h0", "a0.h1", "a0.h2"]),
        [{"kind": "backup", "primary": ["input->a0.h0<v>"], "backup": ["m0->logits"], "alone_max": 0.01,
          "together_min": 0.5}],
        _backup_predictions())


def backup_2() -> StressDesign:
    """The primary is a two-step path (a0.h0 moves x3 to position 1's slot T, a1.h0 reads it there),
    the references and the backup MLP sit in layer 1."""
    k = _kit(2)
    k.head(0, 0, attend=3, read="tok", write="T")
    k.head(1, 0, attend=1, read="T", write="A")  # every position reads T at position 1 (= x3)
    k.unembed("A", 1.0)
    k.head(1, 1, attend=3, read="tok", write="R1")
    k.head(1, 2, attend=3, read="tok", write="R2")
    for v in range(V):
        e = np.eye(V)[v]
        k.neuron(1, {"R1": e, "R2": e, "A": -e}, -1.0, {"ans": 3.0 * e})
    k.unembed("ans", 1.0)
    _floor(k, [(0, 1), (0, 2), (0, 3), (1, 3)], seed=4, low=0.01, high=0.03)
    edges = {**_edges("primary", "input->a0.h0<v>", "a0.h0->a1.h0<v>", "a1.h0->logits"),
             **_edges("backup", "a1.h0->m1", "input->a1.h1<v>", "a1.h1->m1", "input->a1.h2<v>", "a1.h2->m1",
                      "m1->logits")}
    return StressDesign(
        "stress-backup-2", "backup",
        "A two-step primary path moves the third token into the answer; a backup MLP takes over when it "
        "is ablated.",
        k, edges, _qk_marks(["a0.h0", "a1.h0", "a1.h1", "a1.h2"]),
        [{"kind": "backup", "primary": ["a0.h0->a1.h0<v>"], "backup": ["m1->logits"], "alone_max": 0.01,
          "together_min": 0.5}],
        _backup_predictions())


def _backup_predictions() -> dict[str, Prediction]:
    silent = "the backup's output is exactly 0 on clean and on ablated runs, so it scores 0 alone"
    return {
        "activation-patching": Prediction("fail", silent + " (the primary is found: it moves the logits)"),
        "eap": Prediction("fail", "the backup neurons sit at their kink on clean runs (gradient 0): " + silent),
        "nap": Prediction("fail", "the same zero gradient at the backup neurons"),
        "eap-ig-inputs": Prediction("fail", "along the path from ablated to clean, primary and references "
                                            "move together, so the backup never fires"),
        "eap-ig-activations": Prediction("fail", "as over inputs"),
        "acdc": Prediction("fail", "removes the backup first (no change while the primary holds), then has "
                                   "no reason to keep its inputs"),
        "sp": Prediction("fail", "the primary alone reproduces the clean outputs, so sparsity drops the backup"),
        "edge-sp": Prediction("fail", "as node SP"),
        "ugs": Prediction("pass", "random joint masks ablate the primary together with the backup's "
                                  "inputs, where the backup matters"),
    }


# ---------------------------------------------------------------------------- (c) negative components
def neg_1() -> StressDesign:
    """P writes the answer with gain 2, N (another head) writes it with gain -1: N pushes against the
    answer on every input without ever flipping it."""
    k = _kit(1)
    k.head(0, 0, attend=1, read="tok", write="ans", gain=2.0)
    k.head(0, 1, attend=1, read="tok", write="ans", gain=-1.0)
    k.unembed("ans", ANSWER_GAIN / 4)
    _floor(k, [(0, 2), (0, 3)], seed=5, low=0.01, high=0.03)
    edges = {**_edges("primary", "input->a0.h0<v>", "a0.h0->logits"),
             **_edges("negative", "input->a0.h1<v>", "a0.h1->logits")}
    return StressDesign(
        "stress-neg-1", "negative",
        "A head copies the first token into the answer and another head suppresses the same token "
        "(half as strongly): a component that is part of the computation and works against the answer.",
        k, edges, _qk_marks(["a0.h0", "a0.h1"]),
        [{"kind": "negative", "component": ["a0.h1->logits"], "min_fraction": 0.95}],
        _negative_predictions())


def neg_2() -> StressDesign:
    """Copy suppression: N (layer 1) reads what P (layer 0) wrote at position 1 and suppresses it."""
    k = _kit(2)
    k.head(0, 0, attend=2, read="tok", write="A")
    k.unembed("A", ANSWER_GAIN / 2)
    k.head(1, 0, attend=2, read="A", write="ans", gain=-1.0)  # reads P's output (V-composition)
    k.unembed("ans", ANSWER_GAIN / 4)
    _floor(k, [(0, 1), (0, 3), (1, 2), (1, 3)], seed=6, low=0.01, high=0.03)
    edges = {**_edges("primary", "input->a0.h0<v>", "a0.h0->logits"),
             **_edges("negative", "a0.h0->a1.h0<v>", "a1.h0->logits")}
    return StressDesign(
        "stress-neg-2", "negative",
        "Copy suppression: a later head reads the token an earlier head copied into the answer and "
        "writes against it (McDougall et al. 2023).",
        k, edges, _qk_marks(["a0.h0", "a1.h0"]),
        [{"kind": "negative", "component": ["a1.h0->logits"], "min_fraction": 0.95}],
        _negative_predictions())


def _negative_predictions() -> dict[str, Prediction]:
    return {
        "ifr": Prediction("fail", "the suppressing head's output points away from the residual it writes "
                                  "to, so its proximity (IFR's importance) is low"),
        "activation-patching": Prediction("pass", "its ablation moves the answer's logit measurably"),
        "eap": Prediction("pass", "linear in the suppressing head; ranked by magnitude"),
        "eap-ig-inputs": Prediction("pass", "linear"), "eap-ig-activations": Prediction("pass", "linear"),
        "acdc": Prediction("pass", "removing it changes the outputs' KL beyond the threshold"),
        "nap": Prediction("pass", "linear"),
    }


# ---------------------------------------------------------------------------- (d) cancellation
def cancel_1() -> StressDesign:
    """D writes x1 into the answer directly and into slot B, which m0 subtracts from the answer: D's
    direct and indirect effects cancel exactly, while each of its edges alone moves the answer."""
    k = _kit(1)
    k.head(0, 0, attend=2, read="tok", write="ans", gain=0.5)  # P: the answer (x2)
    k.head(0, 1, attend=1, read="tok", write="ans", gain=1.0)  # D, direct: +x1
    k.head(0, 1, attend=1, read="tok", write="B", gain=1.0)    # D, into B (the same head)
    for v in range(V):
        e = np.eye(V)[v]
        k.neuron(0, {"B": e}, 0.0, {"ans": -e})  # indirect: -x1
    k.unembed("ans", ANSWER_GAIN / 2)
    _floor(k, [(0, 2), (0, 3)], seed=7, low=0.005, high=0.02)
    edges = {**_edges("primary", "input->a0.h0<v>", "a0.h0->logits"),
             **_edges("cancelling", "input->a0.h1<v>", "a0.h1->logits", "a0.h1->m0", "m0->logits")}
    return StressDesign(
        "stress-cancel-1", "cancellation",
        "A head's direct effect on the answer and its indirect effect through an MLP cancel exactly: the "
        "head as a whole does nothing, while each of its edges alone changes the answer.",
        k, edges, _qk_marks(["a0.h0", "a0.h1"]),
        [{"kind": "cancellation", "a": ["a0.h1->logits"], "b": ["a0.h1->m0"], "each_min": 0.3,
          "together_max": 0.01}],
        _cancellation_predictions())


def cancel_2() -> StressDesign:
    """The indirect path runs through a layer-1 head and MLP (D in layer 0, its cancellation two steps
    later); the answer is x3."""
    k = _kit(2)
    k.head(0, 0, attend=3, read="tok", write="ans", gain=0.5)
    k.head(0, 1, attend=4, read="tok", write="ans", gain=1.0)
    k.head(0, 1, attend=4, read="tok", write="B", gain=1.0)
    k.head(1, 0, attend=4, read="B", write="C")  # moves B (at position 4: x4) on
    for v in range(V):
        e = np.eye(V)[v]
        k.neuron(1, {"C": e}, 0.0, {"ans": -e})
    k.unembed("ans", ANSWER_GAIN / 2)
    _floor(k, [(0, 2), (0, 3), (1, 1), (1, 2)], seed=8, low=0.005, high=0.02)
    edges = {**_edges("primary", "input->a0.h0<v>", "a0.h0->logits"),
             **_edges("cancelling", "input->a0.h1<v>", "a0.h1->logits", "a0.h1->a1.h0<v>", "a1.h0->m1",
                      "m1->logits")}
    return StressDesign(
        "stress-cancel-2", "cancellation",
        "Direct and indirect effects of a head cancel, the indirect one through a later head and MLP.",
        k, edges, _qk_marks(["a0.h0", "a0.h1", "a1.h0"]),
        [{"kind": "cancellation", "a": ["a0.h1->logits"], "b": ["a0.h1->a1.h0<v>"], "each_min": 0.3,
          "together_max": 0.01}],
        _cancellation_predictions())


def _cancellation_predictions() -> dict[str, Prediction]:
    return {
        "nap": Prediction("fail", "node-level: the cancelling head's total effect (and gradient) is 0"),
        "sp": Prediction("fail", "node masks: masking the whole head changes nothing, so it is dropped"),
        "activation-patching": Prediction("pass", "each edge alone changes the answer"),
        "eap": Prediction("pass", "the model is linear in these edges: the estimate is exact"),
        "eap-ig-inputs": Prediction("pass", "linear"), "eap-ig-activations": Prediction("pass", "linear"),
        "acdc": Prediction("partial", "once one of the pair is removed the other matters, but removing "
                                      "the first changes the KL, so both are kept; the MLP's edge "
                                      "order decides"),
        "edge-sp": Prediction("partial", "dropping both edges of the pair together is free"),
    }


# ---------------------------------------------------------------------------- (e) attention saturation
def _saturation(gap: float, name: str, seed: int) -> StressDesign:
    """a0.h0 copies x3; a1.h0's query reads whether x3 is in the vocabulary's first half and
    attends to position 1 (if so) or 2 with logit gap ``gap``; it copies that token to the answer."""
    k = _kit(2)
    k.head(0, 0, attend=3, read="tok", write="X3")
    p = "blocks.1.attn."
    one, pos, x3 = k.slots["one"].start, k.slots["pos"].start, k.slot("X3").start
    scale = np.sqrt(k.d_head)
    for v in range(V):
        k.W[p + "W_Q"][0, x3 + v, 0] = 1.0 if v < V // 2 else -1.0
    k.W[p + "W_K"][0, pos + 1, 0] = gap / 2 * scale
    k.W[p + "W_K"][0, pos + 2, 0] = -gap / 2 * scale
    # positions other than 1 and 2 lose by gap/2 either way: a separate query unit for them
    k.W[p + "W_Q"][0, one, 1] = 1.0
    for q in (0, 3, 4):
        k.W[p + "W_K"][0, pos + q, 1] = -gap * scale
    tok = k.slot("tok").start
    ans = k.slot("ans").start
    for i in range(V):
        k.W[p + "W_V"][0, tok + i, i] = 1.0
        k.W[p + "W_O"][0, i, ans + i] = 1.0
    k.unembed("ans", ANSWER_GAIN)
    _floor(k, [(0, 1), (0, 2), (0, 3), (1, 1), (1, 2), (1, 3)], seed=seed, low=0.02, high=0.06)
    edges = {**_edges("primary", "input->a1.h0<v>", "a1.h0->logits"),
             **_edges("saturated", "input->a0.h0<v>", "a0.h0->a1.h0<q>")}
    return StressDesign(
        name, "saturation",
        f"A head whose softmax is saturated (logit gap {gap:g}) chooses between two positions from a "
        "variable its query reads: patching the query moves the attention and the answer, while the "
        "gradient through the softmax is about e^-gap.",
        k, edges, {**_qk_marks(["a0.h0"]), "input->a1.h0<k>": "reads position only, which base and source share",
                   "input->a1.h0<q>": "reads the constant 'one' only (the query's variable comes from a0.h0)"},
        [{"kind": "saturation", "head": "a1.h0", "min_attention": 0.99, "min_fraction": 0.95,
          "query_edges": ["a0.h0->a1.h0<q>"], "query_min": 0.3}],
        {
            "eap": Prediction("fail", "the query's gradient through the saturated softmax is ~e^-gap, "
                                      "below the floor's effects"),
            "nap": Prediction("fail", "the same vanishing gradient"),
            "activation-patching": Prediction("pass", "patching the query flips the attention"),
            "acdc": Prediction("pass", "exact evaluations"),
            "eap-ig-inputs": Prediction("pass", "integration crosses the point where the attention flips"),
            "eap-ig-activations": Prediction("pass", "as over inputs"),
            "atp-star": Prediction("pass", "the QK fix recomputes the attention exactly (AtP*'s claim)"),
        })


def sat_1() -> StressDesign:
    return _saturation(12.0, "stress-sat-1", seed=9)


def sat_2() -> StressDesign:
    return _saturation(30.0, "stress-sat-2", seed=10)


# ---------------------------------------------------------------------------- (f) a steep AND
def _and(name: str, first: list[int], second: list[int], seed: int, gain: float) -> StressDesign:
    """The answer is x4, unless x1 is in ``first`` and x2 in ``second``: then an AND neuron of m0
    writes token 0 ('a') with a large gain."""
    k = _kit(1)
    k.head(0, 0, attend=4, read="tok", write="ans", gain=1.0)
    k.head(0, 1, attend=1, read="tok", write="X1")
    k.head(0, 2, attend=2, read="tok", write="X2")
    k.neuron(0, {"X1": np.isin(np.arange(V), first).astype(float), "X2": np.isin(np.arange(V), second).astype(float)},
             -1.0, {"ans": gain * np.eye(V)[0]})
    k.unembed("ans", ANSWER_GAIN)
    _floor(k, [(0, 3)], seed=seed, low=0.01, high=0.03)
    edges = {**_edges("primary", "input->a0.h0<v>", "a0.h0->logits"),
             **_edges("and", "input->a0.h1<v>", "a0.h1->m0", "input->a0.h2<v>", "a0.h2->m0", "m0->logits")}
    rate = len(first) * len(second) / V ** 2
    return StressDesign(
        name, "and",
        f"The answer needs two variables jointly: a steep AND of the first two tokens (true on {100 * rate:.1f} % "
        "of uniform inputs) overrides the copied token.",
        k, edges, _qk_marks(["a0.h0", "a0.h1", "a0.h2"]),
        [{"kind": "and", "inputs": {"1": ["a0.h1->m0"], "2": ["a0.h2->m0"]}, "output": ["m0->logits"],
          "condition": {"1": [i + 1 for i in first], "2": [i + 1 for i in second]}, "rate": rate}],
        {
            "eap": Prediction("fail", "the AND neuron is off or at its kink on most pairs (gradient 0); "
                                      "its inputs score only on the rare pairs where it fires"),
            "nap": Prediction("fail", "the same zero gradient"),
            "activation-patching": Prediction("pass", "the rare flips are exact effects above the floor"),
            "acdc": Prediction("pass", "exact evaluations see the rare flips"),
            "eap-ig-inputs": Prediction("partial", "integration reaches the neuron's active region only "
                                                   "where the path crosses it"),
            "eap-ig-activations": Prediction("partial", "as over inputs"),
        })


def and_1() -> StressDesign:
    return _and("stress-and-1", [1], [2], seed=11, gain=3.0)


def and_2() -> StressDesign:
    return _and("stress-and-2", [1, 2], [3, 4], seed=12, gain=3.0)


# ---------------------------------------------------------------------------- (h) decoys
def decoy_1() -> StressDesign:
    """A decoy head writes a token 50 times louder than the answer into a subspace nothing reads."""
    k = _kit(1)
    k.head(0, 0, attend=1, read="tok", write="ans", gain=1.0)
    k.head(0, 1, attend=2, read="tok", write="junk", gain=50.0)
    k.unembed("ans", ANSWER_GAIN)
    _floor(k, [(0, 2), (0, 3)], seed=13)
    edges = _edges("primary", "input->a0.h0<v>", "a0.h0->logits")
    return StressDesign(
        "stress-decoy-1", "decoy",
        "A high-norm head with no effect beside the low-norm head that computes the answer.",
        k, edges, _qk_marks(["a0.h0"]),
        [{"kind": "decoy", "decoy": "a0.h1", "real": "a0.h0", "min_norm_ratio": 10.0, "max_changed": 0.0}],
        _decoy_predictions())


def decoy_2() -> StressDesign:
    """Decoys in both layers; the answer moves through two heads (x2 to position 1, then read)."""
    k = _kit(2)
    k.head(0, 0, attend=2, read="tok", write="T")
    k.head(1, 0, attend=1, read="T", write="ans")
    k.head(0, 1, attend=3, read="tok", write="junk", gain=40.0)
    k.head(1, 1, attend=4, read="tok", write="junk2", gain=60.0)
    k.unembed("ans", ANSWER_GAIN)
    _floor(k, [(0, 2), (0, 3), (1, 2), (1, 3)], seed=14)
    edges = _edges("primary", "input->a0.h0<v>", "a0.h0->a1.h0<v>", "a1.h0->logits")
    return StressDesign(
        "stress-decoy-2", "decoy",
        "High-norm decoy heads in both layers beside a two-step low-norm path.",
        k, edges, _qk_marks(["a0.h0", "a1.h0"]),
        [{"kind": "decoy", "decoy": "a0.h1", "real": "a0.h0", "min_norm_ratio": 10.0, "max_changed": 0.0},
         {"kind": "decoy", "decoy": "a1.h1", "real": "a1.h0", "min_norm_ratio": 10.0, "max_changed": 0.0}],
        _decoy_predictions())


def _decoy_predictions() -> dict[str, Prediction]:
    return {
        "ifr": Prediction("fail", "norm-based: the decoy dominates the residual it writes to"),
        "activation-patching": Prediction("pass", "the decoy has no effect"),
        "eap": Prediction("pass", "the decoy's gradient is 0"), "acdc": Prediction("pass", "no effect"),
        "eap-ig-inputs": Prediction("pass", "no effect"), "eap-ig-activations": Prediction("pass", "no effect"),
    }


# ---------------------------------------------------------------------------- (j) a distributed variable
def _distributed(name: str, heads: list[tuple[int, int]], n_layers: int, attend: int, seed: int,
                 free: list[tuple[int, int]]) -> StressDesign:
    k = _kit(n_layers)
    share = 1.0 / len(heads)
    for layer, h in heads:
        k.head(layer, h, attend=attend, read="tok", write="ans", gain=share)
    k.unembed("ans", ANSWER_GAIN)
    _floor(k, free, seed=seed, low=0.002, high=0.01)
    names = [f"a{l}.h{h}" for l, h in heads]
    edges = _edges("distributed", *(f"input->{n}<v>" for n in names), *(f"{n}->logits" for n in names))
    return StressDesign(
        name, "distributed",
        f"The answer is spread over {len(heads)} heads, each with a {100 * share:.1f} % share: no one of "
        "them changes the answer, enough of them together do.",
        k, edges, _qk_marks(names),
        [{"kind": "distributed", "groups": {n: [f"{n}->logits"] for n in names}, "alone_max": 0.05,
          "all_min": 0.5}],
        {
            "acdc": Prediction("fail", "each share's removal moves the KL less than the threshold, so "
                                       "shares are pruned one by one until the answer breaks"),
            "sp": Prediction("partial", "sparsity keeps only as many shares as the answer needs"),
            "edge-sp": Prediction("partial", "as node SP"),
            "activation-patching": Prediction("pass", "each share's exact effect is above the floor"),
            "eap": Prediction("pass", "linear: each share's estimate is exact"),
            "eap-ig-inputs": Prediction("pass", "linear"), "eap-ig-activations": Prediction("pass", "linear"),
        })


def dist_1() -> StressDesign:
    return _distributed("stress-dist-1", [(0, h) for h in range(3)] + [(1, h) for h in range(3)], 2, 1, 15,
                        [(0, 3), (1, 3)])


def dist_2() -> StressDesign:
    heads = [(layer, h) for layer in range(3) for h in range(4)]
    return _distributed("stress-dist-2", heads, 4, 2, 16, [(3, h) for h in range(4)])


DESIGNS = {d.__name__.replace("_", "-"): d for d in (or_1, or_2, backup_1, backup_2, neg_1, neg_2, cancel_1,
                                                     cancel_2, sat_1, sat_2, and_1, and_2, decoy_1, decoy_2,
                                                     dist_1, dist_2)}
