"""Case 11 (InterpBench main case, paper appendix G, Table 10): Counts the number of words in a sequence based on their length.

The original program: word_length = Map(len, tokens), then a categorical
Aggregate(Select(word_length, word_length, EQ), word_length). Every selected position carries the same
length, so the output at each position is the length of its word (the program does not count, whatever
the description says; cbench keeps the original program).
Vocabulary: InterpBench's random word vocabulary (8 words of 1-8 ASCII letters drawn with Python's random.seed(42)), written out literally.

Program: InterpBench's case 11 (circuits_benchmark/benchmark/cases/case_11.py), written again in cbench's own code.
"""

SPEC = {
    "schema": "cbench/case/v1",
    "id": "11",
    "description": "Counts the number of words in a sequence based on their length.",
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

    word_length = rasp.Map(lambda w: len(w), rasp.tokens).named("word_length")
    same_length = rasp.Select(word_length, word_length, rasp.Comparison.EQ).named("same_length")
    return rasp.Aggregate(same_length, word_length, default=None).named("word_count_by_length")
