"""Case 90 (InterpBench appendix H, Table 11): Replaces a specific token with another one.

Every token 3 becomes 7, other tokens are unchanged (one categorical Map).

Program: written by cbench from the paper's Table 11 description; InterpBench's case 90, read for
reference:
https://github.com/FlyingPumba/InterpBench/blob/main/circuits_benchmark/benchmark/cases/case_90.py
Collected from TracrBench in InterpBench.
"""

SPEC = {
    "schema": "cbench/case/v1",
    "id": "90",
    "description": "Replaces a specific token with another one.",
    "task_type": "categorical",
    "vocab": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
    "min_seq_len": 3,
    "max_seq_len": 5,
    "bos": "BOS",
    "pad": "PAD",
    "causal": True,
    "label_positions": "all-but-bos",
    "source": "cbench",
    "seed": 42,
    "training": {
        "algorithm": "summed",
        "lr": 0.001,
        "lr_end": 0.0002,
        "betas": [0.9, 0.9],
        "batch_size": 512,
        "epochs": 500,
        "iit_weight": 1.0,
        "siit_weight": 0.4,
        "behavior_weight": 1.0,
        "strict_prob": 0.5,
    },
    "notes": "InterpBench's published program for case 90 is the identity (its own description there reads 'Identity'); cbench implements Table 11's description, replacing token 3 by token 7.",
}


def program():
    """Return the RASP program (an SOp) for this case."""
    from tracr.rasp import rasp

    old, new = 3, 7
    return rasp.Map(lambda x: new if x == old else x, rasp.tokens).named("replace_3_with_7")
