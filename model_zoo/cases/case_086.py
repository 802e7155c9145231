"""Case 86 (InterpBench appendix H, Table 11): Check if each element is a power of 2. Return 1 if true, otherwise 0.

Elementwise 1 if the token is 2, 4, 8, 16 (a power of two of exponent at least 1) else 0: one
categorical Map. As in the original (`pow_of_n(2, x)` divides x by 2 while x >= 1 and answers 1
only when it meets 2 exactly), 1 = 2**0 is *not* counted as a power of two, nor is 0.
Vocabulary 0..16 (the original draws from its integer vocabulary; cbench keeps 0..16 so that
four powers of two occur).

Program: InterpBench's original case 86, re-expressed in our own code:
https://github.com/FlyingPumba/InterpBench/blob/main/circuits_benchmark/benchmark/cases/case_86.py
Collected from TracrBench in InterpBench.
"""

SPEC = {
    "schema": "cbench/case/v1",
    "id": "86",
    "description": "Check if each element is a power of 2. Return 1 if true, otherwise 0.",
    "task_type": "categorical",
    "vocab": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16],
    "min_seq_len": 3,
    "max_seq_len": 5,
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

    return rasp.Map(lambda x: 1 if x >= 2 and x & (x - 1) == 0 else 0, rasp.tokens).named("is_power_of_2")
