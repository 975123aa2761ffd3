"""The pair bank with the real embedder: a situation reaches the fact people in it need, though it shares neither
words nor much of a vector with it; general questions and a transcript's questions about someone reach none.

The statements and questions are written for these tests (none is in the bank); verdicts are checked away from
the thresholds. A whole conversation with the real chat model answers such a message from the fact.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import Recording

from localpager.core.facts import facts_of
from localpager.core.personal import asks_for_value
from localpager.core.pager import PagingConfig
from localpager.core.records import Turn
from localpager.memory.api import LocalPager
from localpager.retrieval.facts import SHARED_WORDS, SURE, FactRanker, naming_owned
from localpager.runtime.prompts import NOT_REMEMBERED
from localpager.runtime.settings import RecallSettings

pytestmark = [pytest.mark.embedder]

ROOM = "The hotel put me in room 1142 this time."
FLIGHT = "I'm on flight KL 1023 on Friday."
SAID = [ROOM, FLIGHT, "Our electrician is Marta Quist, 555-0188.", "I take 12 units of insulin with lunch.",
        "My dog is called Rufus.", "I can't eat anything with gluten in it."]
SPA = "The spa wants to put my massage on my bill. What do they need from me?"
GENERAL = ["How do I boil an egg?", "My printer keeps jamming. How do I fix it?",
           "I'm making a playlist for a long drive. Any suggestions?", "How do I change a light bulb safely?",
           "I have a job interview on Monday. How should I prepare?"]


@pytest.fixture(scope="module")
def rankers():
    from localpager.retrieval.embedder import default_embedder

    facts = facts_of([Turn("user", text, 2 * i) for i, text in enumerate(SAID)])
    assert [f.text for f in facts] == SAID, "the precondition: each statement is a standing fact"
    encode = default_embedder().encode
    return FactRanker(facts, encode), FactRanker(facts, encode, use_pairs=False)


def test_the_shipped_bank_is_read_with_the_default_embedder(rankers):
    with_bank, alone = rankers
    assert with_bank.pairs() is not None and alone.pairs() is None


@pytest.mark.parametrize("message, fact", [
    (SPA, ROOM),
    ("My brother is picking me up and wants to follow my plane on an app. What should I send him?", FLIGHT),
])
def test_a_situation_reaches_the_fact_people_in_it_need(rankers, message, fact):
    with_bank, _ = rankers
    hit = with_bank.best(message)
    assert hit.fact.text == fact and hit.by_pairs
    assert hit.paired >= with_bank.pairs().threshold + 0.1
    assert [h.fact.text for h in with_bank.relevant(message)] == [fact]


def test_the_fact_model_alone_misses_it(rankers):
    _, alone = rankers
    hit = alone.best(SPA)
    assert hit.probability < alone.model.threshold - 0.2 and alone.relevant(SPA) == []


@pytest.mark.parametrize("message", GENERAL)
def test_a_general_question_reaches_no_fact_through_the_bank(rankers, message):
    with_bank, _ = rankers
    hit = with_bank.best(message)
    assert not hit.by_pairs and (hit.paired is None or hit.paired < with_bank.pairs().threshold - 0.15)
    assert with_bank.relevant(message) == []


def test_a_question_about_someone_else_does_not_read_the_bank(rankers):
    with_bank, _ = rankers
    hit = with_bank.best("What did Marta buy for the hotel room?")
    assert hit.paired is None and not hit.by_pairs  # not for the asker's own sake: the bank's messages all are


TROMBONE = "The neighbours hear me on the trombone most evenings."


def test_a_question_whose_only_word_of_its_asker_is_a_bare_i_is_read_by_the_bank():
    """"did I", "was I": no ``own_sake`` word, yet asked for the asker's own sake. The bank chooses the fact the
    fact model alone is unsure of, and a question about something never told is not remembered."""
    from localpager.retrieval.embedder import default_embedder

    facts = facts_of([Turn("user", text, 2 * i) for i, text in enumerate(SAID + [TROMBONE])])
    ranker = FactRanker(facts, default_embedder().encode)
    hit = ranker.best("Which instrument did I take up?")
    assert hit.fact.text == TROMBONE and hit.paired is not None and hit.paired >= ranker.pairs().threshold + 0.1
    assert [h.fact.text for h in ranker.relevant("Which instrument did I take up?")] == [TROMBONE]
    assert ranker.never_told("What sign was I born under?") is not None  # nothing of the kind was said


@pytest.mark.model
def test_the_answer_quotes_the_fact_the_bank_chose(tmp_path, backend):
    lp = LocalPager(tmp_path / "s.db", backend=Recording(backend), recall=RecallSettings(max_answer_tokens=24))
    chat = lp.conversation("c", create=True, config=PagingConfig(boundary="fixed_4", budget=256))
    for i, text in enumerate(SAID):
        chat.add_turn("user", text)
        chat.add_turn("assistant", "Noted.")
    t = chat.ask(SPA).trace
    assert t.decision == "fact" and t.facts[0]["text"] == ROOM and t.facts[0]["by_pairs"]
    assert t.answer == f'You told me: "{ROOM}"'
    lp.close()


def test_a_question_asking_when_something_happened_is_not_the_banks():
    from localpager.retrieval.embedder import default_embedder

    parking = "I've got parking spot B12 at the office."
    facts = facts_of([Turn("user", parking, 0), Turn("user", "My dog is called Rufus.", 2)])
    encode = default_embedder().encode
    ranker = FactRanker(facts, encode)
    question = "When did I move the car to the other garage?"
    vectors = np.asarray(encode([question, parking]), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    bank = ranker.pairs()
    assert bank.scores(vectors[0], vectors[1:])[0] >= bank.threshold + 0.1  # the bank alone would give the spot
    hit = ranker.best(question)
    assert hit.paired is None and not hit.by_pairs and ranker.relevant(question) == []


def test_a_question_about_something_never_told_is_not_remembered_from_the_bank(rankers):
    with_bank, _ = rankers
    found = with_bank.never_told("Where does my sister live?")  # questions like it needed a fact; none is near
    assert found is not None and found["needed"] >= with_bank.pairs().unmet["needed"]
    assert with_bank.never_told(SPA) is None  # the bank gives this one its fact
    assert with_bank.never_told("What's a good way to learn Spanish?") is None  # not for the asker's own sake
    for message in GENERAL:  # help asked for, at most: the model's, not "not remembered" (the selector asks)
        assert with_bank.never_told(message) is None or not asks_for_value(message)


SYNC = "The team sync happens every Monday at 8:45 am."
WEDDING = "Which day does my cousin tie the knot?"  # never told: the sync's day matches what it asks, nothing else


@pytest.fixture(scope="module")
def with_sync():
    from localpager.retrieval.embedder import default_embedder

    facts = facts_of([Turn("user", text, 2 * i) for i, text in enumerate(SAID + [SYNC])])
    return FactRanker(facts, default_embedder().encode)


def test_a_fact_the_bank_says_the_question_does_not_need_is_not_given(with_sync):
    hit = with_sync.best(WEDDING)
    assert hit.fact.text == SYNC and with_sync.model.threshold + 0.1 <= hit.probability <= SURE - 0.2  # it would be
    needed, nearest = with_sync.need_of(WEDDING)
    cut = with_sync.pairs().unmet
    assert needed >= cut["needed"] + 0.2 and nearest >= cut["nearest"] + 0.1 and hit.paired <= cut["paired"] - 0.1
    assert hit.missed and with_sync.relevant(WEDDING) == [] and with_sync.never_told(WEDDING) is not None
    assert hit.features["lexical"] < SHARED_WORDS  # no word of the question's in the sync: the bank's veto stands
    sync = with_sync.relevant("When is my weekly team meeting?")  # the sync itself is still given
    assert [h.fact.text for h in sync] == [SYNC] and not sync[0].missed


def test_the_bank_does_not_overrule_a_fact_the_model_is_sure_of(with_sync):
    hit = with_sync.best("What am I allergic to?")  # the bank's allergies are unlike it; the model is sure
    assert hit.fact.text == SAID[5] and hit.probability >= SURE and hit.paired < with_sync.pairs().unmet["paired"]
    assert not hit.missed and [h.fact.text for h in with_sync.relevant("What am I allergic to?")] == [SAID[5]]


def test_the_bank_does_not_overrule_a_fact_that_uses_the_questions_own_words():
    from localpager.retrieval.embedder import default_embedder

    moved = "We finally moved our savings over to Starling last week."
    ranker = FactRanker(facts_of([Turn("user", text, 2 * i) for i, text in enumerate(SAID + [moved])]),
                        default_embedder().encode)
    question = "Which bank did we move to?"  # banks are no kind the bank's messages needed: it scores the fact low
    hit = ranker.best(question)
    assert hit.fact.text == moved and ranker.model.threshold <= hit.probability < SURE
    assert hit.paired < ranker.pairs().unmet["paired"] and hit.features["lexical"] >= SHARED_WORDS
    assert not hit.missed and ranker.gives(hit) and ranker.never_told(question) is None


@pytest.mark.model
def test_a_question_a_fact_would_answer_only_by_its_type_is_not_remembered(tmp_path, backend):
    lp = LocalPager(tmp_path / "s.db", backend=Recording(backend), recall=RecallSettings(max_answer_tokens=24))
    chat = lp.conversation("c", create=True, config=PagingConfig(boundary="fixed_4", budget=256))
    for text in SAID + [SYNC]:
        chat.add_turn("user", text)
        chat.add_turn("assistant", "Noted.")
    t = chat.ask(WEDDING).trace
    assert t.decision == "unknown" and t.answer == NOT_REMEMBERED and t.injected_page_ids == []
    assert t.answerable["features"]["never_told"] == 1.0 and t.answerable["features"]["missed"] == 1.0
    lp.close()


@pytest.fixture
def said_chat(tmp_path, backend):
    """A conversation of ``SAID`` and small talk, with the real chat model."""
    lp = LocalPager(tmp_path / "s.db", backend=Recording(backend), recall=RecallSettings(max_answer_tokens=24))
    chat = lp.conversation("c", create=True, config=PagingConfig(boundary="fixed_4", budget=256))
    for text in SAID + ["Any tips for keeping basil alive on a windowsill?"] * 3:
        chat.add_turn("user", text)
        chat.add_turn("assistant", "Noted.")
    yield chat
    lp.close()


@pytest.mark.model
def test_never_told_is_answered_not_remembered_without_a_recall(said_chat):
    chat = said_chat
    t = chat.ask("Where does my sister live?").trace
    assert t.decision == "unknown" and t.answer == NOT_REMEMBERED
    assert t.answerable["answer"] is False and t.answerable["features"]["never_told"] == 1.0
    assert t.injected_page_ids == [] and t.tokens["generated"] == 0
    told = chat.ask("Which room am I in at the hotel?").trace  # a fact answers it: the bank says nothing
    assert told.answerable is None or "never_told" not in told.answerable["features"]


def test_the_floor_is_told_how_near_a_question_comes_to_the_banks_fact_questions(rankers):
    with_bank, alone = rankers
    needed, nearest = with_bank.need_of("Where does my aunt live these days?")  # like the bank's fact questions
    assert needed >= 0.9 and nearest >= 0.7
    for message in ("How do I descale a kettle?", "What's the capital of Peru?"):  # like its general ones
        assert with_bank.need_of(message)[0] <= 0.3
    assert alone.need_of("Where does my aunt live these days?") is None  # no bank: the floor counts the mean


@pytest.mark.model
def test_a_recall_s_floor_reads_the_banks_need_of_the_question(said_chat):
    chat = said_chat
    t = chat.ask("What did I say about the basil?").trace  # said, and found: the floor lets the recall answer
    assert t.answerable["answer"] is True and t.injected_page_ids
    # answered from the recall, unless what the model wrote states a value it was not shown (greedy output differs
    # between CPUs, builds and days: the recalled turns carry their day)
    assert t.decision == "recall" or (t.decision == "unknown" and not t.grounding["grounded"])
    features = t.answerable["features"]
    assert 0.0 <= features["needed"] <= 1.0 and 0.0 < features["nearest"] <= 1.0


def test_a_fact_told_beside_another_in_one_sentence_answers_the_question_about_it():
    """Told as one fact, "I bank with Tandem and we heat the flat with a Baxi boiler." was unlike every statement
    the bank's nearest labelled question ("Which bank am I with?") needed, and the bank answered "not remembered";
    each clause is a fact of its own (``facts._two_things``)."""
    from localpager.retrieval.embedder import default_embedder

    said = ["I bank with Tandem and we heat the flat with a Baxi boiler.", "My dog is called Rufus."]
    ranker = FactRanker(facts_of([Turn("user", text, 2 * i) for i, text in enumerate(said)]), default_embedder().encode)
    assert [h.fact.text for h in ranker.relevant("Which bank am I with?")] == ["I bank with Tandem"]
    assert ranker.never_told("Which bank am I with?") is None


def test_the_banks_choice_names_the_one_of_the_speakers_own_the_question_asks_about():
    """"What's my partner's name?" is, by its form, a question for a name: the bank chose the greyhound's ("called
    Pepper") over the partner's fact, which says more than the name and is far from the question by its vector."""
    from localpager.retrieval.embedder import default_embedder

    partner = "fyi my partner Rui is a pharmacist, so he always knows which cold medicine to take lol"
    dog = "We just adopted a rescue greyhound called Pepper."
    ranker = FactRanker(facts_of([Turn("user", text, 2 * i) for i, text in enumerate([partner, dog])]),
                        default_embedder().encode)
    hit = ranker.best("What's my partner's name?")
    assert hit.by_pairs and "partner Rui" in hit.fact.text and hit.probability < ranker.model.threshold
    hit = ranker.best("What's my dog called?")  # the model judges the greyhound bears on it: its choice stands
    assert hit.fact.text == dog and not hit.by_pairs
    # a situation names the speaker's own as its setting: not read so
    assert naming_owned("My partner is out tonight. What should I cook?", ranker.facts, 1, np.zeros(2)) == 1
