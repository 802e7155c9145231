"""Case 40 (InterpBench appendix H, Table 11): Sum the last and previous to last digits of a number

Each token is a number below 30; the output is its tens digit plus its ones digit (two Maps and a
SequenceMap). Vocabulary: multiples of 3 from 0 to 27 (the original used 0..29).

Program: InterpBench's original case 40, re-expressed in our own code:
https://github.com/FlyingPumba/InterpBench/blob/main/circuits_benchmark/benchmark/cases/case_40.py
Collected from TracrBench in InterpBench.
"""

SPEC = {
    "schema": "cbench/case/v1",
    "id": "40",
    "description": "Sum the last and previous to last digits of a number",
    "task_type": "categorical",
    "vocab": [0, 3, 6, 9, 12, 15, 18, 21, 24, 27],
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

    tens = rasp.Map(lambda x: x // 10, rasp.tokens).named("tens_place")
    ones = rasp.Map(lambda x: x % 10, rasp.tokens).named("ones_place")
    return rasp.SequenceMap(lambda t, o: t + o, tens, ones).named("sum_digits")
