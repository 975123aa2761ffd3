"""Whether the words after a request's colon are the user's own or a text handed over to work on.

"Please check the grammar: My daughter is called Freya." asks for work on a text: its words are the task's
material, no claim of the user's, and kept as a fact it answered "What's my daughter's name?" as if told. "Remember
this: my daughter is called Freya." and "Plan my meals for the week: I'm vegetarian." give the user's own words,
to keep or as what the task must fit; the claim model read the first as a request and kept nothing. The verbs of
either cannot be listed. The parse finds a request before a colon (``syntax.request_words``: a base-form verb
with no subject, or one asked of the listener with a modal, "Can you shorten this", from the verb on); a logistic
model over the default embedder's word vectors (``traits.features``: the first word's vector and the words' sum),
learned from labelled sentences (``lab/data/requests_train.json``),
says which it is. Refit with ``python benchmarks/traits.py --fit`` (it measures ``requests_check.json``, written
apart). Read only of a chat user's sentence; without the word vectors, not at all. English only.
"""

from __future__ import annotations

from functools import lru_cache

from . import word_vectors
from .syntax import request_words
from .traits import TraitModel, load_model

MODEL_FILE = "request_model.json"
OWN, TEXT = "own", "text"  # the words after the colon: the user's own; a text handed over to work on


@lru_cache(maxsize=1)
def shipped_model() -> TraitModel:
    """The fitted request model shipped with the package (``core/data/request_model.json``): its positive class is
    ``OWN``."""
    return load_model(MODEL_FILE)


def head_request(sentence: str) -> str | None:
    """The request words of what comes before ``sentence``'s colon (``syntax.request_words``), when it has a colon
    followed by at least two words; else None."""
    head, colon, rest = sentence.partition(": ")  # a label's colon, not a time's ("7:40")
    if not colon or len(rest.split()) < 2 or not head.strip():
        return None
    return request_words(head.strip())


def colon_request(sentence: str) -> str | None:
    """``OWN`` or ``TEXT`` when what comes before ``sentence``'s colon is a request (``head_request``), by the shipped
    request model; else None, and None without the word vectors."""
    words = head_request(sentence)
    if words is None:
        return None
    vectors = word_vectors.default_vectors()
    if vectors is None:
        return None
    return OWN if shipped_model().lasts(words, vectors) else TEXT
