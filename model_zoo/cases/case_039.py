"""Case 39 (InterpBench appendix H, Table 11): Returns the fraction of 'x' in the input up to the i-th position for all i (longer sequence length).

Same program as case 3 (numerical frac_prevs of tokens == 'x': a numerical mean over the causal
prefix) with a longer maximum length (12 tokens here; the original used 59 and all 26 letters).

Program: InterpBench's original case 39, re-expressed in our own code:
https://github.com/FlyingPumba/InterpBench/blob/main/circuits_benchmark/benchmark/cases/case_39.py
Not from TracrBench (InterpBench's own program).
"""

SPEC = {
    "schema": "cbench/case/v1",
    "id": "39",
    "description": "Returns the fraction of 'x' in the input up to the i-th position for all i (longer sequence length).",
    "task_type": "numerical",
    "vocab": ["a", "b", "c", "d", "x"],
    "min_seq_len": 3,
    "max_seq_len": 12,
    "bos": "BOS",
    "pad": "PAD",
    "causal": True,
    "label_positions": "all-but-bos",
    "source": "original",
    "seed": 42,
    "dataset": {"train_size": 5000},  # counterfactual pairs (validation and test 1,000 each): keeps the repo small
    "low_level": {
        "architecture": "interpbench",
        "correspondence": "same-index"
    },
    "training": {
        "algorithm": "summed",
        "lr": 0.001,
        "lr_end": 0.0002,
        "lr_decay_epochs": 100,
        "betas": [0.9, 0.9],
        "batch_size": 512,
        "epochs": 200,
        "iit_weight": 1.0,
        "siit_weight": 3.0,
        "behavior_weight": 1.0,
        "strict_prob": 0.5,
        "edge_weight": 1.0,
        "edge_sampling": "mixed",
        "edge_target": 0.999,
        "target": 0.997,
        "node_target": 0.997,
        "eval_pairs": 1000,
        "source_gradients": True,
        "cpu_limit_s": 300,
        "time_limit_s": 3600
    },
}


def program():
    """Return the RASP program (an SOp) for this case."""
    from tracr.rasp import rasp

    is_x = rasp.numerical(rasp.Map(lambda t: 1 if t == "x" else 0, rasp.tokens)).named("is_x")
    prefix = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LEQ).named("prefix")
    return rasp.numerical(rasp.Aggregate(prefix, is_x, default=0)).named("frac_prevs")
