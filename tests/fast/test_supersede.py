"""Which newer standing fact replaces which (``core.facts.supersedes`` with ``core.supersede``'s model): a changed
value in words the slot rule misses replaces the old one, two things of one kind both stand, another speaker's fact
never replaces. The statements are written for
these tests (none is in the generator's phrasing sets)."""

from __future__ import annotations

from dataclasses import fields

import pytest

from localpager.core import facts as facts_module
from localpager.core.facts import fact_of, facts_of, subject_of, supersedes
from localpager.core.records import Turn
from localpager.core.supersede import Shape, default_model, pair_features, shape


def _turns(*texts: str, speakers: tuple[str | None, ...] = ()) -> list[Turn]:
    return [Turn("user", t, i, speaker=speakers[i] if speakers else None) for i, t in enumerate(texts)]


def test_a_changed_value_in_new_words_replaces_the_old_one():
    said = "I have to file my taxes by March 4.", "Actually the tax filing cutoff moved to June 10."
    old, new = fact_of(said[0]), fact_of(said[1])
    assert old.kind == new.kind == "plan"
    assert not facts_module._by_slot(new, old)  # the slot rule alone does not link them ("taxe", "tax")
    assert supersedes(new, old)
    facts = facts_of(_turns(said[0], "How are you?", said[1]))
    assert [f.current for f in facts] == [False, True] and facts[0].superseded_by == facts[1].fact_id


def test_two_allergies_two_classes_two_budgets_and_two_friends_all_stand():
    facts = facts_of(_turns(
        "I'm allergic to peanuts.",
        "I'm now allergic to shellfish as well.",
        "I have a pottery class every Monday at 6 pm.",
        "I have a salsa class every Thursday at 7 pm.",
        "My budget for the laptop is $900.",
        "My budget for the bike is $400.",
        "My friend Ana Lopez is my emergency contact, 555-0102.",
        "My friend Ben Okafor is my climbing partner, 555-0199.",
    ))
    assert len(facts) == 8 and all(f.current for f in facts)


def test_another_speakers_fact_never_replaces():
    facts = facts_of(_turns("The code for my front door is 4411.", "I changed the front door code, it's 7734 now.",
                            speakers=("Ana", "Ben")))
    assert len(facts) == 2 and all(f.current for f in facts)
    same = facts_of(_turns("The code for my front door is 4411.", "I changed the front door code, it's 7734 now.",
                           speakers=("Ana", "Ana")))
    assert [f.current for f in same] == [False, True]


def test_the_shipped_model_reads_every_feature_it_has_weights_for():
    model = default_model()
    one = shape("number", subject_of("The code is 4411.", "number"), "The code is 4411.")
    found = pair_features(one, one)
    assert set(model.weights) == set(found) == set(model.means) == set(model.scales)
    assert 0.0 < model.threshold < 1.0 and all(0.0 <= v <= 1.0 for v in found.values())
    assert {f.name for f in fields(Shape)} >= {"slot", "words", "heads", "values"}


_OTHERS = ("I'm allergic to penicillin.", "My sister lives in Leeds.", "I drive a grey Skoda Octavia.")


@pytest.mark.parametrize("old, new", [
    ("My debit card is from Nationwide.", "I moved my salary over to Monzo last month; the old account is closed."),
    ("We get our groceries delivered by Ocado.", "We switched the weekly shop to Tesco deliveries."),
    ("I play the trumpet in a brass band.", "I sold my old instrument and took up the cello instead."),
])
def test_a_change_sharing_no_slot_word_replaces_the_fact_nearest_it_in_meaning_and_no_other(old, new):
    """``CurrentFacts._changed_nearest``: the two share no word the slot rule reads; the change replaces the fact
    its words mean most nearly, and the user's other facts stand."""
    facts = facts_of(_turns(old, *_OTHERS, new))
    assert [f.text for f in facts if f.current] == [*_OTHERS, new]


@pytest.mark.parametrize("new", [
    "Been seeing Kofi for my haircuts since I moved here.",  # a change word ("moved"), a first value
    "I cancelled that membership and joined the climbing wall instead.",  # near nothing enough
])
def test_a_first_value_or_a_change_near_nothing_replaces_none(new):
    facts = facts_of(_turns("I've had eczema since I was a kid.", "My gym is PureGym on the high street.", *_OTHERS,
                            new))
    assert all(f.current for f in facts)


@pytest.mark.parametrize("old, new", [
    ("The bike lock code is 6164.", "The garden gate code changed to 616."),  # one word shared: the slot rule's call
    ("My budget for the new flat is $841.", "The bike code changed to 6164."),  # two kinds named, two things
])
def test_a_change_replaces_none_whose_words_the_slot_rule_read_or_that_names_another_kind(old, new):
    facts = facts_of(_turns(old, *_OTHERS, new))
    assert all(f.current for f in facts)


@pytest.mark.parametrize("new", ["I switched gyms, I go to PureGym now.", "I switched my phone contract to Vodafone."])
def test_a_change_beside_too_few_facts_to_tell_replaces_none(new):
    """Beside one other fact, the nearest is no evidence: unrelated facts lie as near as the one a change changes."""
    facts = facts_of(_turns("My debit card is from Barclays, the blue one.", new))
    assert all(f.current for f in facts)


def test_another_speakers_change_replaces_nothing_by_meaning():
    said = "My debit card is from Nationwide.", "I moved my salary over to Monzo last month; the old account is closed."
    facts = facts_of(_turns(*said, speakers=("Ana", "Ben")))
    assert all(f.current for f in facts)
