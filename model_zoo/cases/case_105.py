"""Case 105 (InterpBench appendix H, Table 11): Replaces each number with the next prime after that number.

Elementwise smallest prime strictly greater than the token (one categorical Map). Vocabulary 0..15.

Program: written by cbench from the paper's Table 11 description; InterpBench's case 105, read for
reference:
https://github.com/FlyingPumba/InterpBench/blob/main/circuits_benchmark/benchmark/cases/case_105.py
Collected from TracrBench in InterpBench.
"""

SPEC = {
    "schema": "cbench/case/v1",
    "id": "105",
    "description": "Replaces each number with the next prime after that number.",
    "task_type": "categorical",
    "vocab": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
    "min_seq_len": 3,
    "max_seq_len": 5,
    "bos": "BOS",
    "pad": "PAD",
    "causal": True,
    "label_positions": "all-but-bos",
    "source": "cbench",
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
    "notes": "InterpBench's published program returns the smallest prime >= x (a prime maps to itself); cbench follows the description ('the next prime after that number', strictly greater).",
}


def program():
    """Return the RASP program (an SOp) for this case."""
    from tracr.rasp import rasp

    def is_prime(n):
        return n >= 2 and all(n % d for d in range(2, int(n ** 0.5) + 1))

    def next_prime(n):
        p = n + 1
        while not is_prime(p):
            p += 1
        return p

    return rasp.Map(next_prime, rasp.tokens).named("next_prime")
