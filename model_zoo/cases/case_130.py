"""Case 130 (InterpBench appendix H, Table 11): Clips each element to be within a range (make the default range [2, 7]).

Values below 2 become 2, values above 7 become 7. As in the original: constant Maps for both bounds
and two SequenceMaps applying them. Vocabulary -2..11.

Program: InterpBench's original case 130, re-expressed in our own code:
https://github.com/FlyingPumba/InterpBench/blob/main/circuits_benchmark/benchmark/cases/case_130.py
Collected from TracrBench in InterpBench.
"""

SPEC = {
    "schema": "cbench/case/v1",
    "id": "130",
    "description": "Clips each element to be within a range (make the default range [2, 7]).",
    "task_type": "categorical",
    "vocab": [-2, -1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11],
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
    low_const = rasp.Map(lambda x: low, rasp.tokens).named("low")
    high_const = rasp.Map(lambda x: high, rasp.tokens).named("high")
    clipped_low = rasp.SequenceMap(lambda x, lo: lo if x < lo else x, rasp.tokens, low_const).named("clip_low")
    return rasp.SequenceMap(lambda x, hi: hi if x > hi else x, clipped_low, high_const).named("clip_high")
