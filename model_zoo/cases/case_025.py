"""Case 25 (InterpBench appendix H, Table 11): Normalizes token frequencies in a sequence to a range between 0 and 1.

Each position gets count(token)/length: a histogram SelectorWidth and a length SelectorWidth
combined by a categorical SequenceMap (outputs are the fractions k/n as classes).

Program: InterpBench's original case 25, re-expressed in our own code:
https://github.com/FlyingPumba/InterpBench/blob/main/circuits_benchmark/benchmark/cases/case_25.py
Not from TracrBench (InterpBench's own program).
"""

SPEC = {
    "schema": "cbench/case/v1",
    "id": "25",
    "description": "Normalizes token frequencies in a sequence to a range between 0 and 1.",
    "task_type": "categorical",
    "vocab": ["a", "b", "c"],
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
            "d_model": 60,
            "d_head": 15,
            "reason": "at d_model 30 the complement stayed at 63-70 % within 300 s, carried by the value input of the SelectorWidth head (input->a0.h0<v>, which the Tracr program reads only at BOS: 69 % of outputs alone); case 18, with the same symptom, reached every gate at twice its width"
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

    same_token = rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ).named("same_token")
    hist = rasp.SelectorWidth(same_token).named("hist")
    everything = rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.TRUE).named("all_true")
    length = rasp.SelectorWidth(everything).named("length")
    return rasp.SequenceMap(lambda c, n: c / n if n > 0 else 0, hist, length).named("frequency")
