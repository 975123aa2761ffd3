"""What a user says they are, or do, becomes a standing fact when it stays true of them ("I'm left-handed.", "We're
both teachers.", "We keep ducks on the pond."), and not when it passes ("I'm tired.", "I'm on the train.", "I need
a plumber.") (issue 38, item 1: facts in any words).

The sentences here were written for these tests: the trait and habit models (``core.traits``) were fitted on
``lab/data/traits_train.json`` and ``habits_train.json`` and measured on their ``_check.json``, never on
these. Each new lasting one was no fact before a model read it (``test_each_new_sentence_here_...``), so every
assertion below could fail. The models read the real parser and the default embedder's real word vectors.
"""

from __future__ import annotations

import json
from importlib import resources

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from localpager.core import facts as facts_module
from localpager.core import word_vectors as word_vectors_module
from localpager.core.facts import extract, facts_of
from localpager.core.records import Turn
from localpager.core.syntax import habit_description, result_description, self_description
from localpager.core.traits import TraitModel, describes_speaker, habitual, lasting, lasting_result, shipped_model
from localpager.core.word_vectors import default_vectors

# each no fact before the trait model read it
NEW = [
    "I'm left-handed, which makes notebooks annoying.",  # a new user's check
    "I'm deaf in my right ear.",
    "I'm hypoglycaemic.",
    "Oh and I'm half Japanese.",
    "I'm mildly autistic, so loud places are hard.",
    "We're Baptists.",
    "I've been a lifelong insomniac.",  # the perfect of "be"
]
# facts before it too (by a cue or the fact model), and still
LASTING = NEW + [
    "Oh and I'm colour blind, so the charts all look grey to me.",
    "We're Quakers, so no alcohol at the wedding.",
    "I'm a registered nurse.",
]
PASSING = [
    "I'm shattered after that meeting.",
    "I'm at the bakery.",
    "We're so pleased with the new sofa.",
    "I'm a bit lost with this spreadsheet.",
    "I'm late for the dentist.",
]


def user(text: str, index: int = 0) -> Turn:
    return Turn(role="user", text=text, index=index)


@pytest.mark.parametrize("sentence", LASTING)
def test_a_lasting_description_of_the_user_is_a_fact(sentence):
    assert lasting(sentence)
    (fact,) = extract(user(sentence))
    assert fact.text in sentence and fact.kind


@pytest.mark.parametrize("sentence", PASSING)
def test_a_passing_state_is_no_fact(sentence):
    assert not lasting(sentence)
    assert extract(user(sentence)) == []


@pytest.mark.parametrize("sentence", ["I'm not diabetic.", "Imagine I'm diabetic.", "I'm not sure I'm diabetic.",
                                      "My friend wrote: I'm diabetic.", "Am I diabetic?",
                                      "Write a story where I'm diabetic."])
def test_a_description_denied_imagined_doubted_quoted_or_asked_is_no_fact(sentence):
    assert extract(user(sentence)) == []


def test_a_transcripts_speaker_is_not_read_for_traits():
    said = Turn(role="user", text="I'm left-handed.", index=0, speaker="Caroline")
    assert extract(said) == []


def test_a_lasting_description_stands_beside_the_facts_around_it():
    facts = facts_of([user("I'm allergic to peanuts.", 0), user("I'm hypoglycaemic.", 1), user("I'm tired.", 2)])
    assert [f.text for f in facts if f.current] == ["I'm allergic to peanuts.", "I'm hypoglycaemic."]


@pytest.mark.parametrize("text, description", [
    ("I'm left-handed, which makes notebooks annoying.", "left-handed"),
    ("Oh and we're both teachers.", "both teachers"),
    ("I'm on blood thinners.", "on blood thinners"),
    ("I am a season ticket holder at Leeds.", "a season ticket holder at Leeds"),
    ("I'm hypoglycaemic, so I can't skip meals.", "hypoglycaemic"),  # the other clause's "not" denies nothing here
    ("I've been a volunteer firefighter for a decade.", "a volunteer firefighter for a decade"),
    ("I'm running late.", None),  # what they are doing
    ("I'm not diabetic.", None),
    ("My sister is diabetic.", None),  # not the speaker
    ("You're a nurse.", None),
])
def test_the_description_is_read_from_the_parse(text, description):
    assert self_description(text) == description


def test_the_speaker_and_be_are_found_before_any_parse():
    assert describes_speaker("Oh and I'm left-handed.") and describes_speaker("We are both teachers.")
    assert describes_speaker("I've been a nurse for years.") and describes_speaker("We have been vegan since 2019.")
    assert not describes_speaker("My sister is left-handed.") and not describes_speaker("I think so.")


