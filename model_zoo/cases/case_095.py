"""Case 95 (InterpBench appendix H, Table 11): Counts the distinct prime factors of each number in the input list.

Elementwise number of distinct prime factors (0 and 1 have none; one categorical Map). Vocabulary:
multiples of 3 from 0 to 30, so that 0..3 factors all occur.

Program: InterpBench's original case 95, re-expressed in our own code:
https://github.com/FlyingPumba/InterpBench/blob/main/circuits_benchmark/benchmark/cases/case_95.py
Collected from TracrBench in InterpBench.
"""

SPEC = {
    "schema": "cbench/case/v1",
    "id": "95",
    "description": "Counts the distinct prime factors of each number in the input list.",
    "task_type": "categorical",
    "vocab": [0, 3, 6, 9, 12, 15, 18, 21, 24, 27, 30],
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

    def n_prime_factors(n):
        count, d = 0, 2
        while n > 1 and d * d <= n:
            if n % d == 0:
                count += 1
                while n % d == 0:
                    n //= d
            d += 1
        return count + (1 if n > 1 else 0)

    return rasp.Map(n_prime_factors, rasp.tokens).named("count_distinct_prime_factors")
