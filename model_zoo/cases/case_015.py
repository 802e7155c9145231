"""Case 15 (InterpBench appendix H, Table 11): Returns each token multiplied by two and subtracted by its index.

Output at position i is 2*token_i - i, computed by a single categorical SequenceMap over (tokens,
indices). Vocabulary digits 0-4 and at most 4 tokens, as in the original (max length 5 with BOS).

Program: written by cbench from the paper's Table 11 description; InterpBench's case 15, read for
reference:
https://github.com/FlyingPumba/InterpBench/blob/main/circuits_benchmark/benchmark/cases/case_15.py
Not from TracrBench (InterpBench's own program).
"""

SPEC = {
    "schema": "cbench/case/v1",
    "id": "15",
    "description": "Returns each token multiplied by two and subtracted by its index.",
    "task_type": "categorical",
    "vocab": [0, 1, 2, 3, 4],
    "min_seq_len": 3,
    "max_seq_len": 4,
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
    "notes": "The original built a 3-ary SequenceMap (tokens, tokens, indices) from tuple-valued SequenceMaps; cbench computes the same function with one SequenceMap over tokens and indices.",
}


def program():
    """Return the RASP program (an SOp) for this case."""
    from tracr.rasp import rasp

    return rasp.SequenceMap(lambda x, i: 2 * x - i, rasp.tokens, rasp.indices).named("double_minus_index")
