"""Whether a statement says that something changed (``core.changes``): the lexicon's change words, or a model
learned from the training sets' corrections that reads changes told in other words. The sentences here were
written for these tests; the model was fitted on the phrasing and kind sets' templates and measured on the held-out
ones (``benchmarks/changes.py``), never on these.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from localpager.core.changes import CHANGE_CUE, ChangeModel, features, says_changed, shipped_model

# told in words the lexicon's change list does not hold: before the model, none of them read as a change
CHANGED_IN_OTHER_WORDS = [
    "Turns out I had the wrong size all along; the fitter put me at EU 38.",
    "From next month my rent goes up to 1,150.",
]
FIRST_STATEMENTS = [
    "I've banked with Lloyds for years.",
    "I'm allergic to peanuts and penicillin.",
    "My sister lives in Porto.",
    "We go to Brittany every August.",
    "My daughter is called Freya.",
    "I drink green tea first thing every morning.",
    "I work at Halcyon Bank.",
]


@pytest.mark.parametrize("sentence", CHANGED_IN_OTHER_WORDS)
def test_a_change_told_in_words_no_list_holds_is_read(sentence):
    assert not CHANGE_CUE.search(sentence)  # the lexicon alone would miss it
    assert says_changed(sentence)


@pytest.mark.parametrize("sentence", FIRST_STATEMENTS)
def test_a_first_statement_says_nothing_changed(sentence):
    assert not says_changed(sentence)


def test_the_lexicons_change_words_still_count():
    assert says_changed("I'm no longer allergic to sesame.")
    assert says_changed("We live in Lyon now.")


def test_a_model_without_weights_reads_nothing_and_a_learned_word_weighs():
    assert ChangeModel({}, -3.0, 0.5).probability("Turns out I'm a UK 7.") < 0.5
    model = ChangeModel({"turns_out": 4.0}, -2.0, 0.5)
    assert model.probability("Turns out I'm a UK 7.") > 0.5
    assert model.probability("It turns blue when out of date.") < 0.5  # a pair is two words side by side
    assert "turns_out" in features("Turns out I'm a UK 7.")


def test_the_shipped_model_lets_few_first_statements_through():
    model = shipped_model()
    assert 0.5 <= model.threshold < 1 and model.weights
    assert sum(model.probability(s) >= model.threshold for s in FIRST_STATEMENTS) == 0


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=300))
def test_any_text_reads_as_changed_or_not(text):
    assert says_changed(text) in (True, False)
