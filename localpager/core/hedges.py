"""Whether a speaker hedges what they say about themselves ("I might be gluten intolerant.", "My PIN is 6620, though
I could be wrong."): a hedged statement is no standing fact, and it replaces none.

The claim model (``claims``) reads a sentence as a bag of words with its content words masked, so a doubt added
after a statement ("..., but I'm not certain.") or inside it (a modal, an adverb) reads as the statement. The parse
says where the framing words sit (``syntax.hedge_features``: a modal, an adverb of the verb, a clause of the
speaker's own that names nothing: "I think", "if I remember right"), and a small logistic model learned from
labelled sentences (``lab/data/hedges_train.json``) says which frames doubt: "I might be ..." does, "I can't eat
..." and "I'll be in ..." do not. Refit with ``python benchmarks/hedges.py --fit`` (it writes
``core/data/hedge_model.json`` and measures ``lab/data/hedges_check.json``, written apart). A frame it never saw
weighs nothing: the model knows the words of doubt its training sentences use. English only.

A parse costs milliseconds, so a sentence is parsed only when it holds the words of frames the model weighs enough
as a doubt (``HedgeModel.may_hedge``): without them, it cannot be read as hedged.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from importlib import resources

from .syntax import hedge_features

MODEL_FILE = "hedge_model.json"
# A frame's parts that may be no word of the text: the clause's role, a verb read in any form, a negation's "n't"
_NOT_WORDS = frozenset({"sp", "it", "frag", "md", "adv", "be", "have", "do", "not", "c", "0"})


@dataclass(frozen=True)
class HedgeModel:
    """Weights over ``syntax.hedge_features``, a bias and the threshold at or above which a text is hedged."""

    weights: dict[str, float] = field(default_factory=dict)
    bias: float = 0.0
    threshold: float = 0.5

    def probability(self, features: frozenset[str] | set[str]) -> float:
        z = self.bias + sum(self.weights.get(f, 0.0) for f in features)
        return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, z))))

    @cached_property
    def _doubting(self) -> tuple[tuple[float, tuple[str, ...]], ...]:
        """Each frame weighing toward doubt, with the words of the text it needs: "sp:not:be:sure+c" needs "sure"
        ("be" is any of its forms and "not" may be "n't", read from the parse)."""
        return tuple((weight, tuple(w for w in name.replace("+", ":").split(":") if w and w not in _NOT_WORDS))
                     for name, weight in self.weights.items() if weight > 0)

    def may_hedge(self, text: str) -> bool:
        """Whether ``text`` holds the words of enough doubting frames for their weights to reach the threshold:
        without them, no parse can read it as hedged, so none is asked for."""
        lower = text.lower()
        z = self.bias + sum(weight for weight, words in self._doubting if all(_holds(lower, w) for w in words))
        return z >= math.log(self.threshold / (1 - self.threshold))

    def hedged(self, text: str) -> bool:
        return self.may_hedge(text) and self.probability(hedge_features(text)) >= self.threshold

    def to_json(self) -> dict:
        return {"bias": self.bias, "threshold": self.threshold, "weights": self.weights}


def _holds(lower: str, word: str) -> bool:
    """Whether the lower-case ``lower`` holds a token the parse would read as ``word``: one opening with it ("ca" is
    how "can't" opens), or, for a clitic, anywhere ("'d" in "I'd")."""
    if word.startswith("'"):
        return word in lower
    at = lower.find(word)
    while at >= 0:
        if at == 0 or not (lower[at - 1].isalpha() or lower[at - 1] == "'"):
            return True
        at = lower.find(word, at + 1)
    return False


@lru_cache(maxsize=1)
def shipped_model() -> HedgeModel:
    """The fitted hedge model shipped with the package (``core/data/hedge_model.json``)."""
    data = json.loads(resources.files("localpager.core").joinpath("data", MODEL_FILE).read_text(encoding="utf-8"))
    return HedgeModel(data["weights"], data["bias"], data["threshold"])


def hedged(text: str) -> bool:
    """Whether the speaker of ``text`` marks what it says as uncertain, by the shipped model."""
    return shipped_model().hedged(text)
