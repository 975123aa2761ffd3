"""Whether what a speaker says they are stays true of them ("I'm left-handed.", "We're both teachers.", "I'm on blood
thinners.") or passes ("I'm tired.", "I'm on the train.", "I'm so excited for tonight."): a small model over the
meaning of the words.

Both are told in one frame, "I'm" and a description, so the claim and fact models (``claims``), which read a
sentence's frame and the content words they were fitted on, read "I'm dyslexic." as they read "I'm hungry.": a
passing state, no fact, whatever the condition, faith, job or origin it names. Which descriptions last cannot be
listed. The parse finds the description (``syntax.self_description``: the words after "be" up to a clause of their
own); the default embedder's word vectors (``word_vectors``) say what they mean, so "haemophiliac" lies near
"asthmatic" and "peckish" near "hungry" though no training sentence holds them. A logistic model over the first
word's vector and the sum of all the words' (``features``), learned from labelled sentences
(``lab/data/traits_train.json``), says which last. Refit with ``python
benchmarks/traits.py --fit`` (it writes ``core/data/trait_model.json`` and measures ``lab/data/traits_check.json``,
written apart). Read only of a chat user's sentence in the first person with "be" that nothing else took for a fact.
English only.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING

from . import word_vectors
from .syntax import BE, SPEAKER, self_description
from .text import tokenize_words

if TYPE_CHECKING:  # numpy loads with the first description read
    import numpy as np

    from .word_vectors import WordVectors

MODEL_FILE = "trait_model.json"
# "I'm", "we're", "I am", "we are": the speaker and "be" in the present, as the words come (``tokenize_words``)
_SPEAKER_BE = frozenset(s + b for s in SPEAKER for b in BE if b.startswith("'"))


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

    def lasting(self, text: str, vectors: WordVectors | None = None) -> bool:
        """Whether ``text`` describes its speaker as something that stays true of them. ``vectors``: the default
        embedder's when not given (without them, nothing does)."""
        if not describes_speaker(text):
            return False
        vectors = vectors or word_vectors.default_vectors()
        description = self_description(text) if vectors is not None else None
        return description is not None and self.probability(description, vectors) >= self.threshold

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
    """Whether ``text`` has the speaker and "be" in the present side by side ("I'm", "we are"): the words, before
    any parse."""
    words = tokenize_words(text)
    return any(w in _SPEAKER_BE or (w in SPEAKER and n in BE) for w, n in zip(words, words[1:] + [""]))


@lru_cache(maxsize=1)
def shipped_model() -> TraitModel:
    """The fitted trait model shipped with the package (``core/data/trait_model.json``)."""
    import numpy as np

    data = json.loads(resources.files("localpager.core").joinpath("data", MODEL_FILE).read_text(encoding="utf-8"))
    return TraitModel(np.asarray(data["weights"], dtype=np.float32), data["bias"], data["threshold"])


def lasting(text: str) -> bool:
    """Whether ``text`` describes its speaker as something that stays true of them, by the shipped model."""
    return shipped_model().lasting(text)
