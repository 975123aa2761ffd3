"""Whether a newer standing fact replaces an older one: a small logistic model over what the two share.

A later statement about the same thing replaces the earlier one, in whatever words ("the tax filing cutoff moved to
June 10" after "I have to file my taxes by March 4"), and two different things never replace each other (two
allergies, two friends, two classes). ``facts.supersedes`` asks the model about the pairs its written slot rule does
not take and that share a word of their ``Shape.keys`` (so that ``facts.CurrentFacts`` still compares a new fact
with the facts of its words only); two statements that share no word ("For any leaks I use Nadia", "my old plumber
retired") would need a model of meaning, which ingest does not run. As Graphiti closes an older fact's validity when a newer one contradicts it,
a newer fact here closes the older ones it is judged to replace; the judge is a logistic model over features of
the pair, not of any kind's words: the slot words they share, the content words of the two sentences with their
values masked, whether they are of one kind and hold values of the same types, the frame of the two sentences
(their stop words, the rest masked), and whether the newer one says that something changed. Its weights are
fitted on generated conversations only (the tuning and dev phrasings: ``benchmarks/supersede.py --fit``) and kept
in ``core/data/supersede_model.json``. Stdlib only; plain arithmetic at run time.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources

from . import lexicon
from .answer_types import stated_types
from .claims import features as frame_features
from .text import CONTACT as _CONTACT
from .text import NAME_MID_SENTENCE as _NAME
from .text import content_words, fold_plural, light_stem

MODEL_FILE = "supersede_model.json"
_VALUE = lexicon.pattern("value")
_CHANGE_CUE = lexicon.pattern("change_cue")
_CHANGED = lexicon.pattern("changed")
_MONEY_WORDS = lexicon.pattern("money_words")
_ONE_VALUE = frozenset({"budget", "number"})
_GENERIC = frozenset(fold_plural(w) for w in lexicon.words("generic"))
_DAY = lexicon.pattern("day")
_DATED = lexicon.pattern("dated")


@dataclass(frozen=True)
class Shape:
    """What the model reads of one fact: its slot words, its sentence's content words (values and names masked),
    the types of value it holds, its frame, and whether it says that something changed."""

    kind: str
    slot: frozenset[str]
    words: frozenset[str]
    heads: frozenset[str]
    values: frozenset[str]
    frame: frozenset[str]
    change: bool
    changed: bool
    named: bool

    @property
    def keys(self) -> frozenset[str]:
        """The words a fact it may replace or be replaced by shares with it (``facts.CurrentFacts``' index): not
        the words that name a kind ("code", "class": many facts share them, and comparing each new fact with all of
        them would cost more as a conversation grows); the model reads those (``head_shared``)."""
        return self.slot | self.words


@lru_cache(maxsize=1 << 14)
def shape(kind: str, subject: str, text: str) -> Shape:
    """The ``Shape`` of a fact (cached: a fact is compared with several newer ones)."""
    dates = {light_stem(w) for m in _DATED.finditer(text) for w in content_words(m[0])}
    masked = _VALUE.sub(" ", _DATED.sub(" ", text))
    values = stated_types(text) | ({"contact"} if _CONTACT.search(text) else set()) | (
        {"money"} if _MONEY_WORDS.search(text) else set())
    every = {fold_plural(w) for w in content_words(masked) if len(w) > 1 and not w.isdigit()}
    words = frozenset(light_stem(w) for w in every - _GENERIC)
    heads = frozenset(light_stem(w) for w in every & _GENERIC if not _CHANGE_CUE.search(w) and not _DAY.search(w))
    frame = frozenset(f for f in frame_features(masked) if f.startswith("b:"))
    return Shape(kind, frozenset(map(light_stem, subject.split())) - dates, words, heads, frozenset(values), frame, bool(_CHANGE_CUE.search(text)),
                 bool(_CHANGED.search(text)), bool(_NAME.search(text)))


def _overlap(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / min(len(a), len(b)) if a and b else 0.0


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def pair_features(new: Shape, old: Shape) -> dict[str, float]:
    """The features of a (newer, older) pair, each in [0, 1]."""
    same_kind = float(new.kind == old.kind)
    return {
        "slot_shared": float(bool(new.slot & old.slot)),
        "slot_overlap": _overlap(new.slot, old.slot),
        "slot_jaccard": _jaccard(new.slot, old.slot),
        "word_overlap": _overlap(new.words, old.words),
        "word_jaccard": _jaccard(new.words, old.words),
        "head_shared": float(bool(new.heads & old.heads)),
        "same_kind": same_kind,
        "values_jaccard": _jaccard(new.values, old.values),
        "values_equal": float(new.values == old.values),
        "frame_jaccard": _jaccard(new.frame, old.frame),
        "change": float(new.change),
        "changed": float(new.changed),
        "change_same_kind": float(new.change) * same_kind,
        "one_value": same_kind * float(new.kind in _ONE_VALUE and ("money" in new.values) == ("money" in old.values)),
        "both_named": float(new.named and old.named),
        "new_slot_empty": float(not new.slot),
    }


@dataclass(frozen=True)
class SupersedeModel:
    """p = sigmoid(bias + sum(weight * (feature - mean) / scale)); a pair at or above ``threshold`` supersedes."""

    weights: dict[str, float] = field(default_factory=dict)
    bias: float = 0.0
    means: dict[str, float] = field(default_factory=dict)
    scales: dict[str, float] = field(default_factory=dict)
    threshold: float = 0.5

    def probability(self, found: dict[str, float]) -> float:
        z = self.bias + sum(w * (found[n] - self.means.get(n, 0.0)) / (self.scales.get(n, 1.0) or 1.0)
                            for n, w in self.weights.items())
        return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, z))))

    def to_json(self) -> dict:
        return {"bias": self.bias, "threshold": self.threshold, "weights": self.weights, "means": self.means,
                "scales": self.scales}


@lru_cache(maxsize=1)
def default_model() -> SupersedeModel:
    """The fitted model shipped with the package (``core/data/supersede_model.json``)."""
    data = json.loads(resources.files("localpager.core").joinpath("data", MODEL_FILE).read_text(encoding="utf-8"))
    return SupersedeModel(data["weights"], data["bias"], data["means"], data["scales"], data["threshold"])


# The read-time check (``retrieval.facts.FactRanker``): two current facts that share no word may still be one slot
# ("I watch everything on Netflix." then "I cancelled that and pay for Apple TV now instead."), which only their
# meaning tells. Answering, the embedder has both facts' vectors at hand, so this model reads the
# pair's features above and their cosine. Fitted by ``benchmarks/supersede.py --fit-dense``.
DENSE_MODEL_FILE = "supersede_dense_model.json"


def dense_pair_features(new: Shape, old: Shape, cosine: float) -> dict[str, float]:
    """``pair_features`` and the two facts' cosine (their sentence vectors')."""
    return {**pair_features(new, old), "cosine": float(cosine)}


@lru_cache(maxsize=1)
def dense_model() -> SupersedeModel | None:
    """The read-time model shipped with the package (``core/data/supersede_dense_model.json``); None before it is
    fitted."""
    try:
        text = resources.files("localpager.core").joinpath("data", DENSE_MODEL_FILE).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    data = json.loads(text)
    return SupersedeModel(data["weights"], data["bias"], data["means"], data["scales"], data["threshold"])
