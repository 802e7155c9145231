"""Case 34 (InterpBench main case, paper appendix G, Table 10): Calculate the ratio of vowels to consonants in each word.

Map(word -> vowels / consonants), categorical over the ratios that occur (the original
returns infinity for a word without consonants; no word of this vocabulary has none).
Vocabulary: InterpBench's random word vocabulary (8 words of 1-8 ASCII letters drawn with Python's random.seed(42)), written out literally.

Program: InterpBench's case 34 (circuits_benchmark/benchmark/cases/case_34.py), written again in cbench's own code.
"""

SPEC = {
    "schema": "cbench/case/v1",
    "id": "34",
    "description": "Calculate the ratio of vowels to consonants in each word.",
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
        "lr": 0.003,
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
        "eval_pairs": 1000
    }
}


def program():
    """Return the RASP program (an SOp) for this case."""
    from tracr.rasp import rasp

    def ratio(word):
        vowels = sum(c in "aeiou" for c in word.lower())
        consonants = len(word) - vowels
        return vowels / consonants if consonants else float("inf")

    return rasp.Map(ratio, rasp.tokens).named("vowel_consonant_ratio")
