"""The word-level vocabulary of cbench's IOI data: templates, names, places and objects.

Everything here is cbench's own material (MIB's lists are not public in a form we reuse). The
attributes are split by hand into three disjoint groups, one per split (train, validation,
test): no template, name, place or object appears in two splits, as in MIB (appendix D.1).

Tokenization is word level: ``re.findall(SPLIT_PATTERN, text)`` (runs of word characters, and
every other non-space character on its own). Every name is one word, so one token, by
construction; :func:`build_vocab` checks it. The vocabulary file shipped with the dataset
(``ioi_vocab.json``) lists the tokens by id and the pattern, so a consumer needs no code from
cbench to tokenize: ``[vocab.index(t) for t in re.findall(pattern, prompt)]``.
"""

from __future__ import annotations

import re
from typing import Iterable

SPLITS = ("train", "validation", "test")
SPLIT_PATTERN = r"\w+|[^\w\s]"
BOS_TOKEN, PAD_TOKEN, UNK_TOKEN = "<bos>", "<pad>", "<unk>"
SPECIAL_TOKENS = (BOS_TOKEN, PAD_TOKEN, UNK_TOKEN)
VOCAB_FORMAT = "cbench/word-vocab/v1"

# Slots: {name_A} and {name_B} are the two names of the first clause, {name_C} the subject
# mentioned again in the main clause; every template ends with "to" (the answer follows).
TEMPLATES: dict[str, tuple[str, ...]] = {
    "train": (
        "When {name_A} and {name_B} went to the {place}, {name_C} gave the {object} to",
        "After {name_A} and {name_B} spent some time at the {place}, {name_C} offered the {object} to",
        "While {name_A} and {name_B} were working at the {place}, {name_C} handed the {object} to",
        "Then, {name_A} and {name_B} went to the {place}. {name_C} passed the {object} to",
        "When {name_A} and {name_B} arrived at the {place}, {name_C} showed the {object} to",
        "Yesterday {name_A} and {name_B} met at the {place}, and {name_C} lent the {object} to",
        "After the meeting at the {place}, {name_A} and {name_B} stayed behind, and {name_C} sold the {object} to",
        "{name_A} and {name_B} were cleaning the {place} when {name_C} tossed the {object} to",
        "Once {name_A} and {name_B} got to the {place}, {name_C} brought the {object} to",
        "Since {name_A} and {name_B} were bored at the {place}, {name_C} threw the {object} to",
        "On Sunday {name_A} and {name_B} walked to the {place}, where {name_C} sent the {object} to",
        "As {name_A} and {name_B} waited at the {place}, {name_C} mailed the {object} to",
        "Before {name_A} and {name_B} left the {place}, {name_C} returned the {object} to",
        "During the trip to the {place}, {name_A} and {name_B} talked, and {name_C} gave the {object} to",
        "When {name_A} and {name_B} visited the {place}, {name_C} delivered the {object} to",
    ),
    "validation": (
        "The {place} was quiet when {name_A} and {name_B} came in, so {name_C} handed the {object} to",
        "After lunch, {name_A} and {name_B} went to the {place}, and {name_C} offered the {object} to",
        "{name_A} and {name_B} had a long day at the {place}, so {name_C} gave the {object} to",
        "Because {name_A} and {name_B} were late to the {place}, {name_C} passed the {object} to",
        "When {name_A} and {name_B} reached the {place}, {name_C} tossed the {object} to",
        "At the {place}, {name_A} and {name_B} sat down, and then {name_C} showed the {object} to",
        "Last week {name_A} and {name_B} cleaned the {place}, and {name_C} lent the {object} to",
        "While {name_A} and {name_B} were resting at the {place}, {name_C} brought the {object} to",
        "After {name_A} and {name_B} finished work at the {place}, {name_C} sold the {object} to",
        "When the rain stopped, {name_A} and {name_B} left the {place}, and {name_C} threw the {object} to",
        "{name_A} and {name_B} were painting the {place} when {name_C} sent the {object} to",
        "Early in the morning {name_A} and {name_B} opened the {place}, and {name_C} returned the {object} to",
        "Whenever {name_A} and {name_B} go to the {place}, {name_C} gives the {object} to",
        "After {name_A} and {name_B} argued at the {place}, {name_C} mailed the {object} to",
        "As soon as {name_A} and {name_B} entered the {place}, {name_C} delivered the {object} to",
    ),
    "test": (
        "When {name_A} and {name_B} were shopping at the {place}, {name_C} gave the {object} to",
        "Later, {name_A} and {name_B} drove to the {place}, and {name_C} handed the {object} to",
        "After a long walk, {name_A} and {name_B} rested at the {place}, and {name_C} offered the {object} to",
        "{name_A} and {name_B} met by chance at the {place}, and {name_C} passed the {object} to",
        "When {name_A} and {name_B} were leaving the {place}, {name_C} showed the {object} to",
        "In the evening {name_A} and {name_B} ate at the {place}, and {name_C} lent the {object} to",
        "While {name_A} and {name_B} were studying at the {place}, {name_C} tossed the {object} to",
        "After {name_A} and {name_B} looked around the {place}, {name_C} brought the {object} to",
        "Since {name_A} and {name_B} liked the {place}, {name_C} sold the {object} to",
        "On the way to the {place}, {name_A} and {name_B} stopped, and {name_C} threw the {object} to",
        "When {name_A} and {name_B} came back from the {place}, {name_C} sent the {object} to",
        "{name_A} and {name_B} were laughing at the {place} until {name_C} returned the {object} to",
        "Every Friday {name_A} and {name_B} visit the {place}, and {name_C} gives the {object} to",
        "After {name_A} and {name_B} had dinner at the {place}, {name_C} mailed the {object} to",
        "Once {name_A} and {name_B} found the {place}, {name_C} delivered the {object} to",
    ),
}

