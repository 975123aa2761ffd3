"""The read-time supersession (``retrieval.facts.newer_value``) with the real embedder and the fitted model.

Ingest compares a new fact only with the facts it shares a word with, so a change told in other words leaves both
values current; answering, the pair's meaning decides. Two different things of one kind stay apart. The sentences
are written for these tests, never taken from the generator.
"""

from __future__ import annotations

import pytest

from localpager.core.facts import facts_of
from localpager.core.records import Turn
from localpager.retrieval.embedder import default_embedder
from localpager.retrieval.facts import FactRanker

pytestmark = [pytest.mark.embedder]

OLD = "I watch everything on Netflix, it's my only subscription."
NEW = "I cancelled that and pay for Apple TV now instead."


@pytest.fixture(scope="module")
def embed():
    return default_embedder().encode


def _ranker(said: list[str], embed) -> FactRanker:
    return FactRanker(facts_of([Turn("user", text, i) for i, text in enumerate(said)]), embed)


def test_a_change_in_other_words_answers_with_the_newer_value(embed):
    said = [OLD, "I'm allergic to penicillin.", NEW]
    facts = facts_of([Turn("user", text, i) for i, text in enumerate(said)])
    assert all(f.current for f in facts), "the precondition: ingest kept both values current"
    hit = _ranker(said, embed).best("Which streaming service do I pay for?")
    assert hit.fact.text == NEW
    assert [f.text for f in hit.replaced] == [OLD]


@pytest.mark.parametrize("said, question", [
    (["I'm allergic to peanuts.", "I'm also allergic to shellfish."], "Am I allergic to peanuts?"),
    (["My sister Ana lives in Lisbon.", "My brother Tom lives in Berlin."], "Where does my sister live?"),
    # two of the speaker's people sharing a town: the supersession model read one thing in "lives" and "Leeds"
    (["My aunt lives in Leeds.", "My cousin lives in Leeds."], "Where does my aunt live?"),
    # ... or told with a word of change: answering, all three read-time tests took the later for a new value
    (["My aunt works at the bank.", "My uncle works at the post office now."], "Where does my aunt work?"),
    (["My niece is called Ana.", "My nephew is called Leo now."], "What's my niece called?"),
    (["My dentist is Dr Okafor.", "Change of plans, I'm now on flight KL 119."], "Who is my dentist?"),
    # one more of something, told with "now": read as a change, the newer answered in the older's place
    (["I'm allergic to walnuts.", "I've now become allergic to kiwi as well."], "What am I allergic to?"),
    (["We have a cat called Miso.", "Now we've got a dog too, called Pip."], "What's my cat called?"),
])
def test_two_different_things_never_replace_each_other(said, question, embed):
    hit = _ranker(said, embed).best(question)
    assert hit.fact.text == said[0] and hit.replaced == []


BANK = "My debit card is from Barclays, the blue one."


def test_a_later_fact_the_pair_bank_says_the_question_needs_answers_when_it_tells_a_change(embed):
    # the two share no word, and neither pair model reads them as one thing; messages like the question needed
    # both kinds of sentence (``newer_needed``)
    said = [BANK, "I'm allergic to penicillin.", "I switched everything over to Nationwide this spring; the old account is closed."]
    hit = _ranker(said, embed).best("Which bank am I with?")
    assert hit.fact.text == said[2]
    assert [f.text for f in hit.replaced] == [BANK]


@pytest.mark.parametrize("later", ["I switched gyms, I go to PureGym now.", "I switched my phone contract to Vodafone."])
def test_a_later_change_of_another_thing_leaves_the_answer(later, embed):
    hit = _ranker([BANK, later], embed).best("Which bank am I with?")
    assert hit.fact.text == BANK and hit.replaced == []


def test_an_older_value_of_its_own_thing_is_no_rival_to_the_newer(embed):
    # the supersession models kept both current (a move told twice, the second "Actually ... now"); the fact model's
    # gap read the older value as a rival and took the newer to 0.37, under its threshold: without the pair bank
    # (another embedder), "Which city do I live in?" got no fact at all
    said = ["I just moved to Rotterdam for a job at Vopak.", "I drive a red Fiat Panda.",
            "Actually we moved again, we live in Utrecht now."]
    ranker = FactRanker(facts_of([Turn("user", text, i) for i, text in enumerate(said)]), embed, use_pairs=False)
    hit = ranker.best("Which city do I live in?")
    assert hit.fact.text == said[2] and ranker.gives(hit), hit.probability


