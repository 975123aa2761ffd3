"""The relevance floor's reading of the best standing fact (``retrieval.answerable``): for a question about the
user's own life, how close the best fact comes; for a question about anyone else, nothing of it but the fact
model's probability."""

from __future__ import annotations

import math
from dataclasses import replace

from localpager.core.facts import StandingFact
from localpager.core.records import Turn
from localpager.retrieval.answerable import answer_features, decide
from localpager.retrieval.facts import FactHit

TURN = Turn(index=4, role="user", text="We finally booked the cabin for the long weekend.")
FACT = StandingFact(fact_id=1, turn=2, kind="", subject="", text="I only write code in Haskell these days.")


def _features(question: str, about_self: bool, dense: float = 0.6, gap: float = 0.2, facts: int = 12):
    hit = FactHit(FACT, 0.2, {"dense": dense, "gap": gap, "facts": math.log1p(facts)})
    return answer_features(question, TURN, 0.3, 0.1, [], 0.8, hit, about_self)


def test_the_best_facts_closeness_counts_only_for_a_question_about_the_user():
    mine = _features("Which language am I sticking to for programming?", True)
    assert (mine.self_asked, mine.self_fact_dense, mine.self_fact_gap) == (1.0, 0.6, 0.2)
    assert mine.self_facts == math.log1p(12)
    theirs = _features("Which language does Caroline program in?", False)
    assert (theirs.self_asked, theirs.self_fact_dense, theirs.self_fact_gap, theirs.self_facts) == (0.0,) * 4
    assert mine.fact == theirs.fact == 0.2  # the fact model's probability is read for both
    none = answer_features("Who do I pay my rent to?", TURN, 0.3, 0.1, [], 0.8, None, True)
    assert (none.fact, none.self_fact_dense) == (0.0, 0.0)


def test_a_question_about_the_user_with_a_fact_near_it_is_likelier_answerable_than_one_with_none():
    near = _features("Which language am I sticking to for programming?", True, dense=0.6, gap=0.2)
    far = replace(near, self_fact_dense=0.1, self_fact_gap=0.0)
    assert decide(near).probability > decide(far).probability


def test_no_fact_near_a_question_about_the_users_past_says_less_when_they_have_told_few():
    """"What was the ramen place called?" asked by someone with three standing facts: none of them is near, and
    that is no sign the ramen place was never mentioned; among forty facts it is more of one."""
    few = _features("What was the ramen place near the station called?", True, dense=0.1, gap=0.0, facts=3)
    many = _features("What was the ramen place near the station called?", True, dense=0.1, gap=0.0, facts=40)
    assert decide(few).probability > decide(many).probability
