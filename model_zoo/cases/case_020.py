"""Case 20 (InterpBench main case, paper appendix G, Table 10): Detect spam messages based on appearance of spam keywords.

Per token: keyword_count = Map(number of spam keywords {free, offer, click, now} the token
equals), then Map(count > 0 -> 'spam' else 'not spam'): two MLPs.
Vocabulary: InterpBench's random word vocabulary (8 words of 1-8 ASCII letters drawn with Python's random.seed(42)), written out literally. Plus {spam, offer, click, now} as in the original.

Program: InterpBench's case 20 (circuits_benchmark/benchmark/cases/case_20.py), written again in cbench's own code.
"""

SPEC = {
    "schema": "cbench/case/v1",
    "id": "20",
    "description": "Detect spam messages based on appearance of spam keywords.",
    "task_type": "categorical",
    "vocab": [
        "J",
        "LB",
        "TPSI",
        "V",
        "b",
        "no",
        "oCLrZaW",
        "poiVg",
        "click",
        "now",
        "offer",
        "spam"
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
        "correspondence": "same-index",
        "deviation": {
            "d_model": 16,
            "d_head": 4,
            "reason": "the original d_model 4 (d_head 1) did not reach the gates: after 60 epochs (20 min) accuracy 0.75 and IIA 0.91 on validation; d_model 16, d_head 4, d_mlp 64 (cbench v1's size for this case)"
        }
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
        "lr_decay_epochs": 15,
        "betas": [
            0.9,
            0.9
        ],
        "batch_size": 512,
        "epochs": 40,
        "iit_weight": 1.0,
        "siit_weight": 1.0,
        "behavior_weight": 1.0,
        "strict_prob": 0.5,
        "train_size": 20000,
        "target": 0.997,
        "node_target": 0.993,
        "eval_pairs": 1000
    }
}


def program():
    """Return the RASP program (an SOp) for this case."""
    from tracr.rasp import rasp

    keywords = ("free", "offer", "click", "now")
    keyword_count = rasp.Map(lambda t: sum(t == k for k in keywords), rasp.tokens).named("keyword_count")
    return rasp.Map(lambda n: "spam" if n > 0 else "not spam", keyword_count).named("is_spam")
