"""Case 82 (InterpBench appendix H, Table 11): Halve the elements in the second half of the sequence.

Positions i >= n//2 hold token/2, the rest are unchanged: length by SelectorWidth, n//2 by a Map, a
flag by SequenceMap over indices, then a SequenceMap with the tokens. Needs bidirectional attention.

Program: InterpBench's original case 82, re-expressed in our own code:
https://github.com/FlyingPumba/InterpBench/blob/main/circuits_benchmark/benchmark/cases/case_82.py
Collected from TracrBench in InterpBench.
"""

SPEC = {
    "schema": "cbench/case/v1",
    "id": "82",
    "description": "Halve the elements in the second half of the sequence.",
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
            "reason": "at d_model 24 the complement stayed at 0.90 within 300 s (IIA 0.68); cases 2 and 58, the same length-head shape, reached every gate at 48/12"
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
    half_length = rasp.Map(lambda n: n // 2, length).named("half_length")
    in_second_half = rasp.SequenceMap(lambda i, h: i >= h, rasp.indices, half_length).named("in_second_half")
    return rasp.SequenceMap(lambda x, second: x / 2 if second else x, rasp.tokens, in_second_half).named("halve_second_half")
