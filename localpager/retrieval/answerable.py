"""Whether what a recall found answers the question at all, or nothing about it is remembered.

The recall gate decides that a message asks about something said before; the ranking then always has a best
turn, however weak. Injecting it anyway made a small model answer from nothing: after "forget locker", "What is
my gym locker number?" got "Your gym locker number is 1000." from a turn about a 1000-piece puzzle. So before a
recalled turn is answered from, a logistic model over how well it answers the question decides whether to: its
cosine with the question, the share of the question's words it uses, whether it states what the question asks
for (``answer_types.match``), whether the question names a speaker and the turn is another speaker's (LoCoMo's
questions about things never said swap the speaker: "What did Caroline realize after her charity race?" when it
was Melanie's race), and the gate's own probability. Below its threshold the answer is that nothing about it is
remembered. Fitted on tuning data only (``benchmarks/abstention.py``), with the threshold chosen so that
abstaining everywhere does not pay.
"""

from __future__ import annotations

from dataclasses import asdict, astuple, dataclass
from typing import Sequence

from ..core.answer_types import match as type_match
from ..core.records import Turn
from ..core.text import content_words
from .gate import GateModel, _names, verdict_dict

ANSWER_FEATURES = ("dense", "lexical", "overlap", "type", "speaker_named", "speaker_other", "gate")


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
                    gate: float) -> AnswerFeatures:
    """The features of ``question`` against the best turn a recall would inject (``dense``, ``lexical``: the
    ranking's scores of it; ``speakers``: who speaks in the conversation, lower case)."""
    words = set(content_words(question, "light"))
    said = set(content_words(turn.text, "light"))
    named = [n for n in _names(question) if n in speakers or n.split()[0] in speakers]
    who = (turn.speaker or "").lower()
    return AnswerFeatures(
        dense=dense, lexical=lexical, overlap=len(words & said) / len(words) if words else 0.0,
        type=type_match(question, turn.text), speaker_named=float(bool(named)),
        speaker_other=float(bool(named) and bool(who) and not any(who == n or who == n.split()[0] for n in named)),
        gate=gate)


# Fitted by benchmarks/abstention.py on the tuning and dev splits (generated tuning, dev, dev2; LoCoMo 1-5), its
# threshold the lowest at which at most 10% of the dev splits' answerable questions get "not remembered"; rerun it
# after changing a feature and paste its fit here.
DEFAULT_ANSWER_MODEL = GateModel(
    weights={'dense': 1.0697, 'lexical': -0.0204, 'overlap': 0.3088, 'type': 0.3836, 'speaker_named': 0.1154,
             'speaker_other': -0.625, 'gate': 0.3105},
    bias=-0.3188,
    means={'dense': 0.3429, 'lexical': 0.1326, 'overlap': 0.2827, 'type': 0.3467, 'speaker_named': 0.4723,
           'speaker_other': 0.026, 'gate': 0.7573},
    scales={'dense': 0.1406, 'lexical': 0.1403, 'overlap': 0.2776, 'type': 0.472, 'speaker_named': 0.4992,
            'speaker_other': 0.1592, 'gate': 0.3001},
    threshold=0.154,
)


def decide(features: AnswerFeatures, model: GateModel | None = None) -> Answerability:
    model = model or DEFAULT_ANSWER_MODEL
    p = model.probability(features)
    return Answerability(p >= model.threshold, p, model.threshold, asdict(features))
