"""Whether a message asks about its speaker's own life: what only they could have told ("When does my passport
expire?"), against what needs nothing said before ("How do I fix a leaking tap?").

Such a question has one honest answer besides the one memory holds: that nothing about it is remembered. A small
model answering it from its own prompt invents (asked for a husband's name it never heard, it gives one), and the
invention, stored as its reply, reads later like memory. So when no standing fact bears on a personal question,
the answer goes through a recall and its relevance floor (``runtime.recall``), never straight to the model.

The decision is learned, not listed: a ``claims.ClaimModel`` over the question's frame only (its first words and
its stop words; what it is about weighs nothing), fitted by ``python benchmarks/personal_questions.py --fit`` on
the phrasing sets' questions and ``lab/data/personal_train.json``, and measured on ``personal_check.json``, the
held-out phrasing and the held-out kinds, which it never saw. A frame it never saw reads as a general question;
the recall's selector therefore reads the question's meaning as well (``retrieval.personal_vectors``), with this
model's log-odds as one of its features. English only.
"""

from __future__ import annotations

from .claims import ClaimModel, asks_own, mask_quotes, shipped_model

MODEL_FILE = "personal_model.json"
VALUE_MODEL_FILE = "value_question_model.json"


def personal_model() -> ClaimModel:
    """The fitted personal-question model shipped with the package (``core/data/personal_model.json``)."""
    return shipped_model(MODEL_FILE)


def asks_about_self(message: str) -> bool:
    """Whether ``message`` is a question about its speaker's own life, or a request naming their things
    (``claims.asks_own``: "Tell me my rent ceiling."); quoted words masked: asking to translate a question asks
    nothing about oneself. A statement asks nothing ("I like apricots." tells): the model is
    fitted on questions, and only a question has an answer memory could lack."""
    text = mask_quotes(message[:600])
    return asks_own(text) and personal_model().is_claim(text)


def value_model() -> ClaimModel:
    """The fitted value-question model shipped with the package (``core/data/value_question_model.json``)."""
    return shipped_model(VALUE_MODEL_FILE)


def asks_for_value(message: str) -> bool:
    """Whether a question about the speaker's own life asks for something they told ("Which airline do I refuse to
    fly?", "When's yoga?"), not for help that may depend on it ("My niece wants to make a card for my pup. What
    should she write?", "How do I stop my dog pulling on the lead?"). Only the first has "I don't remember that" for
    an answer when memory holds nothing about it; the second has the model's help. Learned like the personal model,
    from the question's frame: the phrasing sets' fact questions against their implicit ones, and the hand-labelled
    questions (``benchmarks/personal_questions.py --fit``)."""
    return value_model().is_claim(mask_quotes(message[:600]))
