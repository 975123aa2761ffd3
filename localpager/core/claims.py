"""Whether a sentence is the speaker's own claim (or only quotes, asks, requests, imagines or doubts one), and
whether a claim states something that stays true about them: two small models learned from labelled sentences.

A standing fact must come from something the user asserted about themselves or their world. "Translate this: 'I
am no longer allergic to sesame.'" holds a sentence that looks like a fact, but the user claims nothing by it; so
do a quotation of someone else, a request that mentions the user's daughter, a hypothetical and a doubt. Two parts
decide it, neither a list of phrasings:

- **Quoted words are not the speaker's.** A quoted span that reads as an utterance (it holds a personal pronoun, or
  ends as a sentence ends) is masked before facts are looked for; a quoted name or title stays.
- **The frame is learned.** A logistic model over the sentence's words and word pairs (its first words apart)
  says whether the sentence asserts something. It is fitted on labelled sentences kept as data
  (``lab/data/claims_train.json`` and the fact templates' statements, questions and requests) by
  ``python benchmarks/claims.py --fit``, which writes ``core/data/claim_model.json`` and reports precision and
  recall on sentences it was not fitted on (``lab/data/claims_check.json``). Plain arithmetic at run time.

The second model (``fact_model``) reads a claim's frame the same way, and its content words, to say whether it
states something that stays true (a standing fact: "We keep chickens on our allotment.") rather than an event or a
passing state ("I'm making risotto tonight."). It finds the facts the extractor's cues (``facts.fact_of``) have no
words for, whatever they are about: fitted on the phrasing sets' statements, the statements of two kind sets of
their own (``lab generate --kinds dev`` and ``--kinds train``: 32 kinds no cue names, in frames of their own), the
development statements, statements written for training in frames the generated ones seldom use
(``lab/data/statements_train.json``: "Left-handed, which is why ...", "Nobody believes me when I say ...") and the
filler and questions around them, with no list of kinds. Fitted on the generator's
13 kinds alone, content words taught it those kinds and it read the frame only; with the 32 more, the words say
less of any one kind and more of what a fact is: it found more statements of kinds it never saw, at the same
precision on statements written apart (``benchmarks/claims.py``, ``FACT_WORDED``).

English only, as the rest of the facts layer.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources

from .lexicon import pattern
from .syntax import asks_for_work
from .text import is_question, is_stopword

QUOTE = "\u00abquote\u00bb"  # what a masked quotation reads as
_PAIRS = {'"': '"', "\u201c": "\u201d", "\u201e": "\u201c", "\u00ab": "\u00bb", "\u2018": "\u2019", "'": "'"}
# A quotation: an opening mark at the start or after a space, colon or bracket, its words, and the closing mark before
# the end, a space or punctuation (so the apostrophes of "I'm" and "James'" open nothing).
_QUOTED = re.compile(
    r"(?:^|(?<=[\s:(\[]))(?P<open>[\"\u201c\u201e\u00ab\u2018'])(?P<body>[^\"\u201c\u201d\u201e\u00ab\u00bb\u2018\u2019\n]"
    r"{1,600}?)(?P<close>[\"\u201d\u201c\u00bb\u2019'])(?=$|[\s.,;:!?)\]])")
_REQUEST_FORM = pattern("request_form")  # "Tell me the plumber's number", "I need the vet's email"
_OWN = (pattern("asks_my"), pattern("asks_i"))  # "my", "our"; "I", "we"
_UTTERANCE = pattern("utterance")  # quoted words someone says: a personal pronoun, or a sentence's end
_TOKEN = re.compile(r"[a-z0-9]+(?:['\u2019][a-z]+)?|[?!:;]|\u00abquote\u00bb")


def mask_quotes(text: str) -> str:
    """``text`` with every quoted utterance replaced by ``QUOTE``; quoted names and titles are kept. A quotation
    after a colon is what someone said or wrote, whatever its words ('My friend said: "the plumber is 555-0111"').
    One that ends its sentence with its own stop, more text after it ("... this: 'I have a cat named Felix.' My
    sister is Freya."), leaves a full stop after it, so that the sentence after it is still one of its own
    (``text.sentences``)."""
    def masked(m: re.Match) -> str:
        if _PAIRS.get(m["open"]) != m["close"]:
            return m[0]
        if not _UTTERANCE.search(m["body"]) and not text[:m.start()].rstrip().endswith(":"):
            return m[0]
        ends = m["body"].rstrip()[-1:] in (".", "!", "?", "\u2026") and text[m.end():m.end() + 1] in (" ", "\n")
        return QUOTE + "." if ends else QUOTE
    return _QUOTED.sub(masked, text)


def features(sentence: str) -> set[str]:
    """The model's features of a sentence: its first word and first pair as they are (where a sentence's frame
    sits: "note that …", "could you …"), then its words and word pairs with every word that is not a stop word
    read as ``C``, so that what the sentence is about (an allergy, a city) weighs nothing and its frame (a
    request, a doubt, "if") all; digits folded to 0, a question mark and a masked quotation kept."""
    tokens = [t.replace("\u2019", "'") for t in _TOKEN.findall(re.sub(r"\d", "0", sentence.lower()))]
    if not tokens:
        return set()
    shape = [t if not t[0].isalnum() or is_stopword(t) else "C" for t in tokens]
    found = {f"w:{t}" for t in shape} | {f"b:{a}_{b}" for a, b in zip(shape, shape[1:])}
    found.add(f"s:{tokens[0]}")
    found.add(f"s2:{'_'.join(tokens[:2])}")
    found.add(f"f2:{'_'.join(shape[:2])}")
    return found


def worded_features(sentence: str) -> set[str]:
    """``features`` and the sentence's content words (``c:``): what the fact model reads."""
    words = re.findall(r"[a-z]+", sentence.lower())
    return features(sentence) | {f"c:{w}" for w in words if not is_stopword(w)}


