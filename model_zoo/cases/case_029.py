"""Case 29 (InterpBench main case, paper appendix G, Table 10): Creates abbreviations for each token in the sequence.

Map(word -> its first three characters when longer than three): one MLP.
Vocabulary: InterpBench's random word vocabulary (8 words of 1-8 ASCII letters drawn with Python's random.seed(42)), written out literally.

Program: InterpBench's case 29 (circuits_benchmark/benchmark/cases/case_29.py), written again in cbench's own code.
"""

SPEC = {
    "schema": "cbench/case/v1",
    "id": "29",
    "description": "Creates abbreviations for each token in the sequence.",
    "task_type": "categorical",
    "vocab": [
        "J",
        "LB",
        "TPSI",
        "V",
        "b",
        "no",
        "oCLrZaW",
        "poiVg"
    ],
    "min_seq_len": 3,
    "max_seq_len": 9,
    "bos": "BOS",
    "pad": "PAD",
    "causal": True,
    "label_positions": "all-but-bos",
    "source": "original",
    "seed": 42,
    "low_level": {
        "architecture": "interpbench",
        "correspondence": "same-index"
    },
    "training": {
        "algorithm": "algorithm-1",
        "lr": 0.001,
        "batch_size": 512,
        "epochs": 60,
        "iit_weight": 1.0,
        "siit_weight": 1.0,
        "behavior_weight": 1.0,
        "edge_weight": 1.0,
        "edge_sampling": "mixed",
        "train_size": 20000,
        "target": 0.997,
        "node_target": 0.997,
        "eval_pairs": 1000,
        "source_gradients": True,
        "time_limit_s": 1200
    },
    "training_v1": {
        "algorithm": "summed",
        "lr": 0.001,
        "lr_end": 0.0002,
        "lr_decay_epochs": 30,
        "betas": [
            0.9,
            0.9
        ],
        "batch_size": 512,
        "epochs": 80,
        "iit_weight": 1.0,
        "siit_weight": 3.0,
        "behavior_weight": 1.0,
        "strict_prob": 0.5,
        "train_size": 20000,
        "target": 0.997,
        "node_target": 0.997,
        "eval_pairs": 1000,
        "source_gradients": True
    }
}


def program():
    """Return the RASP program (an SOp) for this case."""
    from tracr.rasp import rasp

    return rasp.Map(lambda w: w[:3] if len(w) > 3 else w, rasp.tokens).named("abbreviation")
