"""A request before a colon either hands over a text to work on, whose words are then no claim of the user's
("Please check the grammar: My daughter is called Freya."), or gives the user's own words, to keep or as what the
task must fit ("Remember this: my daughter is called Freya.", "Plan a dinner menu: my husband is allergic to
shellfish.") (issue 38, item 2: never a fact from a request; item 1: facts in any words).

The sentences here were written for these tests: the request model (``core.requests``) was fitted on
``lab/data/requests_train.json`` and measured on ``requests_check.json``, never on these. Each one below was read
the other way before the model read it (``test_each_sentence_here_was_read_the_other_way_without_the_model``), so
every assertion could fail. The model reads the real parser and the default embedder's real word vectors.
"""

from __future__ import annotations

import json
from importlib import resources

import pytest

from localpager.core import facts as facts_module
from localpager.core import requests as requests_module
from localpager.core import word_vectors as word_vectors_module
from localpager.core.facts import extract, facts_of
from localpager.core.records import Turn
from localpager.core.requests import OWN, TEXT, colon_request, head_request
from localpager.core.syntax import request_words

# a text handed over: each a fact before the model read it
HANDED_OVER = [
    "Please check the grammar: My daughter is called Freya and she's seven.",  # a new user's check
    "Paraphrase this line: I'm allergic to kiwi.",
    "Shorten this email: my new accountant is Dana Wright; the old one retired.",
    "Can you shorten this: My husband is called Tomás and he works at the port.",  # a modal, the listener
    "Make this sound more formal: My husband is called Tomás and he works at the port.",  # an adjective's clause
]
# the user's own words: each no fact before it
OWN_WORDS = [
    "Remember this: my daughter is called Freya.",
    "Save this: my landlord is called Gareth Pryce.",
    "Find me a hotel: I use a wheelchair.",
    "Plan a dinner menu: my husband is allergic to shellfish.",
    "Can you save this for later: My partner only eats halal meat.",
    "Would you note this down: my brother Ilya lives in Tampere.",
]


def user(text: str, index: int = 0) -> Turn:
    return Turn(role="user", text=text, index=index)


@pytest.mark.parametrize("sentence", HANDED_OVER)
def test_the_words_of_a_text_handed_over_for_work_are_no_fact(sentence):
    assert colon_request(sentence) == TEXT
    assert extract(user(sentence)) == []


@pytest.mark.parametrize("sentence", OWN_WORDS)
def test_the_users_own_words_after_a_request_are_a_fact_quoted_whole(sentence):
    assert colon_request(sentence) == OWN
    (fact,) = extract(user(sentence))
    assert fact.text == sentence


def test_a_text_handed_over_replaces_no_fact():
    """The issue's hostile trial in a form without quotation marks: the words would say the allergy changed."""
    facts = facts_of([user("I'm seriously allergic to sesame.", 0),
                      user("Rewrite this nicely: Actually I'm no longer allergic to sesame.", 1)])
    assert [f.text for f in facts if f.current] == ["I'm seriously allergic to sesame."]


def test_the_users_own_words_after_a_request_replace_as_any_fact_does():
    facts = facts_of([user("My landlord is called Gareth Pryce.", 0),
                      user("Update your notes: my landlord is called Nia Rowe now.", 1)])
    assert [f.text for f in facts if f.current] == ["Update your notes: my landlord is called Nia Rowe now."]


@pytest.mark.parametrize("reading", ["colon_request"])
def test_each_sentence_here_was_read_the_other_way_without_the_model(monkeypatch, reading):
    monkeypatch.setattr(facts_module, reading, lambda sentence: None)
    facts_module._extract.cache_clear()
    try:
        assert all(extract(user(s)) for s in HANDED_OVER)
        assert not any(extract(user(s)) for s in OWN_WORDS)
    finally:
        facts_module._extract.cache_clear()


@pytest.mark.parametrize("head, words", [
    ("Please check the grammar", "check the grammar"),  # what comes before the verb says nothing
    ("Remember this", "remember this"),
    ("Can you make this less blunt", "make this less blunt"),  # asked of the listener with a modal
    ("Could you keep this in mind", "keep this in mind"),
    ("Make this sound less robotic", "make this sound less robotic"),  # what to make of the text: an adjective's clause
    ("Can my sister come", None),  # a modal question of someone else: no request
    ("Quick update", None),  # a label, no request
    ("My friend wrote", None),  # a subject: no request
    ("I've got news", None),
])
def test_the_request_is_read_from_the_parse(head, words):
    assert request_words(head) == words


@pytest.mark.parametrize("sentence", ["Quick update: I moved to Lyon.", "Fun fact: I have two dogs.",
                                      "Translate this", "Remember: me", "What time is it: 7:40?"])
def test_a_label_or_a_sentence_without_two_words_after_its_colon_is_no_request(sentence):
    assert colon_request(sentence) is None


def test_a_request_before_a_colon_reads_as_before_without_the_word_vectors(monkeypatch):
    monkeypatch.setattr(word_vectors_module, "default_vectors", lambda: None)
    assert head_request(HANDED_OVER[0]) == "check the grammar"
    assert colon_request(HANDED_OVER[0]) is None


def _data(part: str) -> dict:
    return json.loads(resources.files("localpager.lab").joinpath("data", f"requests_{part}.json").read_text())


def test_the_check_sentences_written_apart_read_as_labelled():
    """Measured on sentences the model was never fitted on (``benchmarks/traits.py`` prints the figures): a text
    read as the user's own would be a fact, so the model's threshold keeps those few; a request it does not read
    as one reads as before."""
    check, model = _data("check"), requests_module.shipped_model()
    own = [model.lasts(head_request(s)) for s in check["own"] if head_request(s)]
    text = [model.lasts(head_request(s)) for s in check["text"] if head_request(s)]
    assert sum(own) / len(own) >= 0.75
    assert sum(text) / len(text) <= 0.05


def test_the_training_and_check_sentences_are_apart_and_labelled_once():
    data = {part: _data(part) for part in ("train", "check")}
    for d in data.values():
        assert d["about"] and d["own"] and d["text"]
        assert not set(d["own"]) & set(d["text"])
    train = set(data["train"]["own"] + data["train"]["text"])
    assert not train & set(data["check"]["own"] + data["check"]["text"])
    assert not train & set(HANDED_OVER + OWN_WORDS)