NAMES: dict[str, tuple[str, ...]] = {
    "train": tuple("""
        Mary John Sarah Michael Emma James Olivia Robert Sophia David Grace Daniel Lucy Thomas
        Anna Peter Laura Paul Emily Mark Rachel Steven Hannah Kevin Alice Brian Julia Jason Claire
        Eric Megan Ryan Chloe Adam Amy Scott Helen Gary Kate Frank Rose Henry Jane Carl Ruth
        Victor Nina Oscar Diana Leo Fiona Ian Sally Dean Vera Hugo Tina Felix Gina Owen
    """.split()),
    "validation": tuple("""
        Linda William Karen Richard Susan Charles Nancy Joseph Lisa George Betty Edward Sandra
        Andrew Donna Joshua Carol Patrick Ruby Timothy Wendy Jacob Irene Nathan Joan Aaron Martha
        Kyle Janet Roger Alison Sean Ellen Luke Heidi Gavin Molly Ross Paula Neil Stella Cole
        Hazel Rex Iris Glen Mabel Troy Nora Wade Opal Lance Carla Reed Tessa Boyd Elsa Miles
        Jenna Seth
    """.split()),
    "test": tuple("""
        Jessica Christopher Ashley Matthew Amanda Anthony Melissa Justin Michelle Brandon
        Stephanie Gregory Rebecca Samuel Sharon Benjamin Cynthia Jeffrey Kathleen Dennis Angela
        Walter Brenda Harold Pamela Douglas Nicole Arthur Katie Albert Judy Louis Joyce Philip
        Bonnie Russell Lori Bruce Tracy Wayne Dawn Alan Peggy Vincent Sue Roy Holly Ralph Kara
        Elliot Faye Bernard Lena Curtis Maggie Howard Jill Norman Erin Clark
    """.split()),
}

PLACES: dict[str, tuple[str, ...]] = {
    "train": (
        "store", "park", "office", "school", "hospital", "library", "beach", "restaurant",
        "garden", "station", "museum", "bakery", "cinema", "market", "zoo", "farm", "church",
        "stadium", "airport", "hotel", "car dealership", "post office", "coffee shop", "gym",
        "pharmacy", "bank", "harbor", "campsite", "theater", "bookstore", "laundromat",
        "barbershop", "factory", "river", "mall", "castle", "village hall", "bus stop",
        "swimming pool", "warehouse", "gas station", "ice rink", "pet shop", "flower shop",
        "train yard",
    ),
    "validation": (
        "supermarket", "playground", "clinic", "university", "lake", "cafe", "concert hall",
        "dentist", "fire station", "gallery", "diner", "vineyard", "lighthouse", "bowling alley",
        "courthouse", "marina", "garage", "tennis court", "arcade", "bridge", "greenhouse",
        "shoe store", "bistro", "pier", "observatory", "toy store", "ski lodge", "motel", "deli",
        "orchard", "quarry", "temple", "aquarium", "stable", "workshop", "canteen",
        "parking lot", "golf course", "food court", "town square", "hardware store",
        "jewelry store", "music store", "skate park", "boathouse",
    ),
    "test": (
        "grocery store", "cathedral", "college", "pond", "pizzeria", "circus", "fairground",
        "police station", "art studio", "candy shop", "dock", "mill", "barn", "cottage",
        "carnival", "summer camp", "sports club", "science fair", "flea market", "tea house",
        "print shop", "bike shop", "hair salon", "butcher shop", "cafeteria", "chapel",
        "embassy", "palace", "ranch", "forest", "meadow", "valley", "canyon", "beach house",
        "pub", "tavern", "inn", "gift shop", "dance hall", "boxing gym", "yoga studio",
        "radio station", "power plant", "shipyard", "pottery studio",
    ),
}

