"""Case 31 (InterpBench appendix H, Table 11): Identify if tokens in the sequence are anagrams of the word 'listen'.

Each token is a word; output True iff its sorted letters equal the sorted letters of 'listen'.

Program: InterpBench's original case 31, re-expressed in our own code:
https://github.com/FlyingPumba/InterpBench/blob/main/circuits_benchmark/benchmark/cases/case_31.py
Not from TracrBench (InterpBench's own program).
"""

SPEC = {
    "schema": "cbench/case/v1",
    "id": "31",
    "description": "Identify if tokens in the sequence are anagrams of the word 'listen'.",
    "task_type": "categorical",
    "vocab": ["listen", "silent", "enlist", "tinsel", "inlets", "listens", "lisen", "tennis", "google", "banana"],
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
    "notes": "The original drew random letter strings (seed 42) plus 'listen', so 'listen' was its only anagram; cbench fixes a hand-written word vocabulary with five anagrams and five near misses (no random draw).",
}


def program():
    """Return the RASP program (an SOp) for this case."""
    from tracr.rasp import rasp

    target = sorted("listen")
    return rasp.Map(lambda w: sorted(w) == target, rasp.tokens).named("is_anagram_of_listen")
