"""The English parser's reading of a request, of a habit and of a note that leaves out its speaker (``core.syntax``) and where its pipeline is found
(``models/manifest.toml``'s parser). Sentences written for these tests."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from localpager.core.modelpaths import ModelNotFoundError, parser_path
from localpager.core.facts import extract
from localpager.core.records import Turn
from localpager.core.syntax import asks_for_work, speaker_left_out, states_habit, wh_opens_clause


@pytest.mark.parametrize("sentence", [
    "Schedule my piano lesson for Tuesdays at 5pm.",
    "Please describe the water cycle for a ten-year-old.",
    "Text my son directions to the car.",
    "Check whether my train at 7:40 is still on time.",  # the clause under it asks; it states nothing
    # the clause's subject is what "let" or "help" acts on, in the object case: the clause states nothing
    "Let me see a recipe for my vegan sister.",
    "Help me write a note to my landlord Bob about the leak.",
    "Just let me know if you need anything else.",
])
def test_a_sentence_opening_with_a_bare_verb_and_no_subject_asks_for_work(sentence):
    assert asks_for_work(sentence)


@pytest.mark.parametrize("sentence", [
    "I keep my piano lesson on Tuesdays at 5pm.",
    "My sister lives in Kraków.",
    "Don't forget I'm in Singapore, eight hours ahead of you.",  # it wraps a statement of its own
    "Keep my replies short; I read them on my phone.",
    "Let me tell you, my favourite colour is teal.",  # a statement under the clause "let" acts on
    "",
])
def test_a_statement_or_a_request_wrapping_one_does_not(sentence):
    assert not asks_for_work(sentence)


@pytest.mark.parametrize("sentence", [
    "I sail with the Forth Yacht Club.",
    "We grow Moneymaker tomatoes behind the garage.",
    "I don't eat anything from Haribo.",  # a habit in the negative
    "I wear size 6 trainers.",
])
def test_a_plain_present_of_the_speaker_with_a_particular_object_states_a_habit(sentence):
    assert states_habit(sentence)


@pytest.mark.parametrize("sentence", [
    "I sailed with the Forth Yacht Club last year.",  # past: an event
    "I'm sailing with the Forth Yacht Club this weekend.",  # progressive: a passing state
    "I might join the Forth Yacht Club.",  # a modal
    "I think the Forth Yacht Club is lovely.",  # a clause under the verb: an opinion
    "I want to join the Forth Yacht Club.",
    "My brother sails with the Forth Yacht Club.",  # not the speaker
    "I'm on the committee until June.",  # "be"
    "I grow tomatoes behind the garage.",  # nothing particular: as often a remark as a habit
    "I take your point about the Forth Yacht Club.",  # the listener's point: a remark on what was said
    "",
])
def test_an_event_a_wish_an_opinion_a_remark_or_another_subject_is_no_habit(sentence):
    assert not states_habit(sentence)


# notes that leave out their speaker, written for these tests: without the subject put back, none became a fact
LEFT_OUT = [
    ("Switched from the Vespa to an electric scooter, a Niu.", "I switched from"),
    ("Been playing the oboe since primary school.", "I've been playing"),
    ("Grew up in Tromsø and still ski most weekends in winter.", "I grew up"),
    # the perfect's clause before the main one, which has a subject of its own (no fact before 'LEADING_CLAUSES')
    ("Been cycling to work since the office moved, so the car mostly stays in the garage.", "I've been cycling"),
]


@pytest.mark.parametrize("sentence, restored", LEFT_OUT)
def test_a_note_that_leaves_out_its_speaker_is_read_with_it_put_back(sentence, restored):
    assert speaker_left_out(sentence).startswith(restored)
    facts = extract(Turn("user", sentence, 0))
    assert [f.text for f in facts] == [sentence]  # the user's own words, as said


def test_after_a_label_too():
    sentence = "Knee update: had the surgery and now wear a brace for hiking."
    assert [f.text for f in extract(Turn("user", sentence, 0))] == [sentence]


@pytest.mark.parametrize("sentence", [
    "Sounds good.",  # a present verb first leaves out another subject ("it")
    "Book me a table for two.",  # a request
    "Went to Lisbon?",  # a question
    "Had a great time at the party.",  # put back, an event: the extractor takes no fact from "I had a great time"
    "Missed the bus again.",
    "Been a long week.",
])
def test_a_remark_an_event_a_request_or_a_question_states_nothing(sentence):
    assert extract(Turn("user", sentence, 0)) == []


def test_an_assistant_or_a_transcripts_speaker_is_not_read_so():
    sentence = LEFT_OUT[0][0]
    assert extract(Turn("assistant", sentence, 0)) == []
    assert extract(Turn("user", LEFT_OUT[1][0], 0, speaker="Ana")) == []  # a transcript's line is not parsed so


@pytest.mark.parametrize("sentence", [
    "What I order at every cafe is a flat white with oat milk.",
    "Where we spend every Christmas is my aunt's farm in Wexford.",
    "How I get to work is the 7:40 train from Didcot.",
])
def test_a_wh_word_opening_a_clause_without_a_question_mark_states_a_fact(sentence):
    # read as a question (a wh-word first, a pronoun after it), none of these stated a fact
    assert wh_opens_clause(sentence)
    (fact,) = extract(Turn("user", sentence, 0))
    assert fact.text == sentence


@pytest.mark.parametrize("question", ["what should i order at the cafe", "where we should spend christmas",
                                      "What time is my train", "when my train leaves"])
def test_a_question_typed_without_its_question_mark_still_asks(question):
    assert not wh_opens_clause(question)
    assert extract(Turn("user", question, 0)) == []


@settings(max_examples=40, deadline=None)
@given(st.text(max_size=200))
def test_any_text_is_read_with_its_speaker_put_back_or_not(text):
    restored = speaker_left_out(text)
    assert restored is None or (restored.startswith(("I ", "I've ")) and restored.endswith(text[1:]))


def test_a_parse_deferred_raises_its_text_until_made_in_a_batch_then_reads_as_alone():
    from localpager.core.syntax import ParseNeeded, parse_ahead, parses_ahead

    text = "Ring my uncle about the caravan keys."  # no other test reads it: no reading of it is kept
    with parses_ahead(defer=True):
        with pytest.raises(ParseNeeded) as missing:
            asks_for_work(text)
        assert missing.value.text == text
        parse_ahead([text])
        assert asks_for_work(text)
    assert asks_for_work(text + " ")  # outside, parsed alone: the same reading


def test_extracting_many_turns_makes_every_parse_in_batches_and_reads_each_as_alone(monkeypatch):
    from localpager.core import facts, syntax

    said = ["Been playing the oboe since primary school.", "Book my usual table at the Italian place for Friday.",
            "In my novel, the heroine is allergic to sesame.", "We keep chickens on our allotment.",
            "I bank with Monzo.", "My friend said she's no longer allergic to sesame.", "What's my locker number?",
            "Note that our boiler is a Vaillant.", "Honestly, my sister has lived in Kraków since May."]
    turns = [Turn("user", f"{text} (batch test)", i) for i, text in enumerate(said)]  # texts no other test reads
    alone = [facts.extract(t) for t in turns]
    facts._extract.cache_clear()
    for name in dir(syntax):  # the parser's readings of them are made again, and their parses
        if hasattr(getattr(syntax, name), "cache_clear") and name != "pipeline":
            getattr(syntax, name).cache_clear()

    def alone_parse(text):
        raise AssertionError(f"parsed alone: {text!r}")
    monkeypatch.setattr(syntax, "_parsed", alone_parse)
    monkeypatch.setattr(facts, "EXTRACT_WINDOW", 4)  # three windows, each its own batches
    assert facts.extract_all(turns) == alone
    assert any(alone) and not all(alone)


def test_the_parser_loads_without_pytorch():
    """thinc imports PyTorch when it can; the parser needs none of it (a new process: another test's import of
    it in this one would say nothing)."""
    code = ("import sys; from localpager.core.syntax import asks_for_work; assert asks_for_work('Text my son the address.'); "
            "print('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_a_parser_path_that_is_no_pipeline_is_a_one_line_error(tmp_path, monkeypatch):
    monkeypatch.setenv("LOCALPAGER_PARSER", str(tmp_path / "nowhere"))
    with pytest.raises(ModelNotFoundError, match="not a spaCy pipeline directory") as found:
        parser_path()
    assert "\n" not in str(found.value)
    monkeypatch.delenv("LOCALPAGER_PARSER")
    assert (parser_path() / "config.cfg").exists()  # the default, installed by make setup
