"""Case 24 (InterpBench appendix H, Table 11): Identifies the first occurrence of each token in a sequence.

Output True at a position iff no earlier position holds the same token. Tokens and indices are first
paired (categorical SequenceMap), then a SelectorWidth counts earlier positions with the same token,
and a Map tests the count for zero. Only looks backwards, so it is compiled with causal attention.

Program: written by cbench from the paper's Table 11 description; InterpBench's case 24, read for
reference:
https://github.com/FlyingPumba/InterpBench/blob/main/circuits_benchmark/benchmark/cases/case_24.py
Not from TracrBench (InterpBench's own program).
"""

SPEC = {
    "schema": "cbench/case/v1",
    "id": "24",
    "description": "Identifies the first occurrence of each token in a sequence.",
    "task_type": "categorical",
    "vocab": ["a", "b", "c"],
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
    "notes": "InterpBench's published program for case 24 aggregates tokens with an index-equality selector, i.e. it returns the tokens unchanged and does not match its description; cbench implements the description.",
}


def program():
    """Return the RASP program (an SOp) for this case."""
    from tracr.rasp import rasp

    token_and_index = rasp.SequenceMap(lambda t, i: (t, i), rasp.tokens, rasp.indices).named("token_and_index")
    earlier_same = rasp.Select(
        token_and_index, token_and_index, lambda key, query: key[0] == query[0] and key[1] < query[1]
    ).named("earlier_same_token")
    n_earlier = rasp.SelectorWidth(earlier_same).named("n_earlier_same")
    return rasp.Map(lambda n: n == 0, n_earlier).named("is_first_occurrence")
