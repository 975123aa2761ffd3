"""Whether a message asks about its speaker's own life: what only they could have told ("When does my passport
expire?"), against what needs nothing said before ("How do I fix a leaking tap?").

Such a question has one honest answer besides the one memory holds: that nothing about it is remembered. A small
model answering it from its own prompt invents (asked for a husband's name it never heard, it gives one), and the
invention, stored as its reply, reads later like memory. So when no standing fact bears on a personal question,
the answer goes through a recall and its relevance floor (``runtime.recall``), never straight to the model.

The decision is learned, not listed: a ``claims.ClaimModel`` over the question's frame only (its first words and
its stop words; what it is about weighs nothing), fitted by ``python benchmarks/personal_questions.py --fit`` on
the phrasing sets' questions and ``lab/data/personal_train.json``, and measured on ``personal_check.json``, the
held-out phrasing and the held-out kinds, which it never saw. English only.
"""

from __future__ import annotations

from .claims import ClaimModel, mask_quotes, shipped_model
from .text import is_question

MODEL_FILE = "personal_model.json"


def personal_model() -> ClaimModel:
    """The fitted personal-question model shipped with the package (``core/data/personal_model.json``)."""
    return shipped_model(MODEL_FILE)


def asks_about_self(message: str) -> bool:
    """Whether ``message`` is a question about its speaker's own life (quoted words masked: asking to translate a
    question asks nothing about oneself). A statement asks nothing ("I like apricots." tells): the model is
    fitted on questions, and only a question has an answer memory could lack."""
    text = mask_quotes(message[:600])
    return is_question(text) and personal_model().is_claim(text)
