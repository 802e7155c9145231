"""Case 129 (InterpBench appendix H, Table 11): Checks if all elements are a multiple of n (set the default at 2).

Every position outputs 1 if every token is even, else 0: a Map flags multiples of 2, a SelectorWidth
counts the positions that are not, and a Map tests the count for zero. Needs bidirectional
attention.

Program: InterpBench's original case 129, re-expressed in our own code:
https://github.com/FlyingPumba/InterpBench/blob/main/circuits_benchmark/benchmark/cases/case_129.py
Collected from TracrBench in InterpBench.
"""

SPEC = {
    "schema": "cbench/case/v1",
    "id": "129",
    "description": "Checks if all elements are a multiple of n (set the default at 2).",
    "task_type": "categorical",
    "vocab": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
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

    n = 2
    is_multiple = rasp.Map(lambda x: 1 if x % n == 0 else 0, rasp.tokens).named("is_multiple_of_2")
    not_multiple = rasp.Select(is_multiple, is_multiple, lambda key, query: key == 0).named("not_multiple_selector")
    n_not_multiple = rasp.SelectorWidth(not_multiple).named("n_not_multiple")
    return rasp.Map(lambda c: 0 if c > 0 else 1, n_not_multiple).named("all_multiples_of_2")
