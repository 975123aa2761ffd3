"""Issue 39, item 6: with thousands of standing facts, a general question still reaches none, with the real
embedder and the fitted fact model (the fakes' hashing embedder has no notion of what a question is about).

2,000 allergies, none of them to eggs, written for this test: before, "How do I boil an egg?" reached one (the
model's count of facts, far past the 56 it was fitted on, carried it over the threshold), and so did other
general questions. A question an allergy answers still reaches one, as it does among a few.
"""

from __future__ import annotations

import itertools
import math
import random

import pytest

from localpager.core.facts import StandingFact
from localpager.retrieval.facts import ALSO_SHOWN, FITTED_FACTS, FactRanker

pytestmark = [pytest.mark.embedder]

ALLERGENS = ["peanuts", "sesame", "shellfish", "walnuts", "almonds", "cashews", "pistachios", "hazelnuts", "soy",
             "wheat", "milk", "fish", "mustard", "celery", "lupin", "sulphites", "kiwi", "strawberries", "latex",
             "penicillin", "bee stings", "cats", "dogs", "pollen", "dust mites", "mould", "tomatoes", "avocado",
             "banana", "mango", "pineapple", "coconut", "chickpeas", "lentils", "corn", "oats", "barley", "rye"]
FORMS = ["I'm allergic to {}.", "I'm seriously allergic to {}.", "I have a bad allergy to {}.",
         "{} make me break out in hives, I'm allergic.", "I'm mildly allergic to {}.",
         "My doctor confirmed I'm allergic to {}."]
KINDS = ["raw", "cooked", "dried", "fresh", "wild", "organic", "roasted", "ground", "powdered", "tinned"]
GENERAL = ["How do I boil an egg?", "Write a haiku about autumn.", "How do I change a bike tyre?",
           "What's the capital of France?"]
ABOUT_THE_USER = ["I'm packing snacks for a flight. Anything I should stay away from?",
                  "What should I avoid eating at the party?"]


@pytest.fixture(scope="module")
def embed():
    from localpager.retrieval.embedder import default_embedder

    return default_embedder().encode


def allergies(n: int) -> list[StandingFact]:
    texts = [form.format(f"{kind} {allergen}") for allergen, form, kind in itertools.product(ALLERGENS, FORMS, KINDS)]
    random.Random(0).shuffle(texts)
    return [StandingFact(i + 1, 2 * i, "avoid", "", text) for i, text in enumerate(texts[:n])]


def test_two_thousand_allergies_carry_no_general_question_to_one(embed):
    ranker = FactRanker(allergies(2000), embed)
    for question in GENERAL:
        hit = ranker.best(question)
        assert not ranker.relevant(question), (question, hit.fact.text, hit.probability)
        assert hit.features["facts"] == pytest.approx(math.log1p(FITTED_FACTS))
    for question in ABOUT_THE_USER:  # the best, and at most ALSO_SHOWN more allergies beside it
        hits = ranker.relevant(question)
        assert 1 <= len(hits) <= 1 + ALSO_SHOWN and all("allerg" in h.fact.text for h in hits)


def test_a_question_about_the_user_reaches_a_fact_among_a_few_as_among_thousands(embed):
    few = FactRanker(allergies(12), embed)
    many = FactRanker(allergies(2000), embed)
    for question in ABOUT_THE_USER:
        assert few.relevant(question) and many.relevant(question)
    for question in GENERAL:
        assert not few.relevant(question)