def test_the_word_vectors_tell_a_lasting_description_from_a_passing_one_by_meaning():
    """The same frame with another word reads the other way: the words' meaning, not the frame, decides."""
    model, vectors = shipped_model(), default_vectors()
    assert vectors is not None
    assert model.lasts(self_description("I'm asthmatic."), vectors=vectors)
    assert not model.lasts(self_description("I'm exhausted."), vectors=vectors)


def test_without_the_word_vectors_no_description_is_read_as_lasting(monkeypatch):
    monkeypatch.setattr(word_vectors_module, "default_vectors", lambda: None)
    assert not shipped_model().lasts("asthmatic") and not lasting("I'm asthmatic.")


def test_a_model_with_no_weights_reads_nothing_as_lasting():
    vectors = default_vectors()
    empty = TraitModel(np.zeros(2 * vectors.dimensions, dtype=np.float32), -5.0, 0.5)
    assert not empty.lasts("asthmatic", vectors=vectors) and not empty.lasts(None, vectors=vectors)


@pytest.mark.parametrize("name, reads, share", [("traits", lasting, 0.9), ("habits", habitual, 0.9),
                                               ("results", lasting_result, 0.45)])
def test_the_check_sentences_written_apart_read_as_labelled(name, reads, share):
    """Measured on sentences the models were never fitted on (``benchmarks/traits.py`` prints the figures)."""
    check = json.loads(resources.files("localpager.lab").joinpath("data", f"{name}_check.json").read_text())
    found = [reads(s) for s in check["lasting"]]
    kept = [reads(s) for s in check["passing"]]
    assert sum(found) / len(found) >= share  # the result model keeps precision first: what it misses stays on a page
    assert sum(kept) / len(kept) <= 0.1


@pytest.mark.parametrize("name", ["traits", "habits", "results"])
def test_the_training_and_check_sentences_are_apart_and_labelled_once(name):
    data = {part: json.loads(resources.files("localpager.lab").joinpath("data", f"{name}_{part}.json").read_text())
            for part in ("train", "check")}
    for d in data.values():
        assert d["about"] and d["lasting"] and d["passing"]
        assert not set(d["lasting"]) & set(d["passing"])
    train = set(data["train"]["lasting"] + data["train"]["passing"])
    assert not train & set(data["check"]["lasting"] + data["check"]["passing"])
    assert not train & set(LASTING + PASSING + HABITS + REMARKS + RESULTS + EVENTS)


# each no fact before the habit model read it: a plain present whose object names nothing particular
HABITS = ["We keep ducks on the pond.", "I play the bassoon.", "I grow chillies in the greenhouse.",
          "We cook with gas.", "I walk the dog before work."]
REMARKS = ["I need a plumber.", "I have a toothache.", "I enjoy your stories.", "I want a cheaper flight."]

# each no fact before the result model read it: an event told in the past whose result stays true
RESULTS = ["We just adopted a rescue greyhound called Pepper.",  # a new user's check
           "I started a new job at the council.", "We bought a cottage in the Lake District last year.",
           "I've joined a bouldering club."]
EVENTS = ["I bought a pint of oat milk on the way home.", "We watched a film at the Odeon.", "I had a lovely time at the fair.",
          "I got a great idea for a story."]


@pytest.mark.parametrize("sentence", HABITS)
def test_a_way_the_user_lives_told_in_the_plain_present_is_a_fact(sentence):
    assert habitual(sentence)
    (fact,) = extract(user(sentence))
    assert fact.text == sentence


@pytest.mark.parametrize("sentence", REMARKS)
def test_a_want_a_need_or_a_passing_state_in_the_same_frame_is_no_fact(sentence):
    assert not habitual(sentence)
    assert extract(user(sentence)) == []


@pytest.mark.parametrize("reading, sentences", [("lasting", NEW), ("habitual", HABITS), ("lasting_result", RESULTS)])
def test_each_new_sentence_here_was_no_fact_without_its_model(monkeypatch, reading, sentences):
    """The tests here could fail: without the trait or habit reading, the new sentences here were no fact (the
    fact model reads "I'm" and a word it was not fitted on as a passing state; a habit needed a name in its
    object)."""
    monkeypatch.setattr(facts_module, reading, lambda text: False)
    facts_module._extract.cache_clear()
    try:
        assert [s for s in sentences if extract(user(s))] == []
    finally:
        facts_module._extract.cache_clear()


def test_a_clause_is_not_read_for_a_habit_so_its_sentence_stays_whole():
    """Read alone, "I catch up on the phone each week." is a habit; split from its sentence, the first clause
    ("Sunday evening is when my mum") would mean nothing."""
    sentence = "Sunday evening is when my mum and I catch up on the phone each week."
    assert [f.text for f in extract(user(sentence))] == [sentence]


