"""The corpus and tokenizer of the small language model trained here by next-token prediction.

The corpus is generated: templated indirect-object sentences (Wang et al.'s ABBA and BABA
templates: "When Mary and John went to the store, John gave a drink to Mary") and greater-than
sentences (Hanna et al.'s "The war lasted from the year 1732 to the year 1758": the second year
is later than the first, in the same century), among filler sentences from a small grammar, so
that the model must learn the two tasks as a language model would, from text. Everything is
drawn from a seeded generator: the same seed gives the same bytes.

The tokenizer is byte-level BPE trained on the corpus (``tokenizers``), with years split into
two-digit pieces before BPE, so "1732" is "17" "32" as in GPT-2's vocabulary and a greater-than
prompt ends in its century ("... to the year 17") with the answer one token.

Held-out prompts come from names, places, objects and nouns the corpus never pairs the same way
(disjoint draws from the same lists: the test prompts' name pairs are never a training pair).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

NAMES = ("Mary", "John", "Anna", "James", "Lisa", "Paul", "Sarah", "Mark", "Emma", "David", "Laura", "Peter",
         "Julia", "Tom", "Alice", "Daniel", "Kate", "Steven", "Rose", "Henry")
PLACES = ("store", "garden", "school", "station", "park", "office", "market", "library", "house", "river")
OBJECTS = ("drink", "book", "ring", "bone", "kiss", "letter", "bag", "snack", "ball", "basket")
EVENTS = ("war", "trip", "reign", "drought", "strike", "journey", "siege", "contract", "expedition", "famine")
ADJECTIVES = ("small", "old", "quiet", "green", "busy", "large", "cold", "bright", "empty", "happy")
VERBS = ("saw", "liked", "found", "visited", "painted", "cleaned", "left", "watched")
IOI_TEMPLATES = (  # {A} and {B} are the first mentions, {S} the subject's second mention
    "When {A} and {B} went to the {P}, {S} gave a {O} to",
    "When {A} and {B} went to the {P}, {S} handed a {O} to",
    "After {A} and {B} arrived at the {P}, {S} gave a {O} to",
    "Then, {A} and {B} had a long day at the {P}. {S} gave a {O} to",
    "While {A} and {B} were working at the {P}, {S} gave a {O} to",
)
GT_TEMPLATE = "The {E} lasted from the year {C}{Y} to the year {C}"
CENTURIES = tuple(range(11, 20))


@dataclass(frozen=True)
class Prompt:
    """A task prompt, its answer and a wrong answer (each one token), and the counterfactual
    prompt (the same tokens but the one that decides the answer)."""
    task: str
    clean: str
    corrupted: str
    correct: str
    incorrect: str


def _split_pairs(rng: random.Random) -> tuple[list, list]:
    """The name pairs, split into training and held-out (disjoint sets of unordered pairs)."""
    pairs = [(a, b) for i, a in enumerate(NAMES) for b in NAMES[i + 1:]]
    rng.shuffle(pairs)
    cut = len(pairs) * 4 // 5
    return pairs[:cut], pairs[cut:]


def ioi_prompt(rng: random.Random, pairs) -> Prompt:
    """An IOI prompt: the indirect object ``io`` and subject ``s`` in ABBA or BABA order; the
    counterfactual replaces the indirect object's mention by a third name (the answer is lost)."""
    io, s = rng.sample(rng.choice(pairs), 2)
    first, second = (io, s) if rng.random() < 0.5 else (s, io)
    fields = dict(P=rng.choice(PLACES), O=rng.choice(OBJECTS), S=s)
    t = rng.choice(IOI_TEMPLATES)
    c = rng.choice([n for n in NAMES if n not in (io, s)])
    clean = t.format(A=first, B=second, **fields)
    corrupted = t.format(A=c if first == io else first, B=c if second == io else second, **fields)
    return Prompt("ioi", clean, corrupted, " " + io, " " + s)


def greater_than_prompt(rng: random.Random) -> Prompt:
    century = rng.choice(CENTURIES)
    y = rng.randint(2, 97)
    clean = GT_TEMPLATE.format(E=rng.choice(EVENTS), C=century, Y=f"{y:02d}")
    corrupted = clean.replace(f"{century}{y:02d}", f"{century}01")
    return Prompt("greater-than", clean, corrupted, f"{rng.randint(y + 1, 99):02d}", f"{rng.randint(0, y - 1):02d}")


def _filler(rng: random.Random) -> str:
    """A filler sentence; it names no person, so every name in a document belongs to its IOI
    sentence."""
    a = rng.choice(ADJECTIVES)
    forms = (f"The {rng.choice(PLACES)} was {a}.", f"A {a} {rng.choice(OBJECTS)} was in the {rng.choice(PLACES)}.",
             f"The {rng.choice(OBJECTS)} near the {rng.choice(PLACES)} was {a}.",
             f"In {rng.choice(CENTURIES)}{rng.randint(0, 99):02d} the {rng.choice(EVENTS)} began.",
             f"Everyone {rng.choice(VERBS)} the {a} {rng.choice(PLACES)}.")
    return rng.choice(forms)


def corpus(n_documents: int, seed: int = 0, ioi_share: float = 0.5, max_filler: int = 2,
           filler_before: bool = True, filler_share: float = 0.0) -> list[str]:
    """Training documents: one task sentence, completed (the IOI answer or a later year of the
    same century), with 0 to ``max_filler`` filler sentences after it and, with ``filler_before``,
    before it; a ``filler_share`` of the documents are filler only (1-3 sentences); of the rest an
    ``ioi_share`` are IOI-like."""
    rng = random.Random(seed)
    train_pairs, _ = _split_pairs(random.Random(seed + 1))
    docs = []
    for _ in range(n_documents):
        if filler_share and rng.random() < filler_share:
            docs.append(" ".join(_filler(rng) for _ in range(rng.randint(1, 3))))
            continue
        if rng.random() < ioi_share:
            p = ioi_prompt(rng, train_pairs)
            task = p.clean + p.correct + "."
        else:
            p = greater_than_prompt(rng)
            task = p.clean + p.correct + "."
        before = [_filler(rng) for _ in range(rng.randint(0, max_filler))] if filler_before else []
        parts = before + [task] + [_filler(rng) for _ in range(rng.randint(0, max_filler))]
        docs.append(" ".join(parts))
    return docs


def held_out_prompts(task: str, n: int, seed: int = 1000) -> list[Prompt]:
    """``n`` prompts of ``task`` ("ioi": name pairs the corpus never has; "greater-than": fresh draws)."""
    rng = random.Random(seed)
    _, test_pairs = _split_pairs(random.Random(1))
    return [ioi_prompt(rng, test_pairs) if task == "ioi" else greater_than_prompt(rng) for _ in range(n)]


def train_tokenizer(docs: list[str], vocab_size: int = 1024):
    """Byte-level BPE on ``docs``, years cut into two-digit pieces first; ``<|endoftext|>`` is BOS,
    EOS and padding. Returns a ``transformers.PreTrainedTokenizerFast``."""
    import transformers
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex("[0-9]{2}"), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False),
    ])
    tok.decoder = decoders.ByteLevel()
    # every two-digit piece is a token however rare it is in the corpus (a greater-than answer may be "00")
    pieces = [" ".join(f"{y:02d}" for y in range(100))] * 10
    tok.train_from_iterator(list(docs) + pieces, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>"],
                                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>",
                                                eos_token="<|endoftext|>", unk_token="<|endoftext|>",
                                                pad_token="<|endoftext|>")
