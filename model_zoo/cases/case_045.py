"""Case 45 (InterpBench appendix H, Table 11): Doubles the first half of the sequence

Positions i < n/2 (n the length) hold twice their token, the rest are unchanged: length by
SelectorWidth, a first-half flag by SequenceMap over indices and length, then a SequenceMap with the
tokens.

Program: InterpBench's original case 45, re-expressed in our own code:
https://github.com/FlyingPumba/InterpBench/blob/main/circuits_benchmark/benchmark/cases/case_45.py
Collected from TracrBench in InterpBench.
"""

SPEC = {
    "schema": "cbench/case/v1",
    "id": "45",
    "description": "Doubles the first half of the sequence",
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
            "reason": "at d_model 24 the complement stayed at 0.84 within 300 s (the MLP after the length head read the input directly, input->m0, 33-50 % of outputs alone); cases 58, 93 and 103, with the same symptom, reached every gate at 48/12"
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

    everything = rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.TRUE).named("all_true")
    length = rasp.SelectorWidth(everything).named("length")
    in_first_half = rasp.SequenceMap(lambda i, n: 1 if i < n / 2 else 0, rasp.indices, length).named("in_first_half")
    return rasp.SequenceMap(lambda x, h: x * (1 + h), rasp.tokens, in_first_half).named("double_first_half")
