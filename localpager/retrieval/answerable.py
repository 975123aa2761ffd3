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
when what the question asks about is the other one's), the gate's own probability, how near the fact model
came to taking the best standing fact (a question about something said has a fact that nearly answers it; a
question about something never said rarely does), and how far the best turn stands out of the turns ranked after it
(``lead``: what was said is said in one turn the ranking puts far ahead of the rest; for what was never said, the
best is one of many alike). Below its threshold the answer is that nothing about it is
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
                   "speaker_gap", "needed", "nearest", "lead", "dense_lead")


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
    # How far the best turn stands out of the turns ranked after it (``lead``; None: not read, its mean): by the
    # ranking's fused score, and by cosine. What a question asks about, when it was said, is said in one turn the
    # ranking puts far ahead; asked about something never said, the ranking's best is one of many alike (a date
    # for "When's my weekly vinyasa?" among the others).
    lead: float | None = None
    dense_lead: float | None = None

    def vector(self) -> list[float]:
        return list(astuple(self))


@dataclass
class Answerability:
    """The verdict on one recall, as the trace records it."""

    answer: bool
    probability: float
    threshold: float
    features: dict[str, float]
    turn: int | None = None  # the turn judged (the ranking's best), when known

    def to_dict(self) -> dict:
        return verdict_dict(self)


def answer_features(question: str, turn: Turn, dense: float, lexical: float, speakers: Sequence[str],
                    gate: float, fact: float = 0.0, gap: float = 0.0,
                    need: tuple[float, float] | None = None,
                    leads: tuple[float, float] | None = None) -> AnswerFeatures:
    """The features of ``question`` against the best turn a recall would inject (``dense``, ``lexical``: the
    ranking's scores of it; ``speakers``: who speaks in the conversation, lower case; ``gap``: ``speaker_gap``;
    ``need``: the pair bank's (needed, nearest), None without one; ``leads``: ``ranking_leads``, None unread)."""
    words = set(content_words(question, "light"))
    said = set(content_words(turn.text, "light"))
    named = speakers_named(question, speakers)
    who = (turn.speaker or "").lower()
    return AnswerFeatures(
        dense=dense, lexical=lexical, overlap=len(words & said) / len(words) if words else 0.0,
        type=type_match(question, turn.text), speaker_named=float(bool(named)),
        speaker_other=float(bool(named) and bool(who) and not any(who == n or who == n.split()[0] for n in named)),
        gate=gate, fact=fact, speaker_gap=gap, needed=need[0] if need else None, nearest=need[1] if need else None,
        lead=leads[0] if leads else None, dense_lead=leads[1] if leads else None)


# The turns ranked after the best that ``lead`` compares it with: the next 19 (fitted with 10, 20 and 50 in
# benchmarks/abstention.py; 20 held up best on the held-out splits).
LEAD_OF = 20


def lead(best: float, values: np.ndarray) -> float:
    """How many standard deviations ``best`` stands above the next ``LEAD_OF - 1`` of ``values`` (every candidate's
    score, the best among them), in [-5, 15]; 0 with fewer than three after it."""
    values = np.asarray(values, dtype=np.float64)
    if len(values) < 4:
        return 0.0
    k = min(LEAD_OF, len(values))
    top = -np.sort(-np.partition(values, len(values) - k)[len(values) - k:])  # the best k, best first
    rest = top[1:]
    return float(np.clip((best - rest.mean()) / (rest.std() + 0.01), -5.0, 15.0))


def ranking_leads(best_score: float, best_dense: float, scores: np.ndarray, dense: np.ndarray) -> tuple[float, float]:
    """``lead`` of the ranking's best turn by fused score (``scores``) and by cosine (``dense``), each over every
    candidate turn."""
    return lead(best_score, scores), lead(best_dense, dense)


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
# ``nearest`` and the best turn's ``lead``; its threshold the highest at which at most 6% of the dev splits'
# answerable questions get "not remembered". Against the floor before ``lead``, over every question: never-said
# questions of the held-out phrasings "not remembered" 0.51 -> 0.68, forgotten ones 0.53 -> 0.65, their fact
# questions 0.02 -> 0.04; of the held-out kinds never-said 0.59 -> 0.61, forgotten 0.54 -> 0.59, fact questions
# 0.19 -> 0.18.
CHAT_ANSWER_MODEL = GateModel(
    weights={'dense': 0.3664, 'lexical': -0.1962, 'overlap': 0.2271, 'type': 0.1944, 'speaker_named': 0.1558,
             'speaker_other': -0.3998, 'gate': -0.0412, 'fact': 0.1829, 'speaker_gap': 0.3834, 'needed': -0.1094,
             'nearest': -0.1939, 'lead': 0.7373, 'dense_lead': 0.2367},
    bias=-0.3027,
    means={'dense': 0.3097, 'lexical': 0.1339, 'overlap': 0.2864, 'type': 0.2584, 'speaker_named': 0.4806,
           'speaker_other': 0.0284, 'gate': 0.6876, 'fact': 0.1548, 'speaker_gap': 0.0462, 'needed': 0.8651,
           'nearest': 0.5268, 'lead': 3.5546, 'dense_lead': 0.4631},
    scales={'dense': 0.1278, 'lexical': 0.1397, 'overlap': 0.275, 'type': 0.4344, 'speaker_named': 0.4996,
            'speaker_other': 0.166, 'gate': 0.3342, 'fact': 0.098, 'speaker_gap': 0.2756, 'needed': 0.2067,
            'nearest': 0.1826, 'lead': 2.7582, 'dense_lead': 2.5177},
    threshold=0.2807,
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
