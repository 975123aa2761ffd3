"""Whether what a speaker says they are, or do, stays true of them ("I'm left-handed.", "We're both teachers.", "We
heat the house with a wood burner.") or passes ("I'm tired.", "I'm on the train.", "I need a new laptop.", "I take
your point."), and whether what they did left them with something that lasts ("We adopted a greyhound called
Pepper.", not "I bought some milk."): three small models over the meaning of the words.

Each is told in one frame, "I'm" and a description, "I" and a verb in the present, or "I" and a verb in the past,
so the claim and fact models (``claims``), which read a sentence's frame and the content words they were fitted on,
read "I'm dyslexic." as they read "I'm hungry.": a passing state, no fact, whatever the condition, faith, job or
origin it names; "I" with a verb and an object is as often a remark ("I get the bit about Python.") as a way of
living, which the extractor took only when the object named something particular ("I bank with Monzo."); and an
event told in the past is a page's business, though "We just adopted a greyhound." left them with a dog. Which
descriptions, habits and results last cannot be listed. The parse finds the words (``syntax.self_description``:
after "be"; ``syntax.habit_description``: from the verb, in the plain present with an object that is not the
listener's; ``syntax.result_description``: from a verb in the past, with an object or a complement), up to a clause
of their own; the default embedder's word vectors (``word_vectors``) say what they mean, so "haemophiliac" lies
near "asthmatic" and "peckish" near "hungry" though no training sentence holds them. A logistic model over the
first word's vector and the sum of all the words' (``features``), one for each frame, learned from labelled
sentences (``lab/data/traits_train.json``, ``habits_train.json``, ``results_train.json``), says which last. Refit
with ``python benchmarks/traits.py --fit`` (it writes ``core/data/trait_model.json``, ``habit_model.json`` and
``result_model.json`` and measures the ``_check.json`` files, written apart). Read only of a chat user's sentence in
the first person that nothing else took for a fact. English only.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING

from . import word_vectors
from .changes import CHANGE_CUE
from .syntax import BE, BEEN, PERFECT, SPEAKER, habit_description, result_description, self_description
from .text import content_words, tokenize_words

if TYPE_CHECKING:  # numpy loads with the first description read
    import numpy as np

    from .word_vectors import WordVectors

MODEL_FILE = "trait_model.json"
HABIT_FILE = "habit_model.json"
RESULT_FILE = "result_model.json"
# "I'm", "we're", "I am", "we are": the speaker and "be" in the present, as the words come (``tokenize_words``); and
# its perfect: "I've been", "we have been"
_SPEAKER_BE = frozenset(s + b for s in SPEAKER for b in BE if b.startswith("'"))
_SPEAKER_HAVE = frozenset(s + h for s in SPEAKER for h in PERFECT if h.startswith("'"))


@dataclass(frozen=True)
class TraitModel:
    """Weights over a description's word vectors (``features``), a bias and the threshold at or above which it
    lasts."""

    weights: np.ndarray
    bias: float
    threshold: float

    def probability(self, description: str, vectors: WordVectors) -> float:
        z = self.bias + float(self.weights @ features(description, vectors))
        return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, z))))

    def lasts(self, description: str | None, vectors: WordVectors | None = None) -> bool:
        """Whether ``description`` (None: there is none) tells what stays true of the speaker. ``vectors``: the
        default embedder's when not given (without them, nothing does)."""
        if description is None:
            return False
        vectors = vectors or word_vectors.default_vectors()
        return vectors is not None and self.probability(description, vectors) >= self.threshold

    def to_json(self) -> dict:
        return {"bias": self.bias, "threshold": self.threshold, "weights": [round(float(w), 6) for w in self.weights]}


def features(description: str, vectors: WordVectors) -> np.ndarray:
    """The first word's vector, then the sum of all the words': the first word says how the rest is said of the
    speaker ("late for the dentist" against "a dentist", "on the train" against "on blood thinners"). Read as a sum
    alone, "I'm late for the dentist." lasted, by the dentist; of three readings (the sum; the first word and the
    sum; the first word and the rest), this one and the last kept no passing sentence of the check set."""
    import numpy as np

    return np.concatenate([vectors.of(description.split()[0]), vectors.of(description)])