OBJECTS: dict[str, tuple[str, ...]] = {
    "train": tuple("""
        apple book ring drink basketball nail bone pencil hat kite computer snack necklace bottle
        key letter ticket camera scarf candle umbrella bag map watch phone lamp guitar toy cake
        sandwich banana bracelet wallet coin envelope jacket blanket hammer bucket cup plate
        spoon towel pillow notebook
    """.split()),
    "validation": tuple("""
        orange magazine brooch soda football screw flower crayon cap balloon laptop cookie
        pendant jar badge postcard receipt radio glove torch basket globe clock tablet mirror
        violin puzzle pie burger grape mug purse medal parcel sweater quilt wrench kettle bowl
        fork napkin cushion diary ladder rope
    """.split()),
    "test": tuple("""
        pear newspaper earring juice baseball bolt rose marker helmet drum printer muffin locket
        box whistle card trophy speaker sock lantern shovel coat compass calendar stapler flute
        doll pizza taco lemon vase pouch shell package vest rug saw teapot tray knife sponge
        mattress journal brush chair
    """.split()),
}

_SLOT_RE = re.compile(r"\{(name_A|name_B|name_C|place|object)\}")


def tokenize(text: str) -> list[str]:
    """Word-level tokens of ``text`` (no BOS): ``re.findall(SPLIT_PATTERN, text)``."""
    return re.findall(SPLIT_PATTERN, text)


def template_words(template: str) -> list[str]:
    """The literal tokens of a template (its slots removed)."""
    return tokenize(_SLOT_RE.sub(" ", template))


def check_groups() -> None:
    """Assert the hand-written groups are well formed: disjoint across splits (a word may not
    be a name in one split and a place word in another either), names single tokens, every
    template with each slot exactly once."""
    for kind, groups in (("template", TEMPLATES), ("name", NAMES), ("place", PLACES), ("object", OBJECTS)):
        seen: dict[str, str] = {}
        for split in SPLITS:
            items = groups[split]
            if len(set(items)) != len(items):
                dup = sorted({x for x in items if items.count(x) > 1})
                raise AssertionError(f"duplicate {kind}s in {split}: {dup}")
            for x in items:
                if x in seen:
                    raise AssertionError(f"{kind} {x!r} is in both {seen[x]} and {split}")
                seen[x] = split
    for split in SPLITS:
        for name in NAMES[split]:
            if tokenize(name) != [name]:
                raise AssertionError(f"name {name!r} is not a single token")
        for t in TEMPLATES[split]:
            slots = _SLOT_RE.findall(t)
            if sorted(slots) != sorted(["name_A", "name_B", "name_C", "place", "object"]):
                raise AssertionError(f"template {t!r} must use each slot once")
            if not t.endswith(" to"):
                raise AssertionError(f"template {t!r} must end with 'to'")
    all_names = {n for s in SPLITS for n in NAMES[s]}
    other = {w for s in SPLITS for t in TEMPLATES[s] for w in template_words(t)}
    other |= {w for s in SPLITS for p in PLACES[s] for w in tokenize(p)}
    other |= {w for s in SPLITS for o in OBJECTS[s] for w in tokenize(o)}
    clash = sorted(all_names & other)
    if clash:
        raise AssertionError(f"names also used as other words: {clash}")


def build_vocab() -> dict:
    """The vocabulary document written as ``ioi_vocab.json``: special tokens first, then every
    non-name word in sorted order, then every name in sorted order (ids are list positions)."""
    check_groups()
    names = sorted({n for s in SPLITS for n in NAMES[s]})
    words: set[str] = set()
    for s in SPLITS:
        for t in TEMPLATES[s]:
            words.update(template_words(t))
        for p in PLACES[s]:
            words.update(tokenize(p))
        for o in OBJECTS[s]:
            words.update(tokenize(o))
    tokens = list(SPECIAL_TOKENS) + sorted(words) + names
    return {
        "format": VOCAB_FORMAT,
        "split_pattern": SPLIT_PATTERN,
        "bos_token": BOS_TOKEN,
        "pad_token": PAD_TOKEN,
        "unk_token": UNK_TOKEN,
        "tokens": tokens,
        "name_tokens": names,
        "names_by_split": {s: sorted(NAMES[s]) for s in SPLITS},
    }


def encode(text: str, vocab: dict, add_bos: bool = True) -> list[int]:
    """Token ids of ``text`` under ``vocab`` (unknown words map to ``<unk>``)."""
    index = {t: i for i, t in enumerate(vocab["tokens"])}
    unk = index[vocab["unk_token"]]
    ids = [index.get(t, unk) for t in tokenize(text)]
    return ([index[vocab["bos_token"]]] if add_bos else []) + ids


def words_of(items: Iterable[str]) -> set[str]:
    out: set[str] = set()
    for x in items:
        out.update(tokenize(x))
    return out
