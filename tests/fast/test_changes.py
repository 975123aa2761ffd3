"""Whether a statement says that something changed (``core.changes``): the lexicon's change words, or a model
learned from the training sets' corrections that reads changes told in other words. The sentences here were
written for these tests; the model was fitted on the phrasing and kind sets' templates and measured on the held-out
ones (``benchmarks/changes.py``), never on these.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from localpager.core.changes import (CHANGE_CUE, ChangeModel, addition_model, adds, features, says_changed,
                                     shipped_model)
from localpager.core.facts import facts_of
from localpager.core.records import Turn

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


# one more of something, told with the lexicon's change words ("now", "new"): before the addition model each read as a
# change, and a change lets the older value give way
ADDITIONS = [
    "I've now become allergic to kiwi as well.",
    "Now we've got a dog too, called Pip.",
    "We now have a second car, an electric Mini.",
    "I also play in a five-a-side team now.",
]
CHANGES = ["I moved to Lyon in May.", "My new dentist is Dr Shah; the old one retired.", "I'm now a vegan.",
           "Now I work from home on Fridays."]


@pytest.mark.parametrize("sentence", ADDITIONS)
def test_one_more_of_something_says_no_change(sentence):
    assert CHANGE_CUE.search(sentence)  # the lexicon alone reads a change
    assert adds(sentence) and not says_changed(sentence)


@pytest.mark.parametrize("sentence", CHANGES)
def test_a_change_is_no_addition(sentence):
    assert not adds(sentence) and says_changed(sentence)


def test_the_shipped_addition_model_lets_few_changes_through():
    model = addition_model()
    assert 0.5 <= model.threshold < 1 and model.weights
    assert not any(model.probability(s) >= model.threshold for s in CHANGED_IN_OTHER_WORDS + CHANGES)


@pytest.mark.parametrize("first, more", [
    ("My son plays football.", "My son now plays cricket as well."),
    ("We have a cat called Miso.", "We now have another cat too, called Tofu."),
    ("I volunteer at the food bank on Saturdays.", "I now also volunteer at the library on Saturdays."),
])
def test_an_addition_replaces_nothing_at_ingest(first, more):
    # the two share their slot's words and "now" says a change: the written slot rule took the newer for the older's
    # new value, and the older stopped standing
    assert [f.current for f in facts_of([Turn("user", first, 0), Turn("user", more, 1)])] == [True, True]


@pytest.mark.parametrize("first, changed", [
    ("My brother lives in Leeds.", "My brother lives in York now."),
    ("My daughter goes to Hillside Primary.", "My daughter goes to Oakwood Academy now."),
    ("My sister works as a nurse.", "My sister works as a teacher now."),
])
def test_a_change_told_with_now_is_no_addition(first, changed):
    # the addition model had learned "now" from the additions it was fitted on (weight 1.7): these read as one more
    # brother, school, job, and the older value stood
    assert not adds(changed)
    assert [f.current for f in facts_of([Turn("user", first, 0), Turn("user", changed, 1)])] == [False, True]


def test_a_change_still_replaces_at_ingest():
    said = ["My son plays football.", "My son switched from football to cricket."]
    assert [f.current for f in facts_of([Turn("user", text, i) for i, text in enumerate(said)])] == [False, True]


@pytest.mark.parametrize("first, changed", [
    ("The door code is 4471.", "I changed the code, it's 7734 now."),
    ("My salsa class is on Wednesdays at 8pm.", "The class got moved to Fridays at 6."),
    ("The garage code is 1290.", "New code: 5531."),
])
def test_a_change_that_names_only_its_kind_replaces_the_one_of_that_kind(first, changed):
    # "the code" names no slot word, so it shared none with the door code: both stood and the old code answered
    said = [first, "Can you recommend a podcast?", changed]
    facts = facts_of([Turn("user", text, i) for i, text in enumerate(said)])
    assert [(f.text, f.current) for f in facts] == [(first, False), (changed, True)]


@pytest.mark.parametrize("first, other", [
    ("My aunt lives in Leeds.", "My cousin lives in Leeds."),
    ("My grandson's name is Theo.", "My nephew's name is Theo."),
])
def test_two_of_the_speakers_people_never_replace_each_other(first, other):
    said = [first, other]
    assert all(f.current for f in facts_of([Turn("user", text, i) for i, text in enumerate(said)]))


def test_a_new_value_of_one_of_the_speakers_people_still_replaces_the_old():
    said = ["My aunt lives in Leeds.", "My aunt moved to York last spring."]
    assert [f.current for f in facts_of([Turn("user", text, i) for i, text in enumerate(said)])] == [False, True]


def test_a_password_of_letters_and_digits_is_a_value_a_change_names():
    # "greenfrog9" was no value (the lexicon's codes began with capitals), so the change named none and stated no fact
    said = ["Our wifi password is bluefish22.", "I changed the wifi password to greenfrog9."]
    facts = facts_of([Turn("user", text, i) for i, text in enumerate(said)])
    assert [(f.text, f.current) for f in facts] == [(said[0], False), (said[1], True)]


def test_a_change_that_names_only_its_kind_replaces_nothing_when_two_of_that_kind_stand():
    said = ["The door code is 4471.", "My bike lock code is 1234.", "I changed the code, it's 7734 now."]
    assert all(f.current for f in facts_of([Turn("user", text, i) for i, text in enumerate(said)]))
    # nor when it says no change: a second code told alone is one more of the kind
    said = ["The door code is 4471.", "The code is 7734."]
    assert all(f.current for f in facts_of([Turn("user", text, i) for i, text in enumerate(said)]))


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=300))
def test_any_text_reads_as_changed_or_not(text):
    assert says_changed(text) in (True, False)


def test_a_store_replaces_the_kind_only_change_and_keeps_two_people_across_a_reopen(fake_pager, tmp_path):
    # the store keeps its standing facts turn by turn (its own CurrentFacts), and a reopened store reads them back
    path = tmp_path / "kinds.db"
    chat = fake_pager(path=path).conversation("c", create=True)
    for text in ["The door code is 4471.", "My aunt lives in Leeds.", "I changed the code, it's 7734 now.",
                 "My cousin lives in Leeds."]:
        chat.add_turn("user", text, stamp=False)
    current = {f.text for f in chat.facts()}
    assert current == {"My aunt lives in Leeds.", "I changed the code, it's 7734 now.", "My cousin lives in Leeds."}
    again = fake_pager(path=path).conversation("c")
    again.add_turn("user", "New code: 9120.", stamp=False)
    assert {f.text for f in again.facts()} == {"My aunt lives in Leeds.", "My cousin lives in Leeds.",
                                               "New code: 9120."}


def test_a_store_keeps_two_values_of_one_sentence_apart_and_no_supposed_code_across_a_reopen(fake_pager, tmp_path):
    # this pass's readings through the store's own CurrentFacts, turn by turn, and after a reopen
    path = tmp_path / "codes.db"
    chat = fake_pager(path=path).conversation("c", create=True)
    for text in ["Hi! The guest wifi password is tulip77 and the alarm code for the garage is 5312.",
                 "Imagine the alarm code for the garage is 1111. How would I remember it?"]:
        chat.add_turn("user", text, stamp=False)
    assert {f.text for f in chat.facts()} == {"The guest wifi password is tulip77",
                                              "The alarm code for the garage is 5312."}
    again = fake_pager(path=path).conversation("c")
    again.add_turn("user", "I changed the guest wifi password to orchid55.", stamp=False)
    assert {f.text for f in again.facts()} == {"The alarm code for the garage is 5312.",
                                               "I changed the guest wifi password to orchid55."}


def test_a_change_the_pair_bank_scores_well_below_the_statement_it_changes_still_answers():
    # the bank scored a change 0.1 to 0.3 below the statement it changed ("I moved
    # everything over to Monzo ..." 0.71 against the old card's 0.83), and the older answered (``NEEDED_GAP``)
    from localpager.retrieval.facts import newer_needed
    said = ["My debit card is from Barclays, the blue one.", "I'm allergic to penicillin.",
            "I moved everything over to Monzo last month; the old account is closed."]
    facts = facts_of([Turn("user", text, i) for i, text in enumerate(said)])
    assert len(facts) == 3
    question = "Which bank am I with?"
    assert newer_needed(question, facts, 0, np.array([0.83, 0.1, 0.6]), 0.45) == 2
    # below the bank's threshold, or far below the chosen one, it is not what the message needs
    assert newer_needed(question, facts, 0, np.array([0.83, 0.1, 0.4]), 0.45) is None
    assert newer_needed(question, facts, 0, np.array([0.95, 0.1, 0.5]), 0.45) is None
    # a fact between them that tells no change is passed over, however the bank scores it
    assert newer_needed(question, facts, 0, np.array([0.83, 0.8, 0.6]), 0.45) == 2


@pytest.mark.parametrize("said", ["Pilates is Thursday at 6pm from next month.",
                                  "Swimming is at 8am on Saturdays from next term."])
def test_a_change_of_the_users_told_in_words_the_lexicon_lacks_is_a_fact_without_a_first_person(said):
    # a change of theirs needs no "I" (``facts._changes_own``); it asked the lexicon's change words alone, and
    # "from next month" is none of them: the change model reads it
    assert not CHANGE_CUE.search(said) and says_changed(said)
    (fact,) = facts_of([Turn("user", said, 0)])
    assert fact.text == said


def test_two_values_told_in_one_sentence_are_two_facts_and_a_change_of_one_leaves_the_other():
    # one fact for both: a new wifi password replaced it, and the door code went with it
    said = ["Hi! The guest wifi password is tulip77 and the alarm code for the garage is 5312.",
            "I changed the guest wifi password to orchid55."]
    facts = facts_of([Turn("user", text, i) for i, text in enumerate(said)])
    current = sorted(f.text for f in facts if f.current)
    assert current == ["I changed the guest wifi password to orchid55.", "The alarm code for the garage is 5312."]


@pytest.mark.parametrize("said", ["We rent from Tomasz Nowak, and the quickest way to reach him is 555-0143.",
                                  "The optician measured me at minus 2.5, and that's what my glasses are."])
def test_a_second_clause_that_leans_on_the_first_is_not_cut_from_it(said):
    (fact,) = facts_of([Turn("user", said, 0)])
    assert fact.text == said


@pytest.mark.parametrize("first, changed", [
    ("I work as a staff nurse at the Royal Infirmary.", "New job title: ward manager."),
    ("My hobby is knitting, mostly socks.", "New hobby since the spring: pottery, at the community centre."),
])
def test_a_label_saying_a_change_then_a_short_value_is_a_fact(first, changed):
    # no first person and no capital or digit in its value ("ward manager"): it named nothing particular, and the
    # older value stood alone
    facts = facts_of([Turn("user", first, 0), Turn("user", changed, 1)])
    assert changed in [f.text for f in facts if f.current]


def test_a_label_saying_a_change_then_a_remark_is_no_fact():
    assert facts_of([Turn("user", "Change of plan: only ten minutes left in the film.", 0)]) == []
