"""Whether what a recall found answers the question at all, or nothing about it is remembered.

The recall gate decides that a message asks about something said before; the ranking then always has a best
turn, however weak. Injecting it anyway made a small model answer from nothing: after "forget locker", "What is
my gym locker number?" got "Your gym locker number is 1000." from a turn about a 1000-piece puzzle. So before a
recalled turn is answered from, a logistic model over how well it answers the question decides whether to: its
cosine with the question, the share of the question's words it uses, whether it states what the question asks
for (``answer_types.match``), whether the question names a speaker and the turn is another speaker's (LoCoMo's
questions about things never said swap the speaker: "What did Caroline realize after her charity race?" when it
was Melanie's race), the gate's own probability, and how near the fact model came to taking the best standing
fact (a question about something said has a fact that nearly answers it; a question about something never said
rarely does). Below its threshold the answer is that nothing about it is remembered. A question about the user's
own life reaches it even where the gate would not page in (``core.personal``). Fitted on tuning data only
(``benchmarks/abstention.py``), with the threshold chosen so that abstaining everywhere does not pay.
"""

from __future__ import annotations

from dataclasses import asdict, astuple, dataclass
from typing import Sequence

from ..core.answer_types import match as type_match
from ..core.records import Turn
from ..core.text import content_words
from .gate import GateModel, _names, verdict_dict

ANSWER_FEATURES = ("dense", "lexical", "overlap", "type", "speaker_named", "speaker_other", "gate", "fact")


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
                    gate: float, fact: float = 0.0) -> AnswerFeatures:
    """The features of ``question`` against the best turn a recall would inject (``dense``, ``lexical``: the
    ranking's scores of it; ``speakers``: who speaks in the conversation, lower case)."""
    words = set(content_words(question, "light"))
    said = set(content_words(turn.text, "light"))
    named = speakers_named(question, speakers)
    who = (turn.speaker or "").lower()
    return AnswerFeatures(
        dense=dense, lexical=lexical, overlap=len(words & said) / len(words) if words else 0.0,
        type=type_match(question, turn.text), speaker_named=float(bool(named)),
        speaker_other=float(bool(named) and bool(who) and not any(who == n or who == n.split()[0] for n in named)),
        gate=gate, fact=fact)


def speakers_named(question: str, speakers: Sequence[str]) -> list[str]:
    """The names in ``question`` (capitalised mid-sentence) of people who speak in the conversation (``speakers``:
    lower case), a full name by its first name too."""
    return [n for n in _names(question) if n in speakers or n.split()[0] in speakers]


# Fitted by benchmarks/abstention.py on the tuning and dev splits (generated tuning, dev, dev2; LoCoMo 1-5), its
# threshold the lowest at which at most 7% of the dev splits' answerable questions get "not remembered"; rerun it
# after changing a feature and paste its fit here.
DEFAULT_ANSWER_MODEL = GateModel(
    weights={'dense': 0.471, 'lexical': -0.0876, 'overlap': 0.467, 'type': 0.2037, 'speaker_named': 0.4087,
             'speaker_other': -0.6503, 'gate': 0.0477, 'fact': 1.1393},
    bias=-0.3,
    means={'dense': 0.3429, 'lexical': 0.1326, 'overlap': 0.2827, 'type': 0.3467, 'speaker_named': 0.4723,
             'speaker_other': 0.026, 'gate': 0.7573, 'fact': 0.3144},
    scales={'dense': 0.1406, 'lexical': 0.1403, 'overlap': 0.2776, 'type': 0.472, 'speaker_named': 0.4992,
             'speaker_other': 0.1592, 'gate': 0.3001, 'fact': 0.2515},
    threshold=0.1135,
)


def decide(features: AnswerFeatures, model: GateModel | None = None) -> Answerability:
    model = model or DEFAULT_ANSWER_MODEL
    p = model.probability(features)
    return Answerability(p >= model.threshold, p, model.threshold, asdict(features))
