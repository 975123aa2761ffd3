"""A task set in a situation reaches the fact its situation names, with the real embedder and the fitted fact model.

"I'm flying out to visit my brother next month. What currency should I bring?" is one vector in which the
currency question outweighs the brother; its first sentence alone is much nearer "My brother Tom lives in Oslo."
The fact model reads the closest of the whole message and its statements (``retrieval.facts.message_parts``);
read whole, as before, this question reaches no fact. General questions in two sentences still reach none.
Statements and questions written for this test; verdicts checked away from the threshold.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from localpager.core.facts import facts_of
from localpager.core.records import Turn
from localpager.retrieval.facts import FactFeatures, FactRanker

pytestmark = [pytest.mark.embedder]

SAID = ["My cat is called Pixel.", "I work at a bakery in Leeds.", "I'm allergic to kiwi.",
        "My brother Tom lives in Oslo.", "My mum collects old teapots."]
GENERAL = ["I'm making a playlist for a long drive. Any suggestions?",
           "It's raining again. What's a good indoor hobby to pick up?",
           "I have a job interview on Monday. How should I prepare?",
           "My printer keeps jamming. How do I fix it?"]


@pytest.fixture(scope="module")
def ranker():
    from localpager.retrieval.embedder import default_embedder

    facts = facts_of([Turn("user", text, 2 * i) for i, text in enumerate(SAID)])
    assert [f.text for f in facts] == SAID, "the precondition: each statement is a standing fact"
    return FactRanker(facts, default_embedder().encode)


def test_the_sentence_that_names_the_situation_reaches_its_fact(ranker):
    message = "I'm flying out to visit my brother next month. What currency should I bring?"
    hit = ranker.best(message)
    assert hit.fact.text == "My brother Tom lives in Oslo."
    assert hit.features["sentence"] > hit.features["dense"] + 0.1  # the first sentence alone comes much nearer
    assert hit.probability >= ranker.model.threshold + 0.03
    assert [h.fact.text for h in ranker.relevant(message)] == [hit.fact.text]
    whole = replace(FactFeatures(**hit.features), sentence=hit.features["dense"])  # the message read whole only
    assert ranker.model.probability(whole) < ranker.model.threshold - 0.03


@pytest.mark.parametrize("message", GENERAL)
def test_a_general_question_in_two_sentences_reaches_no_fact(ranker, message):
    hit = ranker.best(message)
    assert hit.probability < ranker.model.threshold - 0.15
    assert ranker.relevant(message) == []


@pytest.mark.parametrize("general, particular", [
    ("What is a good name for a cat?", "What is the cat called?"),
    ("What does a bakery sell?", "Which bakery do I work at?"),
])
def test_a_question_about_any_one_of_a_kind_reaches_no_fact_and_one_about_the_users_does(ranker, general, particular):
    """"What is a good name for a cat?" comes near "My cat is called Pixel." (the fact model is over its threshold)
    but asks for general knowledge: no word of the asker, nothing particular (``facts.asks_anyone``)."""
    hit = ranker.best(general)
    assert ranker.model.threshold + 0.03 <= hit.probability < 0.9, "the precondition: the fact model alone gives it"
    assert hit.anyone and ranker.relevant(general) == []
    assert [h.fact.text for h in ranker.relevant(particular)] == [hit.fact.text]