def describes_speaker(text: str) -> bool:
    """Whether ``text`` has the speaker and "be" in the present, or its perfect, side by side ("I'm", "we are", "I've
    been"): the words, before any parse."""
    words = tokenize_words(text) + ["", ""]
    return any(w in _SPEAKER_BE or (w in SPEAKER and n in BE) or (w in _SPEAKER_HAVE and n in BEEN)
               or (w in SPEAKER and n in PERFECT and after in BEEN) for w, n, after in zip(words, words[1:], words[2:]))


def load_model(name: str) -> TraitModel:
    """A model of this shape from the package's data (``core/data/<name>``): the trait, habit, result and request
    models."""
    import numpy as np

    data = json.loads(resources.files("localpager.core").joinpath("data", name).read_text(encoding="utf-8"))
    return TraitModel(np.asarray(data["weights"], dtype=np.float32), data["bias"], data["threshold"])


@lru_cache(maxsize=1)
def shipped_model() -> TraitModel:
    """The fitted trait model shipped with the package (``core/data/trait_model.json``): self-descriptions."""
    return load_model(MODEL_FILE)


@lru_cache(maxsize=1)
def habit_model() -> TraitModel:
    """The fitted habit model shipped with the package (``core/data/habit_model.json``): habits."""
    return load_model(HABIT_FILE)


@lru_cache(maxsize=1)
def result_model() -> TraitModel:
    """The fitted result model shipped with the package (``core/data/result_model.json``): events whose result
    lasts."""
    return load_model(RESULT_FILE)


def description(text: str) -> str | None:
    """What ``text`` says its speaker is (``syntax.self_description``), parsed only when it has the speaker and "be"
    side by side (``describes_speaker``); else None."""
    return self_description(text) if describes_speaker(text) else None


def lasting(text: str) -> bool:
    """Whether ``text`` describes its speaker as something that stays true of them ("I'm left-handed."), by the
    shipped trait model."""
    return shipped_model().lasts(description(text))


def habitual(text: str) -> bool:
    """Whether ``text`` tells, in the plain present, a way its speaker lives ("We heat the house with a wood
    burner.") rather than a remark, a want or a passing state ("I take your point.", "I need a new laptop."), by
    the shipped habit model."""
    return habit_model().lasts(habit_description(text))


def lasting_result(text: str) -> bool:
    """Whether ``text`` tells, in the past, something its speaker did whose result stays true of them ("We adopted a
    greyhound called Pepper.", "I joined a climbing gym.") rather than something that only happened ("I bought some
    milk.", "We watched a film."), by the shipped result model."""
    return result_model().lasts(result_description(text))


def described_as(text: str) -> np.ndarray | None:
    """What ``text`` says its speaker is (``description``) as a meaning (``meaning``: "Actually I'm a midwife now."
    -> midwife); None without a description. Two descriptions of one thing lie near ("a midwife", "a nurse"; "vegan",
    "vegetarian"), of two far ("a nurse", "left-handed"): ``facts.CurrentFacts`` reads which one a changed
    description replaces."""
    said = description(text)
    return meaning(said) if said else None


def meaning(text: str) -> np.ndarray | None:
    """The sum of ``text``'s content words' vectors, normalized, its words of change left out; None without a
    content word or the word vectors. What a changed fact is about, to find the one it changes by
    (``facts.CurrentFacts``) when the two share no word ("my money is at Starling Bank now" after "My debit card is
    from Nationwide")."""
    import numpy as np

    vectors = word_vectors.default_vectors()
    words = content_words(CHANGE_CUE.sub(" ", text)) if vectors is not None else ()
    if not words:
        return None
    vector = vectors.of(" ".join(words))
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm else None
