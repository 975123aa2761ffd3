"""Whether a statement says that something changed ("I moved everything over to Monzo last month.", "Turns out
I've been squeezing into the wrong size; a proper fitting put me at EU 38."): a newer value of what the user told
before, which should answer in the older one's place, and not a second thing that stands beside it.

The lexicon's change words (``change_cue``: "now", "switched", "no longer") are what someone wrote down; people
say a change in words no one listed ("Got fed up with the fees and took my current account to ...", "a proper
fitting put me at ..."). A small logistic model over a statement's words and word pairs, learned from the phrasing
and kind sets' corrections against their first statements (``python benchmarks/changes.py --fit``, weights in
``core/data/change_model.json``), reads those; a statement says that something changed when either does. Its
threshold lets few first statements through: a first statement read as a change would let two values that both
stand (two allergies) give way to each other.

A statement can say "now" or "new" and still tell one more of something, not another value of it ("I'm now allergic
to kiwi as well.", "Now we also have a dog called Pip."): what it tells stands beside what was told before. A second
model of the same form reads that (``adds``; ``core/data/addition_model.json``), fitted on additions written for it
(``lab/data/additions_train.json``) against the same sentences told as a first statement and against changes, and
the training sets' first statements and corrections; such a statement says no change and replaces nothing. It reads
a statement without the change words ("now", "new"), which tell a change as often as an addition. Its threshold lets
few of those through: a correction read as an addition leaves the older value standing beside it.
English only.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources

from . import lexicon
from .text import tokenize_words

MODEL_FILE = "change_model.json"
ADDITION_FILE = "addition_model.json"
CHANGE_CUE = lexicon.pattern("change_cue")


def features(text: str, unchanged: bool = False) -> frozenset[str]:
    """A statement's words and its pairs of neighbouring words (``tokenize_words``: lower case); with ``unchanged``,
    read without the lexicon's change words (``CHANGE_CUE``)."""
    words = tokenize_words(CHANGE_CUE.sub(" ", text) if unchanged else text)
    return frozenset(words + [f"{a}_{b}" for a, b in zip(words, words[1:])])


@dataclass(frozen=True)
class ChangeModel:
    """Weights over ``features``, a bias and the threshold at or above which a statement says what the model reads
    (that something changed; for the addition model, that one more of something was added)."""

    weights: dict[str, float] = field(default_factory=dict)
    bias: float = 0.0
    threshold: float = 0.5
    # reads a statement without its change words (``features``' ``unchanged``): the addition model. "Now" says a
    # change as often as one more of something ("My brother lives in York now." / "I'm now allergic to kiwi as
    # well."); learned from the additions, where it often stands, it weighed as an addition's word (1.7) and "My
    # brother lives in York now." replaced nothing
    unchanged: bool = False

    def probability(self, text: str) -> float:
        return self.probability_of(features(text, self.unchanged))

    def probability_of(self, found: frozenset[str]) -> float:
        z = self.bias + sum(self.weights.get(f, 0.0) for f in found)
        return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, z))))

    def to_json(self) -> dict:
        return {"bias": self.bias, "threshold": self.threshold, "weights": self.weights,
                **({"unchanged": True} if self.unchanged else {})}


def _load(name: str) -> ChangeModel:
    data = json.loads(resources.files("localpager.core").joinpath("data", name).read_text(encoding="utf-8"))
    return ChangeModel(data["weights"], data["bias"], data["threshold"], data.get("unchanged", False))


@lru_cache(maxsize=1)
def shipped_model() -> ChangeModel:
    """The fitted change model shipped with the package (``core/data/change_model.json``)."""
    return _load(MODEL_FILE)


@lru_cache(maxsize=1)
def addition_model() -> ChangeModel:
    """The fitted addition model shipped with the package (``core/data/addition_model.json``)."""
    return _load(ADDITION_FILE)


@lru_cache(maxsize=1 << 14)
def adds(text: str) -> bool:
    """Whether ``text`` tells one more of something ("We adopted a second cat last week."): by the addition model."""
    model = addition_model()
    return model.probability(text) >= model.threshold


def reads_changed(text: str) -> bool:
    """Whether the change model alone reads that ``text`` says something changed, whatever its change words: "Been
    seeing Kofi for my haircuts since I moved here." has one ("moved") and tells a first value."""
    model = shipped_model()
    return model.probability(text) >= model.threshold


@lru_cache(maxsize=1 << 14)
def says_changed(text: str) -> bool:
    """Whether ``text`` says that something changed: a change word of the lexicon's, or the change model's reading;
    and it tells no addition (``adds``)."""
    model = shipped_model()
    return (bool(CHANGE_CUE.search(text)) or model.probability(text) >= model.threshold) and not adds(text)
