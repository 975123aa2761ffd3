"""Whether what a recall found answers the question at all, or nothing about it is remembered.

The recall gate decides that a message asks about something said before; the ranking then always has a best
turn, however weak. Injecting it anyway made a small model answer from nothing: after "forget locker", "What is
my gym locker number?" got "Your gym locker number is 1000." from a turn about a 1000-piece puzzle. So before a
recalled turn is answered from, a logistic model over how well it answers the question decides whether to: its
cosine with the question, the share of the question's words it uses, whether it states what the question asks
for (``answer_types.match``), whether the question names a speaker and the turn is another speaker's (LoCoMo's
questions about things never said swap the speaker: "What did Caroline realize after her charity race?" when it
was Melanie's race), how far the named speaker's own best line trails the others' best for the question's words
without the names (``speaker_gap``: the ranking favours the named speaker's lines, so its best turn is hers even
when what the question asks about is the other one's), the gate's own probability, and how near the fact model
came to taking the best standing fact (a question about something said has a fact that nearly answers it; a
question about something never said rarely does). Below its threshold the answer is that nothing about it is
remembered. A question about the user's own life reaches it even where the gate would not page in
(``core.personal``). Fitted on tuning data only (``benchmarks/abstention.py``), with the threshold chosen so that
abstaining everywhere does not pay.
"""

from __future__ import annotations

from dataclasses import asdict, astuple, dataclass
from typing import Sequence

import numpy as np

from ..core.answer_types import match as type_match
from ..core.records import Turn
from ..core.text import content_words
from .gate import GateModel, _names, verdict_dict

ANSWER_FEATURES = ("dense", "lexical", "overlap", "type", "speaker_named", "speaker_other", "gate", "fact",
                   "speaker_gap", "needed", "nearest")


@dataclass
class AnswerFeatures:
    """What the model sees of a question and the best turn a recall would inject."""

    dense: float = 0.0  # the turn's cosine with the question
    lexical: float = 0.0  # its BM25 share of the question's words (the ranking's)
    overlap: float = 0.0  # the share of the question's content words the turn uses
    type: float = 0.0  # it states what the question asks for
    speaker_named: float = 0.0  # the question names someone who speaks in the conversation
    speaker_other: float = 0.0  # ... and the turn is another speaker's
    gate: float = 0.0  # the recall gate's probability that the message asks about something said before
    fact: float = 0.0  # the fact model's probability for the best standing fact (below its threshold, or none)
    speaker_gap: float = 0.0  # the named speaker's best line against the others' best (``speaker_gap``), or 0
    # The pair bank's reading of the question (``fact_pairs.PairBank.need_of``; None without a bank: the model
    # counts it as its mean): the share of the labelled messages nearest it that needed a fact, and how near the
    # nearest is. Near what the bank knows, a fact the fact model does not find was most likely never told; far
    # from it, the question may be of a kind the bank never saw, and a recall may well answer it.
    needed: float | None = None
    nearest: float | None = None

    def vector(self) -> list[float]:
        return list(astuple(self))


@dataclass
class Answerability:
    """The verdict on one recall, as the trace records it."""

    answer: bool
    probability: float
    threshold: float
    features: dict[str, float]

    def to_dict(self) -> dict:
        return verdict_dict(self)


def answer_features(question: str, turn: Turn, dense: float, lexical: float, speakers: Sequence[str],
                    gate: float, fact: float = 0.0, gap: float = 0.0,
                    need: tuple[float, float] | None = None) -> AnswerFeatures:
    """The features of ``question`` against the best turn a recall would inject (``dense``, ``lexical``: the
    ranking's scores of it; ``speakers``: who speaks in the conversation, lower case; ``gap``: ``speaker_gap``;
    ``need``: the pair bank's (needed, nearest), None without one)."""
    words = set(content_words(question, "light"))
    said = set(content_words(turn.text, "light"))
    named = speakers_named(question, speakers)
    who = (turn.speaker or "").lower()
    return AnswerFeatures(
        dense=dense, lexical=lexical, overlap=len(words & said) / len(words) if words else 0.0,
        type=type_match(question, turn.text), speaker_named=float(bool(named)),
        speaker_other=float(bool(named) and bool(who) and not any(who == n or who == n.split()[0] for n in named)),
        gate=gate, fact=fact, speaker_gap=gap, needed=need[0] if need else None, nearest=need[1] if need else None)


def speakers_named(question: str, speakers: Sequence[str]) -> list[str]:
    """The names in ``question`` (capitalised mid-sentence) of people who speak in the conversation (``speakers``:
    lower case), a full name by its first name too."""
    return [n for n in _names(question) if n in speakers or n.split()[0] in speakers]


# The lines of each side ``speaker_gap`` reads words of: the best of them by cosine (a handful of turns, not all).
SPEAKER_LINES = 20


def unnamed(question: str, speakers: Sequence[str]) -> str:
    """``question`` without the names of the conversation's ``speakers`` (lower case; a full name's words too, and
    a possessive with them): what it asks about, which the names would match in every line of theirs."""
    names = {w for s in speakers for w in (s, *s.split()) if w}
    return " ".join(w for w in question.split() if _bare(w) not in names)


def _bare(word: str) -> str:
    return word.lower().strip(".,;:!?\"'()").removesuffix("'s").removesuffix("\u2019s")


