"""localpager.core.text: the one tokenizer, stop-word list, stemmers and content-word helpers."""

from __future__ import annotations

import pytest

from localpager.core.text import (
    STEMMERS,
    content_words,
    fold_plural,
    is_small_talk,
    is_stopword,
    light_stem,
    term_key,
    tokenize_words,
)
from localpager.lab.metrics import f1_stem, token_f1

WORDS = ["running", "painted", "repeatedly", "quickly", "boxes", "peanuts", "parties", "studied", "hiking", "hike",
         "glass", "bus", "this", "sing", "red", "needed", "speed", "ies", "cities", "EpiPen", "1200", "花生"]


def test_content_words_are_the_tokens_without_stop_words_stemmed_as_asked():
    text = "I'm allergic to Caroline's PEANUTS, and I carried 2 EpiPens"
    assert content_words(text) == tuple(w for w in tokenize_words(text) if w not in ("i'm", "to", "and", "i"))
    assert content_words(text, "plural") == tuple(fold_plural(w) for w in content_words(text))
    assert content_words(text, "light") == tuple(light_stem(w) for w in content_words(text))
    with pytest.raises(KeyError):
        content_words(text, "porter")
    assert set(STEMMERS) == {"none", "plural", "light"}


def test_the_f1_stemmer_is_the_one_every_f1_figure_was_computed_with():
    """Pinned word by word: ``token_f1`` must score as it did before the text toolkit moved."""

    def before(word: str) -> str:  # eval/metrics.py's _stem, as it was
        for suffix in ("ing", "edly", "ed", "ly", "es", "s"):
            if word.endswith(suffix) and len(word) - len(suffix) >= 3:
                return word[: -len(suffix)]
        return word

    assert [f1_stem(w) for w in WORDS] == [before(w) for w in WORDS]
    assert token_f1("She paints quickly", "she painting slowly") == pytest.approx(2 / 3)


def test_the_two_stemmers_differ_which_is_why_there_are_two():
    differ = {w: (f1_stem(w), light_stem(w)) for w in WORDS if f1_stem(w) != light_stem(w)}
    assert differ["quickly"] == ("quick", "quickly") and differ["cities"] == ("citi", "city")


def test_stop_words_small_talk_and_term_keys():
    assert is_stopword("Everyone's") and is_stopword("THANKS") and not is_stopword("peanut")
    assert is_small_talk("thanks!") and is_small_talk("ok, sounds good") and not is_small_talk("my peanut allergy")
    assert term_key("Peanuts") == term_key("peanut") == "peanut"
    assert term_key("Caroline's Cities") == "caroline city"
