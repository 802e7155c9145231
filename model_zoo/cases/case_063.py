"""Case 63 (InterpBench appendix H, Table 11): Replaces each element with the number of elements less than it in the sequence.

SelectorWidth of a selector that picks the keys smaller than the query token. Needs bidirectional
attention.

Program: InterpBench's original case 63, re-expressed in our own code:
https://github.com/FlyingPumba/InterpBench/blob/main/circuits_benchmark/benchmark/cases/case_63.py
Collected from TracrBench in InterpBench.
"""

SPEC = {
    "schema": "cbench/case/v1",
    "id": "63",
    "description": "Replaces each element with the number of elements less than it in the sequence.",
    "task_type": "categorical",
    "vocab": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
    "min_seq_len": 3,
    "max_seq_len": 5,
    "bos": "BOS",
    "pad": "PAD",
    "causal": False,
    "label_positions": "all-but-bos",
    "source": "original",
    "seed": 42,
    "dataset": {"train_size": 5000},  # counterfactual pairs (validation and test 1,000 each): keeps the repo small
    "low_level": {
        "architecture": "interpbench",
        "correspondence": "same-index",
        "deviation": {
            "d_model": 48,
            "d_head": 12,
            "reason": "at d_model 24 the complement edge effect stayed at 0.21 within 300 s (accuracy, IIA and SIIA below the gates too), the value input of the SelectorWidth head (input->a0.h0<v>, which the Tracr program reads only at BOS) carrying 16 % of outputs alone; case 44, the same program with GT for LT, reached every gate at 48/12"
        }
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

    less = rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.LT).named("less_than_selector")
    return rasp.SelectorWidth(less).named("count_less_than")
