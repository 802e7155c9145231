"""SIIT's hyperparameters: :class:`TrainingConfig`, one per training run.

A config comes from a case spec's ``training`` block (:meth:`TrainingConfig.from_spec`), with
command-line overrides; its defaults depend on the algorithm (``"algorithm-1"``, InterpBench's
Algorithm 1, or ``"summed"``, appendix H's one summed loss; see :mod:`cbench_builders.siit.trainer`).
It is recorded in meta.json ``training`` (:meth:`TrainingConfig.to_json`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

ALGORITHMS = ("algorithm-1", "summed")
EDGE_SAMPLINGS = ("mixed", "mixed-invariant", "bernoulli")
LENGTH_WEIGHTINGS = ("equal", "inputs")
EDGE_SOURCES = ("shared", "separate")
IIT_SETS = ("single", "mixed")
KEEPS = ("best", "last")


@dataclass
class TrainingConfig:
    algorithm: str = "algorithm-1"  # "algorithm-1" | "summed"
    lr: float = 1e-3
    lr_end: float | None = None  # summed: linear decay target (default 2e-4)
    lr_decay_epochs: int | None = None  # summed: epochs over which lr decays (default: epochs)
    betas: tuple[float, float] | None = None  # default by algorithm
    batch_size: int = 512
    epochs: int = 300  # upper bound; training stops when the target is reached
    iit_weight: float = 1.0
    siit_weight: float = 0.5
    behavior_weight: float = 1.0
    strict_prob: float = 0.5
    target: float = 1.0  # early stop when accuracy, IIA and SIIA all reach this on validation ...
    node_target: float | None = None  # ... and every non-aligned node's SIIA reaches this (default: target)
    atol: float = 0.05
    train_size: int = 20_000  # distinct training inputs (at most the input space)
    pairs_per_epoch: int | None = None  # (base, source) pairs per epoch (default: train_size)
    seed: int = 0
    eval_pairs: int = 2_000  # validation pairs for the per-epoch metrics (the final check uses twice as many)
    threads: int = 1
    grad_clip: float | None = None  # clip the gradient's global norm to this before each optimizer step
    source_gradients: bool = False  # differentiate through the low-level source activations too
    time_limit_s: float | None = None  # stop after the epoch that crosses this wall time
    cpu_limit_s: float | None = None  # ... or this much CPU time of the process (a budget independent of load)
    edge_weight: float = 0.0  # edge-level strictness (zoo v2); 0 reproduces InterpBench
    edge_sampling: str = "mixed"  # which non-ground-truth edges one example ablates (see SIITTrainer._edge_masks)
    edge_target: float | None = None  # early stop also needs edge_siia at this (default: target)
    invariant_edges: bool = True  # edge strictness also ablates ground-truth edges the program ignores (see invariant_edges())
    # how an epoch's pairs (and the validation pairs) share out over the lengths of a bidirectional
    # case: "equal", or "inputs" (in proportion to each length's number of inputs, as the
    # counterfactuals dataset draws its pairs, so the longest inputs weigh most)
    length_weighting: str = "equal"
    # the share of each length's bases and sources drawn with equal weight per distinct label
    # sequence (the rest uniformly): 0 draws uniformly; case 124's all-equal inputs (label 1), 3 of
    # 243 at length 5, otherwise reach a batch almost never (see data.draw_weights)
    label_balance: float = 0.0
    # where edge strictness takes the source's node outputs from: "shared", the component run on
    # the source that the node interventions use already (one source pass per batch), or
    # "separate", a second source pass through the graph runtime (the trainer before issue 37);
    # the same function, so the same gradients up to float rounding
    edge_sources: str = "shared"
    # which high-level nodes one IIT example interchanges: "single", one node drawn uniformly
    # (InterpBench; every zoo model), or "mixed": half the examples one node, the other half a
    # non-empty Bernoulli(0.5) set of them (a high-level model whose nodes matter only together,
    # such as redundant paths or a primary and its backup, changes its output under no single one)
    iit_sets: str = "single"
    # relative draw weights of the high-level node one IIT example interchanges, by node name
    # (a node left out weighs 1); None draws every node with equal weight (InterpBench; every zoo
    # model but case 113, whose previous-token node is the one its IIA falls short on)
    iit_node_weights: dict[str, float] | None = None
    # relative draw weights of the ignored ground-truth edges (low-level names, as circuit.json's
    # edge_signal marks them) among mixed-invariant's single-edge examples (an edge left out
    # weighs 1); None draws each with equal weight. Case 113's previous-token query edge is the one
    # its marked-edge gate falls short on, one of twelve such edges.
    invariant_edge_weights: dict[str, float] | None = None
    # whose weights training returns: "best", the best validation epoch (see SIITTrainer._score), or
    # "last", the last epoch trained (a fine-tuning stage stopped at a chosen epoch with --epochs)
    keep: str = "best"
    min_epochs: int = 0  # early stop no sooner than this epoch (the targets may hold before a soft objective is met)
    # edge-level IIT (a high-level model with a graph, such as a hand-set one): this share of the
    # edge-strictness examples also resample-ablates a random non-empty set of the circuit's edges
    # (those the high-level model does not ignore), with the high-level model's output under the
    # same ablation as the target, so each circuit edge carries what its high-level edge carries
    # (node IIT alone lets a node's effect run through an edge outside the circuit and back); 0: off
    edge_iit: float = 0.0

    def __post_init__(self):
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"unknown SIIT algorithm {self.algorithm!r} (algorithm-1 or summed)")
        if self.length_weighting not in LENGTH_WEIGHTINGS:
            raise ValueError(f"unknown length weighting {self.length_weighting!r} ({', '.join(LENGTH_WEIGHTINGS)})")
        if not 0.0 <= self.label_balance <= 1.0:
            raise ValueError(f"label_balance must be between 0 and 1 (got {self.label_balance})")
        if self.edge_sources not in EDGE_SOURCES:
            raise ValueError(f"unknown edge sources {self.edge_sources!r} ({', '.join(EDGE_SOURCES)})")
        if not 0.0 <= self.edge_iit <= 1.0:
            raise ValueError(f"edge_iit must be between 0 and 1 (got {self.edge_iit})")
        if self.edge_iit > 0 and self.edge_weight <= 0:
            raise ValueError("edge_iit needs edge strictness (edge_weight > 0)")
        if self.iit_sets not in IIT_SETS:
            raise ValueError(f"unknown IIT sets {self.iit_sets!r} ({', '.join(IIT_SETS)})")
        if self.keep not in KEEPS:
            raise ValueError(f"unknown keep {self.keep!r} ({' or '.join(KEEPS)})")
        self.iit_node_weights = _draw_weights("iit_node_weights", self.iit_node_weights)
        self.invariant_edge_weights = _draw_weights("invariant_edge_weights", self.invariant_edge_weights)
        if self.edge_sampling not in EDGE_SAMPLINGS:
            raise ValueError(f"unknown edge sampling {self.edge_sampling!r} ({', '.join(EDGE_SAMPLINGS)})")
        if self.betas is None:
            self.betas = (0.9, 0.999) if self.algorithm == "algorithm-1" else (0.9, 0.9)
        if self.lr_end is None:
            self.lr_end = self.lr if self.algorithm == "algorithm-1" else 2e-4
        if self.lr_decay_epochs is None:
            self.lr_decay_epochs = self.epochs
        if self.node_target is None:
            self.node_target = self.target
        if self.edge_target is None:
            self.edge_target = self.target
        if self.pairs_per_epoch is None:
            self.pairs_per_epoch = self.train_size
        self.betas = tuple(float(b) for b in self.betas)

    @classmethod
    def from_spec(cls, training: dict | None, **overrides) -> "TrainingConfig":
        """A config from a case spec's ``training`` block; ``overrides`` that are not None win.

        When the algorithm is overridden, betas / lr_end of the spec that belong to the other
        algorithm's defaults are dropped so the new algorithm's defaults apply."""
        known = set(cls.__dataclass_fields__)
        values = {k: v for k, v in (training or {}).items() if k in known}
        over = {k: v for k, v in overrides.items() if v is not None and k in known}
        if "algorithm" in over and over["algorithm"] != values.get("algorithm", "algorithm-1"):
            for k in ("betas", "lr_end", "lr_decay_epochs"):
                values.pop(k, None)
        values.update(over)
        return cls(**values)

    @property
    def kind(self) -> str:
        return "siit" if self.siit_weight > 0 else "iit"

    @property
    def edge_strict(self) -> bool:
        return self.kind == "siit" and self.edge_weight > 0

    def to_json(self) -> dict:
        d = asdict(self)
        d["betas"] = list(self.betas)
        return d


def _draw_weights(field: str, weights: dict | None) -> dict[str, float] | None:
    """A config's relative draw weights by name, as {str: float}; each a positive number below 1e6."""
    if weights is None:
        return None
    bad = {k: v for k, v in weights.items() if not (isinstance(v, (int, float)) and 0 < v < 1e6)}
    if bad:
        raise ValueError(f"{field} must be positive numbers below 1e6 (got {bad})")
    return {str(k): float(v) for k, v in weights.items()}
