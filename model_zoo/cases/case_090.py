"""Case 90 (InterpBench appendix H, Table 11): Replaces a specific token with another one.

Every token "findme" becomes "-", other tokens are unchanged (one categorical Map). Vocabulary:
InterpBench's random word vocabulary (the 8 words of case 11, drawn with Python's random.seed(42),
written out literally) plus {findme, -}, as in the original.

Program: InterpBench's original case 90, written again in cbench's own code (the original repository
swapped the programs of cases 8 and 90 at one point; this is the program its case 90 has now):
https://github.com/FlyingPumba/InterpBench/blob/main/circuits_benchmark/benchmark/cases/case_90.py
Collected from TracrBench in InterpBench.
"""

SPEC = {
    "schema": "cbench/case/v1",
    "id": "90",
    "description": "Replaces a specific token with another one.",
    "task_type": "categorical",
    "vocab": ["J", "LB", "TPSI", "V", "b", "no", "oCLrZaW", "poiVg", "findme", "-"],
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
    "notes": "cbench's first version of this case implemented an older reading of the description (3 -> 7 over the integers 0..9); it now follows the original program.",
}


def program():
    """Return the RASP program (an SOp) for this case."""
    from tracr.rasp import rasp

    return rasp.Map(lambda x: "-" if x == "findme" else x, rasp.tokens).named("replace_findme")
