"""Case 7 (InterpBench appendix H, Table 11): Returns the number of times each token occurs in the input.

Histogram: each position gets the number of positions holding the same token (SelectorWidth of a
token-equality selector).

Program: InterpBench's original case 7, re-expressed in our own code:
https://github.com/FlyingPumba/InterpBench/blob/main/circuits_benchmark/benchmark/cases/case_7.py
Not from TracrBench (InterpBench's own program).
"""

SPEC = {
    "schema": "cbench/case/v1",
    "id": "7",
    "description": "Returns the number of times each token occurs in the input.",
    "task_type": "categorical",
    "vocab": ["a", "b", "c"],
    "min_seq_len": 3,
    "max_seq_len": 5,
    "bos": "BOS",
    "pad": "PAD",
    "causal": False,
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

    same_token = rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ).named("same_token")
    return rasp.SelectorWidth(same_token).named("hist")