@pytest.mark.parametrize("relayed", ["My flatmate says she cancelled Netflix and pays for Apple TV now instead.",
                                     "You said I cancelled that and pay for Apple TV now instead."])
def test_someone_elses_claim_of_a_change_leaves_the_answer(relayed, embed):
    # what another person said changed (``syntax.relays_other``) is no new value of the user's, at read time as at
    # ingest
    hit = _ranker([OLD, "I'm allergic to penicillin.", relayed], embed).best("Which streaming service do I pay for?")
    assert hit.fact.text == OLD and hit.replaced == []


def test_the_users_own_word_answers_before_a_claim_they_relay(embed):
    said = ["Hi! I'm badly allergic to sesame, so I check every label.", "We live in Utrecht, close to the station.",
            "Tom reckons I'm not allergic to sesame anymore, but I'm not risking it."]
    ranker = _ranker(said, embed)
    assert ranker.best("I'm packing snacks for a flight. Anything I should stay away from?").fact.text.startswith(
        "I'm badly allergic to sesame")
    # asked about what Tom said, his claim is still the answer
    assert ranker.best("What did Tom say about my allergy?").fact.text == said[2]


@pytest.mark.parametrize("said, question", [
    (["We have a cat called Miso.", "I'm allergic to walnuts.", "Now we've got a dog too, called Pip."],
     "Which pets do I have?"),
    (["My son plays football on Saturdays.", "I'm allergic to walnuts.", "My son now plays cricket as well, on Sundays."],
     "What sports does my son play?"),
])
def test_one_more_of_something_answers_beside_the_first(said, question, embed):
    # the two were each other's rival in the fact model's lead, which left neither sure (the pets: 0.03, and the pair
    # bank answered with the allergy); an addition stands beside the first, and both answer
    ranker = _ranker(said, embed)
    hit = ranker.best(question)
    quoted = {hit.fact.text, *(h.fact.text for h in ranker.also(question, hit))}
    assert quoted == {said[0], said[2]} and ranker.gives(hit)


def test_a_question_much_closer_to_one_of_the_two_quotes_that_one(embed):
    said = ["We have a cat called Miso.", "I'm allergic to walnuts.", "Now we've got a dog too, called Pip."]
    ranker = _ranker(said, embed)
    hit = ranker.best("What's my cat called?")
    assert hit.fact.text == said[0] and ranker.also("What's my cat called?", hit) == []


def test_a_later_fact_that_says_no_change_replaces_nothing(embed):
    # the pair model alone judged the later sentence (the same words of hardship) a new value of the earlier one
    said = ["Since I lost my job at the bakery, things have been tough.", "I'm allergic to cats.",
            "I've had some tough times with my business."]
    hit = _ranker(said, embed).best("Which job did I lose?")
    assert hit.fact.text == said[0] and hit.replaced == []


def test_a_change_that_names_only_its_kind_answers_in_place_of_the_one_it_changed(embed):
    # "the code" shares no word with "The door code is 4471." but the kind's: ingest left both current, and the
    # message, nearer the door code's words, got the old code
    said = ["The door code is 4471.", "I'm allergic to penicillin.", "I changed the code, it's 7734 now."]
    hit = _ranker(said, embed).best("What's the door code?")
    assert "7734" in hit.fact.text
    assert [f.text for f in hit.replaced] == [said[0]]


def test_a_correction_is_found_by_the_words_of_the_value_it_replaced(embed):
    """``best_match``'s ``older``: the correction names its thing less than what it replaced did; the message is
    compared with both, and the correction answers."""
    old, new = "My gym is the Fitness First by the station.", "I cancelled that membership; I train at Iron Works now."
    others = ["I'm allergic to penicillin.", "My sister lives in Leeds.", "I drive a grey Skoda Octavia."]
    ranker = _ranker([old, *others, new], embed)
    assert [f.text for f in ranker.facts] == [*others, new], \
        "the precondition: ingest replaced the older value"
    hit = ranker.best("Which gym do I go to?")
    assert hit.fact.text == new and ranker.gives(hit)
    assert [f.text for f in hit.replaced] == [old]
