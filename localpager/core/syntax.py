"""Whether a sentence asks for work to be done: an imperative, read from its parse.

A request is no claim about the speaker. "Book my usual table at the Italian place for Friday at 8pm." and
"Schedule my piano lesson for Tuesdays at 5pm." are full of the user's own details, and the claim model
(``claims``), which reads a sentence's frame as a bag of its words, read half of 30 such requests written to check
it as claims: they became standing facts and answered later questions. A verb it never saw opening a request is
no frame to it. English grammar says it in any words: the sentence's root is a verb in its base form, near its
start, with no subject. Unless the verb wraps a statement, a clause of its own with a subject ("Don't forget I'm
in Singapore.", "Note that our boiler is a Vaillant.", "Put on jazz and I'll be happy all day."): what that says
is a claim, and the claim model reads it. A clause asking whether ("Check whether my train is on time.") wraps
none.

The parse is spaCy's English pipeline, its tagger and parser (``models/manifest.toml``'s parser), loaded on first
use, once a process: a few milliseconds a sentence, asked only of a chat user's sentence something else already
took for a fact, or of a message the answer must classify. One parse at a time: a pipeline is not shared between
threads. English only, as the rest of the facts layer.
"""

from __future__ import annotations

import sys
import threading
from functools import cache, lru_cache
from typing import Any

from . import lexicon

SUBJECTS = frozenset({"nsubj", "nsubjpass", "expl", "csubj", "csubjpass"})
CLAUSES = frozenset({"ccomp", "parataxis", "conj"})  # a clause of its own beside or under the verb
ASKING = frozenset({"whether", "if"})  # what makes a wrapped clause a question, not a statement
OPENING = 2  # the root verb's place in its sentence at most: "Book ...", "Please book ...", "Now just book ..."
MAX_CHARS = 600  # a request, not a pasted page: longer text is not parsed
_FIRST_PERSON = lexicon.pattern("first_person")
_PARSING = threading.Lock()


@cache  # loaded under _PARSING: two threads asking first load it once
def pipeline() -> Any:
    """spaCy's English pipeline without the parts this module does not read (named entities, lemmas, the coarse
    parts of speech: a sixth of a parse's time). Its library (thinc) imports PyTorch on import when it is
    installed, for GPU models this one is not: held off while spaCy loads, it costs neither the second nor the
    memory (the embedder runs without it too), and a later import of it finds it as ever."""
    from .modelpaths import parser_path

    held = "torch" not in sys.modules
    if held:
        sys.modules["torch"] = None  # type: ignore[assignment]  # an import of it fails: thinc goes without
    try:
        import spacy
    finally:
        if held:
            del sys.modules["torch"]
    return spacy.load(parser_path(), exclude=["ner", "lemmatizer", "attribute_ruler"])  # the tags and the parse


def warm() -> None:
    """Load the pipeline now, off the path of a message: a conversation's warm-up does, so that the first sentence
    that needs a parse (a fact told in a request's form, a message the answer must classify) does not wait for it."""
    with _PARSING:
        pipeline()


@lru_cache(maxsize=1 << 14)
def asks_for_work(text: str) -> bool:
    """Whether a sentence of ``text`` is a request: its root a base-form verb among its first words, with no
    subject and no statement of its own under it (see the module docstring)."""
    words = text.split(maxsplit=1)
    if not words or len(text) > MAX_CHARS or _FIRST_PERSON.match(words[0]):
        return False  # a sentence that opens with its speaker ("I ...", "My sister ...") has its subject: no parse
    with _PARSING:
        parsed = pipeline()(text)
    for sentence in parsed.sents:
        root = sentence.root
        if (root.tag_ != "VB" or root.i - sentence.start > OPENING
                or any(child.dep_ in SUBJECTS for child in root.children)):
            continue
        if any(_states(child) for child in root.children if child.dep_ in CLAUSES):
            continue
        return True
    return False


def _states(clause: Any) -> bool:
    """A clause with a subject of its own that does not ask whether."""
    children = list(clause.children)
    return (any(c.dep_ in SUBJECTS for c in children)
            and not any(c.dep_ == "mark" and c.lower_ in ASKING for c in children))
