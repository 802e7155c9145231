"""Case 56 (InterpBench appendix H, Table 11): Sets every third element to zero.

Positions 2, 5, 8, ... (every third element, 1-based 3, 6, 9) become 0: two Maps over the indices
flag them, a SequenceMap with the tokens applies the flag.

Program: InterpBench's original case 56, re-expressed in our own code:
https://github.com/FlyingPumba/InterpBench/blob/main/circuits_benchmark/benchmark/cases/case_56.py
Collected from TracrBench in InterpBench.
"""

SPEC = {
    "schema": "cbench/case/v1",
    "id": "56",
    "description": "Sets every third element to zero.",
    "task_type": "categorical",
    "vocab": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
    "min_seq_len": 3,
    "max_seq_len": 6,
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

    every_third = rasp.Map(lambda i: (i + 1) % 3 == 0, rasp.indices).named("every_third")
    every_third_int = rasp.Map(lambda b: 1 if b else 0, every_third).named("every_third_numerical")
    return rasp.SequenceMap(lambda x, third: 0 if third else x, rasp.tokens, every_third_int).named("zero_every_third")