def speaker_gap(asked: str, named: str, turns: Sequence[Turn], candidates: np.ndarray, dense: np.ndarray,
                spoken_by: np.ndarray) -> float:
    """How far the best line ``named`` (lower case) said leads the best line anyone else said, for ``asked`` (a
    question without the names, ``unnamed``): each side's ``SPEAKER_LINES`` best by cosine (``dense``, of the turns
    ``candidates``; ``spoken_by``: their speakers, lower case), scored by cosine plus the share of the question's
    words they use. Below 0 the other side holds what the question asks about: 97% of LoCoMo 1-5's answerable
    questions naming one speaker have evidence that speaker said; 74% of its questions about things never said
    have the other speaker's. In [-1, 1]; 0 when a side said nothing."""
    first = named.split()[0]  # the few distinct speakers are matched, not every line's
    theirs = [s for s in set(spoken_by.tolist()) if s and (s == named or s.split()[0] == first)]
    mine = np.isin(spoken_by, theirs) if theirs else np.zeros(len(spoken_by), dtype=bool)
    words = set(content_words(asked, "light"))
    best = []
    for side in (mine, ~mine):
        idx = np.flatnonzero(side)
        if not len(idx):
            return 0.0
        top = idx[np.argsort(-dense[idx], kind="stable")[:SPEAKER_LINES]]
        best.append(max(float(dense[j]) + len(words & set(content_words(turns[candidates[j]].text, "light")))
                        / max(1, len(words)) for j in top))
    return max(-1.0, min(1.0, best[0] - best[1]))


@dataclass
class FloorModel(GateModel):
    """The floor: its own logistic model for a chat's questions, and another (``named``; None: this one for every
    question) for a question naming one of a transcript's speakers, which reads ``speaker_gap`` and lets the same
    share of its family's answerable questions go "not remembered" as the first does of a chat's."""

    named: GateModel | None = None

    def model_for(self, features: AnswerFeatures) -> GateModel:
        return self.named if self.named is not None and features.speaker_named else self


# The floor of a chat's questions (and of a transcript's naming none of its speakers). Fitted by
# benchmarks/abstention.py on the questions it is asked (no standing fact answers them) of the tuning and dev splits
# (generated tuning, dev, dev2 and the development kinds; LoCoMo 1-5), with the pair bank's ``needed`` and
# ``nearest``; its threshold the highest at which at most 6% of the dev splits' answerable questions get "not
# remembered" (the share the floor before them let go). Against that floor, over every question: never-said
# questions of the held-out phrasings "not remembered" 0.40 -> 0.51, forgotten ones 0.47 -> 0.53, their fact
# questions 0.02 either way; of the held-out kinds, which the bank holds nothing of, never-said 0.47 -> 0.59,
# forgotten 0.46 -> 0.54, fact questions 0.20 either way.
CHAT_ANSWER_MODEL = GateModel(
    weights={'dense': 0.6597, 'lexical': -0.0521, 'overlap': 0.3358, 'type': 0.3149, 'speaker_named': -0.1373,
             'speaker_other': -0.3686, 'gate': 0.1457, 'fact': 0.1243, 'speaker_gap': 0.5092, 'needed': -0.0768,
             'nearest': -0.1404},
    bias=-0.3289,
    means={'dense': 0.3118, 'lexical': 0.1313, 'overlap': 0.2822, 'type': 0.2548, 'speaker_named': 0.4587,
           'speaker_other': 0.0225, 'gate': 0.6814, 'fact': 0.1596, 'speaker_gap': 0.0529, 'needed': 0.8663,
           'nearest': 0.5329},
    scales={'dense': 0.1283, 'lexical': 0.139, 'overlap': 0.2748, 'type': 0.4322, 'speaker_named': 0.4983,
            'speaker_other': 0.1483, 'gate': 0.3359, 'fact': 0.1015, 'speaker_gap': 0.2675, 'needed': 0.2073,
            'nearest': 0.1826},
    threshold=0.2737,
)
# The floor of a question naming one of a transcript's speakers: the same fit with ``speaker_gap``, its threshold
# the lowest at which at most 7% of LoCoMo 1-5's answerable questions naming a speaker get "not remembered"
# (benchmarks/abstention.py prints it; paste it here after changing a feature).
NAMED_ANSWER_MODEL = GateModel(
    weights={'dense': 0.4222, 'lexical': 0.0605, 'overlap': 0.2542, 'type': 0.125, 'speaker_named': 0.4339,
             'speaker_other': -0.3755, 'gate': 0.087, 'fact': 1.1962, 'speaker_gap': 0.6589},
    bias=-0.2205,
    means={'dense': 0.3429, 'lexical': 0.1326, 'overlap': 0.2827, 'type': 0.3467, 'speaker_named': 0.4723,
           'speaker_other': 0.026, 'gate': 0.7573, 'fact': 0.2878, 'speaker_gap': 0.0499},
    scales={'dense': 0.1406, 'lexical': 0.1403, 'overlap': 0.2776, 'type': 0.472, 'speaker_named': 0.4992,
            'speaker_other': 0.1592, 'gate': 0.3001, 'fact': 0.2657, 'speaker_gap': 0.274},
    threshold=0.2245,
)
DEFAULT_ANSWER_MODEL = FloorModel(**vars(CHAT_ANSWER_MODEL), named=NAMED_ANSWER_MODEL)


def floor_for(model: GateModel, features: AnswerFeatures) -> GateModel:
    """The model that judges a question of ``features``: ``FloorModel.model_for``, or ``model`` itself."""
    return model.model_for(features) if isinstance(model, FloorModel) else model


def decide(features: AnswerFeatures, model: GateModel | None = None) -> Answerability:
    chosen = floor_for(model or DEFAULT_ANSWER_MODEL, features)
    p = chosen.probability(features)
    return Answerability(p >= chosen.threshold, p, chosen.threshold, asdict(features))