@dataclass(frozen=True)
class ClaimModel:
    """Weights over a sentence's ``features`` (``worded``: its ``worded_features``), a bias and the threshold at
    or above which the model says yes."""

    weights: dict[str, float] = field(default_factory=dict)
    bias: float = 0.0
    threshold: float = 0.5
    worded: bool = False

    def probability(self, sentence: str) -> float:
        found = worded_features(sentence) if self.worded else features(sentence)
        z = self.bias + sum(self.weights.get(f, 0.0) for f in found)
        return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, z))))

    def is_claim(self, sentence: str) -> bool:
        return self.probability(sentence) >= self.threshold

    def to_json(self) -> dict:
        return {"bias": self.bias, "threshold": self.threshold, "worded": self.worded, "weights": self.weights}


MODEL_FILE = "claim_model.json"
FACT_MODEL_FILE = "fact_model.json"


@lru_cache(maxsize=4)
def shipped_model(name: str) -> ClaimModel:
    """A model of this kind shipped in ``core/data`` (``name``: its file)."""
    data = json.loads(resources.files("localpager.core").joinpath("data", name).read_text(encoding="utf-8"))
    return ClaimModel(data["weights"], data["bias"], data["threshold"], data.get("worded", False))


def default_model() -> ClaimModel:
    """The fitted claim model shipped with the package (``core/data/claim_model.json``)."""
    return shipped_model(MODEL_FILE)


def fact_model() -> ClaimModel:
    """The fitted fact model shipped with the package (``core/data/fact_model.json``)."""
    return shipped_model(FACT_MODEL_FILE)


def is_claim(sentence: str) -> bool:
    """Whether ``sentence`` (quotations masked) asserts something, by the shipped model."""
    return default_model().is_claim(sentence)


def is_request(message: str) -> bool:
    """Whether ``message`` asks for something without a question's form: it is no question, and the claim model
    reads no claim in it ("Put together a meal plan for my week.") or its parse reads a request
    (``syntax.asks_for_work``: "Describe the water cycle for a ten-year-old.", which the claim model takes for a
    claim). A request in any words: a list of request phrasings knows only those it lists."""
    return not is_question(message) and (not is_claim(message) or asks_for_work(message))


def asks_own(message: str) -> bool:
    """Whether ``message`` asks about the speaker's own things in a question's form, or in the form of a request
    for something (the lexicon's ``request_form``: "Tell me ...", "Give me ...", "I need ...") that names them
    ("Tell me my rent ceiling.", "Tell me the airline I boycott.": an "I" or a "my"). A request that names no such
    thing ("Tell me something.") asks about the world; one for work ("Suggest a gift for my mum.") is a task."""
    return is_question(message) or bool(_REQUEST_FORM.match(message) and any(p.search(message) for p in _OWN))


def states_fact(sentence: str) -> bool:
    """Whether a claim (quotations masked) states something that stays true about its speaker or their world."""
    return fact_model().is_claim(sentence)
