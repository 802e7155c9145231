"""Case 36 (InterpBench main case, paper appendix G, Table 10): Classifies each token as 'positive', 'negative', or 'neutral' based on emojis.

Map(emoji -> sentiment): smiling face -> positive, crying face -> negative, anything else
(the blue book) -> neutral. One MLP. Vocabulary: the three emojis of the original.

Program: InterpBench's case 36 (circuits_benchmark/benchmark/cases/case_36.py), written again in cbench's own code.
"""

SPEC = {
    "schema": "cbench/case/v1",
    "id": "36",
    "description": "Classifies each token as 'positive', 'negative', or 'neutral' based on emojis.",
    "task_type": "categorical",
    "vocab": [
        "😊",
        "😢",
        "📘"
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
        "lr_decay_epochs": 15,
        "betas": [
            0.9,
            0.9
        ],
        "batch_size": 512,
        "epochs": 40,
        "iit_weight": 1.0,
        "siit_weight": 3.0,
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

    sentiment = {"\U0001F60A": "positive", "\U0001F622": "negative", "\U0001F4D8": "neutral"}
    return rasp.Map(lambda t: sentiment.get(t, "neutral"), rasp.tokens).named("emoji_sentiment")