@pytest.mark.parametrize("text, description", [
    ("We heat the house with a wood burner.", "heat the house with a wood burner"),
    ("I don't eat meat.", "eat meat"),
    ("I take your point.", None),  # the listener's
    ("I visit her every month.", None),  # whom, read alone, it does not say
    ("I might buy a bike.", None),  # a modal
    ("I'm a nurse.", None),  # "be": a description, not a habit
])
def test_the_habit_is_read_from_the_parse(text, description):
    assert habit_description(text) == description


_WORDS = st.sampled_from(["I", "'m", "am", "we", "'re", "not", "a", "nurse", "left", "-", "handed", ",", "which",
                          "tired", "on", "the", "train", "?", ":", "\n", "\u00e9", "so", "both"])


@settings(max_examples=60, deadline=None)
@given(st.one_of(st.text(max_size=200), st.lists(_WORDS, max_size=30).map(" ".join)))
def test_any_text_reads_as_lasting_or_not_and_extracts_without_error(text):
    assert lasting(text) in (True, False)
    assert isinstance(extract(user(text)), list)


@pytest.mark.parametrize("sentence", RESULTS)
def test_an_event_whose_result_stays_true_is_a_fact(sentence):
    assert lasting_result(sentence)
    (fact,) = extract(user(sentence))
    assert fact.text == sentence


@pytest.mark.parametrize("sentence", EVENTS)
def test_an_event_that_only_happened_is_no_fact(sentence):
    assert not lasting_result(sentence)
    assert extract(user(sentence)) == []


@pytest.mark.parametrize("text, description", [
    ("We just adopted a rescue greyhound called Pepper.", "adopted a rescue greyhound called Pepper"),
    ("I've joined a bouldering club.", "joined a bouldering club"),  # the present perfect
    ("I became a grandmother.", "became a grandmother"),  # a complement
    ("I didn't adopt the cat.", None),  # denied
    ("I might buy a cottage.", None),  # a modal
    ("I bought it last week.", None),  # a pronoun: read alone, it says nothing of what
    ("My sister bought a cottage.", None),  # not the speaker
    ("I buy my bread at Gail's.", None),  # the present: a habit's frame
])
def test_the_result_is_read_from_the_parse(text, description):
    assert result_description(text) == description


def test_a_clause_is_not_read_for_a_result():
    """A clause alone says less than its sentence: "... and we adopted a greyhound" is read with the rest."""
    assert facts_module._extract("We just adopted a rescue greyhound called Pepper.", True, True) == ()


@pytest.mark.parametrize("old, new", [
    ("I'm a nurse.", "Actually I'm a midwife now."),  # a new user's check: both had stood
    ("I'm vegetarian.", "I'm vegan now."),
    ("I'm a Catholic.", "I'm a Buddhist these days."),
    ("I'm based in Leeds.", "I'm based in York now."),
])
def test_a_changed_description_replaces_the_one_it_changes_and_no_other(old, new):
    facts = facts_of([user(old, 0), user("I'm left-handed.", 1), user(new, 2)])
    assert [f.text for f in facts if f.current] == ["I'm left-handed.", new]


@pytest.mark.parametrize("new", ["I'm diabetic now.",  # a new condition: near no description enough
                                 "I'm also a trained lifeguard.",  # one more: it adds
                                 "My friend says I'm a midwife now."])  # someone else's claim
def test_a_description_that_changes_none_replaces_none(new):
    facts = facts_of([user("I'm a nurse.", 0), user("I'm left-handed.", 1), user(new, 2)])
    assert [f.text for f in facts if f.current][:2] == ["I'm a nurse.", "I'm left-handed."]


def test_without_the_word_vectors_no_description_replaces_another(monkeypatch):
    monkeypatch.setattr(word_vectors_module, "default_vectors", lambda: None)
    facts = facts_of([user("I'm vegetarian.", 0), user("I'm vegan now.", 1)])
    assert all(f.current for f in facts)


def test_a_changed_description_replaces_the_one_it_changes_in_a_store_reopened_between_them(fake_pager, tmp_path):
    """The store reads its standing facts back when a later turn states one: the description read then too."""
    lp = fake_pager()
    chat = lp.conversation("c", create=True)
    chat.add_turn("user", "I'm a nurse.")
    chat.add_turn("user", "I'm left-handed.")
    lp.close()
    again = fake_pager(path=tmp_path / "store.db").conversation("c")
    again.add_turn("user", "Actually I'm a midwife now.")
    assert [f.text for f in again.facts()] == ["I'm left-handed.", "Actually I'm a midwife now."]
