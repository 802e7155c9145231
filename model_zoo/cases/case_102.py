"""Case 102 (InterpBench appendix H, Table 11): Reflects each element within a range (default is [2, 7]).

Values outside [2, 7] bounce off the borders until they have travelled as far inside the range as
they were outside it (a triangle wave with period 10; one categorical Map). Vocabulary: odd numbers
-5..13.

Program: InterpBench's original case 102, re-expressed in our own code:
https://github.com/FlyingPumba/InterpBench/blob/main/circuits_benchmark/benchmark/cases/case_102.py
Collected from TracrBench in InterpBench.
"""

SPEC = {
    "schema": "cbench/case/v1",
    "id": "102",
    "description": "Reflects each element within a range (default is [2, 7]).",
    "task_type": "categorical",
    "vocab": [-5, -3, -1, 1, 3, 5, 7, 9, 11, 13],
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

    low, high = 2, 7
    width = high - low

    def reflect(x):
        r = (x - low) % (2 * width)
        return low + r if r <= width else low + 2 * width - r

    return rasp.Map(reflect, rasp.tokens).named("reflect_2_7")
