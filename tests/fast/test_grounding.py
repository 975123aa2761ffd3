"""Issue 38 (5): an answer to a question about the user's own life states no value it was not shown. The check
itself (``runtime.grounding``), then the recall path on the fakes: a model that makes a value up is answered "not
remembered", one that repeats what the recalled turns hold is answered as it said."""

from __future__ import annotations

import pytest
from fakes import ScriptedBackend

from localpager.core.pager import PagingConfig
from localpager.core.records import Turn
from localpager.retrieval.gate import GateModel
from localpager.retrieval.rerank import RerankSettings
from localpager.runtime import grounding
from localpager.runtime.prompts import NOT_IN_WHAT_I_FOUND
from localpager.runtime.selector import Injection
from localpager.runtime.settings import RecallSettings

# the relevance floor lets everything through, sure of none of it (below ``recall.SURE_FLOOR``)
ALWAYS = GateModel(weights={}, bias=0.2, threshold=0.5)
SURE = GateModel(weights={}, bias=10.0, threshold=0.5)  # ... and sure of all of it
NEVER = GateModel(weights={}, bias=-10.0, threshold=0.5)  # no standing fact bears on anything


@pytest.mark.parametrize("answer, shown, unsupported", [
    ("Your sister lives in Lisbon.", "We spent a week in Porto.", ["Lisbon"]),
    ("Your flight is UA792.", "My flight is UA 792 on Friday.", []),  # a number by its digits
    ("Take 25 units with dinner.", "I take 25 units of insulin with dinner.", []),
    ("Take 30 units with dinner.", "I take 25 units of insulin with dinner.", ["30"]),
    ("Your locker is number 007.", "locker 7", []),
    ("The lead is by the door.", "anything", []),
    ("Basil: 1. Water it often. 2. Keep it warm.", "basil on a windowsill", []),  # a list's numbering is no value
    ("Your locker is 40. It is by the door.", "locker 12", ["40"]),
    ("Don't worry, it's fine.  Just rest.\nThen rest more. \"Call me.\"", "nothing", []),  # openings, not names  # no value: nothing invented that a later answer could cite
    ("You are allergic to Sesame Seeds.", "I'm allergic to sesame seeds.", []),  # a name by its words, any case
])
def test_a_value_is_grounded_when_something_shown_holds_it(answer, shown, unsupported):
    assert grounding.check(answer, shown, "the question").unsupported == unsupported


def _chat(fake_pager, reply: str, replies: str = "Noted.", **chat):
    return _pager_and_chat(fake_pager, reply, replies, **chat)[1]


GARDEN = ["We spent a week in Porto last spring.", "The food there was wonderful.", "Let's plan the garden.",
          "Tomatoes and beans, mostly.", "And some herbs by the door.", "The soil looks heavy after the rain."]


def _pager_and_chat(fake_pager, reply: str, replies: str = "Noted.", said: list[str] = GARDEN,
                    time: str | None = None, recall: RecallSettings | None = None, floor: GateModel = ALWAYS):
    """A chat whose user said ``said`` (each turn on the day ``time``; without it, unstamped), its first pages
    evicted; the model answers ``reply`` to anything (``recall``: the settings it answers under; ``floor``: the
    relevance floor's model)."""
    backend = ScriptedBackend()
    backend.fallback = lambda prompt, grammar: reply
    lp = fake_pager(backend=backend, rerank=RerankSettings(facts=NEVER, answerable=floor, gate=SURE),
                    **({"recall": recall} if recall is not None else {}))
    chat = lp.conversation("c", create=True, config=PagingConfig(boundary="fixed_2", budget=120))
    for text in said:
        chat.add_turn("user", text, time=time, stamp=time is not None)
        chat.add_turn("assistant", replies, time=time, stamp=time is not None)
    assert chat.pager.page(1).evicted, "the precondition of these tests"
    return lp, chat


def test_an_answer_about_the_user_that_makes_a_value_up_is_not_remembered(fake_pager):
    chat = _chat(fake_pager, "Your sister lives in Lisbon.")
    streamed: list[str] = []
    result = chat.ask("Where does my sister live?", on_text=streamed.append)
    # something was found and read, so the answer does not say nothing was mentioned
    assert result.trace.decision == "unknown" and result.answer == NOT_IN_WHAT_I_FOUND
    assert result.trace.grounding == {"grounded": False, "unsupported": ["Lisbon"], "takes_from_notes": False}
    assert "".join(streamed) == NOT_IN_WHAT_I_FOUND  # the made-up answer never reached the client


def test_where_the_floor_is_sure_of_the_users_line_an_answer_that_fails_the_check_quotes_it(fake_pager):
    """The model's words fail the check, but the floor is sure of the turn it judged: the user's own words answer,
    quoted, and the made-up value never reaches the client. An assistant's line is never quoted so."""
    lp, chat = _pager_and_chat(fake_pager, "Your sister lives in Lisbon.", floor=SURE)
    streamed: list[str] = []
    result = chat.ask("Where does my sister live?", on_text=streamed.append)
    assert result.trace.grounding["grounded"] is False and result.trace.decision == "recall"
    judged = chat.pager.turns[result.trace.answerable["turn"]]
    assert judged.role == "user" and result.answer == f'You told me: "{judged.text}"'
    assert "Lisbon" not in "".join(streamed)
    chat = _chat(fake_pager, "Your husband is called Ethan.", replies="Your husband is called Ethan.", floor=SURE,
                 said=["Noted."] * 6)
    result = chat.ask("What is my husband's name?")
    assert chat.pager.turns[result.trace.answerable["turn"]].role == "assistant"
    assert result.answer == NOT_IN_WHAT_I_FOUND


@pytest.mark.parametrize("text, told", [
    ("Any tips for keeping basil alive on a windowsill?", False),  # a question tells nothing
    ("Suggest a dinner for tonight.", False),  # nor does a request
    ("I'm vegan. Suggest a dinner.", True),
    ("Our place is a thatched cottage, which is why we never have enough storage.", True),
    ("You said my husband's name is Ethan.", False),  # the assistant's words, passed back: no evidence
    ("As you said, my husband's name is Ethan.", True),  # the user's own claim
])
def test_a_line_quoted_in_place_of_an_answer_must_tell_something(text, told):
    assert grounding.tells(text) == told


def test_an_answer_about_the_user_from_what_was_recalled_is_their_words_quoted(fake_pager):
    chat = _chat(fake_pager, "You spent a week in Porto.")
    streamed: list[str] = []
    result = chat.ask("What city did I visit last spring?", on_text=streamed.append)
    assert result.trace.decision == "recall" and result.answer == 'You told me: "We spent a week in Porto last spring."'
    assert result.trace.grounding == {"grounded": True, "unsupported": [], "takes_from_notes": True}
    assert "".join(streamed) == result.answer


def test_an_answer_that_puts_another_things_value_on_the_thing_asked_shows_what_was_said(fake_pager):
    """The value is in the notes, so the check passes, but it is the plumber's: quoted, the answer says so."""
    said = ["My plumber is Nadia Petrova.", "She fixed the boiler.", *GARDEN[2:]]
    chat = _chat(fake_pager, "Your electrician is Nadia Petrova.", said=said)
    result = chat.ask("Who is my electrician?")
    assert result.trace.grounding["grounded"]
    assert result.answer == 'You told me: "My plumber is Nadia Petrova."'


def test_an_answer_taken_from_a_request_quotes_it_as_asked_not_told(fake_pager):
    """A request tells nothing, yet names what it was for: quoted, it is what the user asked for."""
    said = ["Write me a cover letter for the data analyst job at Acme Foods.", *GARDEN[1:]]
    chat = _chat(fake_pager, "You applied for the data analyst job at Acme Foods.", said=said)
    result = chat.ask("Which job did I apply for?")
    assert result.trace.decision == "recall" and result.trace.grounding["grounded"]
    assert result.answer == 'You asked me: "Write me a cover letter for the data analyst job at Acme Foods."'


@pytest.mark.parametrize("text, asks", [
    ("Suggest a dinner for tonight.", True),
    ("Plan a trip to Kyoto for my 40th birthday in April.", True),
    ("Help me write a toast for my brother Ian's wedding.", True),  # "me" is what "help" acts on, no statement
    ("Can you suggest a dinner? Write it down.", True),  # a question and a request: nothing told
    ("I'm vegan. Suggest a dinner.", False),  # it tells too
    ("Hi! Suggest a dinner.", False),  # what the parse does not read as a request is told
    ("Remember that my code is 4411.", False),
    ("Been drinking in the Nag's Head for years.", False),
])
def test_a_turn_that_only_asks_is_told_apart_from_one_that_tells(text, asks):
    assert grounding.asks_only(text) is asks


def test_a_quoted_answer_says_the_day_its_words_were_said_when_they_count_from_it(fake_pager):
    """Quoted as said (an erasure finds the words), with the day that tells what "tomorrow" meant."""
    said = ["My dentist appointment is tomorrow at 3pm.", *GARDEN[1:]]
    chat = _chat(fake_pager, "Your dentist appointment is tomorrow at 3pm.", said=said, time="2026-12-06T09:00:00",
                 recall=RecallSettings(date_answers=False))  # with them, one of the dates is chosen under a grammar
    assert chat.ask("When is my dentist appointment?").answer == (
        'You told me on 6 December 2026: "My dentist appointment is tomorrow at 3pm."')


def test_without_quote_recalls_the_checked_answer_is_the_models(fake_pager):
    chat = _chat(fake_pager, "You spent a week in Porto.", recall=RecallSettings(quote_recalls=False))
    assert chat.ask("What city did I visit last spring?").answer == "You spent a week in Porto."


@pytest.mark.parametrize("answer, picked", [
    ("Your plumber is Nadia.", [1]),  # the turn holding what the question does not
    ("Yes, you did.", []),  # a yes or a no takes nothing
    ("Your sister lives in Osaka and your plumber is Nadia.", [0, 1]),  # the turn it took most words from first
    ("I am not sure.", []),
])
def test_sources_are_the_turns_an_answer_took_its_words_from(answer, picked):
    turns = [Turn(role="user", text="My sister lives in Osaka.", index=0),
             Turn(role="user", text="My plumber is Nadia.", index=1),
             Turn(role="assistant", text="Nadia is a good plumber, Osaka is lovely.", index=2)]
    injections = [Injection(page=None, turns=[0, 1, 2])]
    assert grounding.sources(answer, turns, injections, "Who is my plumber?") == picked


def _transcript(fake_pager, reply: str):
    backend = ScriptedBackend()
    backend.fallback = lambda prompt, grammar: reply
    lp = fake_pager(backend=backend, rerank=RerankSettings(facts=NEVER, answerable=ALWAYS, gate=ALWAYS))
    chat = lp.conversation("t", create=True, config=PagingConfig(boundary="fixed_2", budget=120))
    for i, text in enumerate(["I spent the weekend at the workshop fixing an old Mustang.", "Sounds fun, Calvin!",
                              "The engine needed new gaskets.", "Did the paint hold up?",
                              "Mostly, just some rust near the doors.", "I can't wait to see it.",
                              "We should take it to the coast in June.", "Count me in!",
                              "The garden needs work too.", "Tomatoes and beans, mostly.",
                              "And some herbs by the door.", "The soil looks heavy after the rain."]):
        chat.add_turn("user" if i % 2 == 0 else "assistant", text, speaker="Calvin" if i % 2 == 0 else "Dave",
                      stamp=False)
    assert chat.pager.page(1).evicted, "the precondition of these tests"
    return chat


def test_an_answer_about_a_transcript_s_person_that_makes_a_value_up_is_not_remembered(fake_pager):
    """A question naming someone who speaks in a transcript asks what they told: LoCoMo's "What type of car did
    Calvin work on during the workshop?" got "a 2018 Toyota Corolla", never said."""
    result = _transcript(fake_pager, "Calvin worked on a 2018 Toyota Corolla.").ask(
        "What type of car did Calvin work on during the workshop?")
    assert result.answer == NOT_IN_WHAT_I_FOUND
    assert result.trace.grounding["unsupported"] == ["2018", "Toyota Corolla"]
    told = _transcript(fake_pager, "Calvin fixed an old Mustang.").ask("What car did Calvin fix?")
    assert told.answer == "Calvin fixed an old Mustang."
    assert told.trace.grounding == {"grounded": True, "unsupported": [], "takes_from_named": True}


def test_an_answer_about_a_transcript_s_person_from_their_own_question_is_not_remembered(fake_pager):
    """Dave only asked about the paint ("Did the paint hold up?"): what he asked tells nothing of what he said."""
    result = _transcript(fake_pager, "Dave said the paint held up.").ask("What did Dave say about the paint?")
    assert result.answer == NOT_IN_WHAT_I_FOUND and result.trace.grounding["takes_from_named"] is False


def test_an_answer_from_a_transcript_s_lines_is_not_quoted_as_the_user_s_words(fake_pager):
    """A question in the first person to a transcript names none of its people: its held answer stays the model's,
    for the lines are Calvin's, not the words of the user who asks."""
    result = _transcript(fake_pager, "You fixed an old Mustang.").ask("What car did I fix at the workshop?")
    assert result.trace.grounding["grounded"]  # held back and checked: a question about the one who asks
    assert result.answer == "You fixed an old Mustang."


def test_an_answer_about_a_transcript_s_person_from_what_the_other_told_is_not_remembered(fake_pager):
    """LoCoMo's questions about something never said name one of its two people for what the other told ("What
    design is featured on Dave's guitar?" of Calvin's guitar): an answer taking nothing from the named person's own
    recalled lines is theirs, not what the named one told."""
    result = _transcript(fake_pager, "Dave fixed an old Mustang at the workshop.").ask(
        "What car did Dave fix at the workshop?")
    assert result.answer == NOT_IN_WHAT_I_FOUND
    assert result.trace.grounding == {"grounded": False, "unsupported": [], "takes_from_named": False}
    polar = _transcript(fake_pager, "No, he did not.").ask("Did Dave fix a car at the workshop?")
    assert polar.answer == "No, he did not."  # a yes or a no takes no word from anyone's lines


def test_a_general_question_is_not_checked(fake_pager):
    chat = _chat(fake_pager, "Lisbon is the capital of Portugal.")
    result = chat.ask("What did we say about the capital of Portugal?")
    assert result.trace.grounding is None


def test_an_earlier_reply_that_made_a_value_up_is_no_evidence_for_it(fake_pager):
    """The assistant's words are never evidence about the user: an invented name in a recalled reply does not make
    the same name, said again, memory."""
    chat = _chat(fake_pager, "Your husband is called Ethan.", replies="Your husband is called Ethan.")
    result = chat.ask("What is my husband's name?")
    assert result.answer == NOT_IN_WHAT_I_FOUND
    assert result.trace.grounding == {"grounded": False, "unsupported": ["Ethan"], "takes_from_notes": False}


def test_a_served_answer_says_why_it_is_not_remembered(fake_pager):
    """Through ``serve``, the completion's ``localpager`` field carries the check that turned the answer into "not
    remembered" (and the floor's verdict), so a client can tell a made-up value from nothing found."""
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from localpager.serving.app import create_app

    lp, chat = _pager_and_chat(fake_pager, "Your sister lives in Lisbon.")
    history = [{"role": t.role, "content": t.text} for t in chat.pager.turns]
    with TestClient(create_app(lp)) as client:
        r = client.post("/v1/chat/completions", headers={"X-Conversation-Id": "c"},
                        json={"model": "localpager", "messages": history + [
                            {"role": "user", "content": "Where does my sister live?"}]})
    memory = r.json()["localpager"]
    assert r.json()["choices"][0]["message"]["content"] == NOT_IN_WHAT_I_FOUND and memory["decision"] == "unknown"
    assert memory["grounding"] == {"grounded": False, "unsupported": ["Lisbon"], "takes_from_notes": False}
    assert memory["answerable"]["answer"] is True  # the floor let the recall through: the answer was the problem


def test_an_answer_to_a_question_for_a_told_value_must_take_something_from_what_was_recalled():
    notes, question = "My pup is called Miso; he runs this household.", "Whose lead do I grab for the morning walk?"
    assert grounding.check("You grab Miso's lead.", notes, question, value=True).grounded
    for empty in ('The answer is "The morning walk"', "Your answer is too long and doesn't provide anything useful."):
        found = grounding.check(empty, notes, question, value=True)
        assert not found.grounded and not found.unsupported and not found.to_dict()["takes_from_notes"]
        assert grounding.check(empty, notes, question).grounded  # a question for help: nothing is made up
    # a number by its digits, however it is written: "UA792" takes the 792 of "UA 792"
    assert grounding.check("UA792.", "I'm on UA 792 on Friday.", "Which flight am I on?", value=True).grounded


def test_an_answer_for_a_told_value_taken_from_the_users_own_question_is_not_remembered(fake_pager):
    """The user's question tells nothing: "Is it worth renting a car in Cape Town?" says nothing of who the rent
    is paid to, and an answer made of its words ("Renting a car in Cape Town is a luxury.") answers from nothing."""
    said = ["Is it worth renting a car in Cape Town?", *GARDEN[1:]]
    chat = _chat(fake_pager, "Renting a car in Cape Town is a luxury.", said=said)
    result = chat.ask("Who do I pay my rent to?")
    assert result.answer == NOT_IN_WHAT_I_FOUND
    assert result.trace.grounding == {"grounded": False, "unsupported": [], "takes_from_notes": False}


def test_a_turn_that_tells_something_beside_its_question_is_evidence_for_what_it_tells(fake_pager):
    said = ["My landlord is Mr Okafor. Is it worth renting a car in Cape Town?", *GARDEN[1:]]
    chat = _chat(fake_pager, "You pay Mr Okafor.", said=said)
    assert chat.ask("Who do I pay my rent to?").answer == 'You told me: "' + said[0] + '"'


def test_evidence_leaves_out_what_a_chat_user_passes_on_from_the_assistant():
    """"You said my husband's name is Ethan." is the assistant's word: "Ethan" in an answer is backed by nothing
    the user told, so the made-up name cannot come back as memory; a transcript's "you" is another speaker."""
    turns = [Turn(role="user", text="You said my husband's name is Ethan. My sister is Freya.", index=0),
             Turn(role="user", text="You said the lake was frozen.", index=1, speaker="Caroline")]
    injections = [Injection(page=None, turns=[0, 1])]
    for told in (False, True):
        shown = grounding.evidence(turns, injections, told=told)
        assert "Ethan" not in shown and "My sister is Freya." in shown and "the lake was frozen" in shown


HANDED = ["Translate to Portuguese: I am allergic to Penicillin G.",  # a text handed over for work
          "My friend wrote: I have two dogs called Rex and Fido.",  # someone's words framed
          "My mum wants me to translate this: 'I have a cat named Felix.'"]


@pytest.mark.parametrize("text", HANDED)
def test_evidence_for_a_question_leaves_out_what_a_chat_user_hands_over(text):
    """The words after the colon, or in quotation marks, are not the user's claim: no value of theirs backs an
    answer about the user ("Am I allergic to anything?" had quoted the translation request as what they told), and
    such a line tells nothing to quote in place of an answer."""
    turns = [Turn(role="user", text=f"My sister is Freya. {text}", index=0)]
    injections = [Injection(page=None, turns=[0])]
    for question in ("Am I allergic to anything?", "Do I have any pets?"):
        shown = grounding.evidence(turns, injections, question=question)
        assert shown == "user: My sister is Freya."
        assert not grounding.tells(text, question)
    assert text in grounding.evidence(turns, injections)  # without a question, the whole line (the floor's reading)


@pytest.mark.parametrize("text, question", [
    (HANDED[0], "What did I ask you to translate?"),  # the question asks about what was handed over
    (HANDED[1], "What did my friend write?"),
    (HANDED[2], "What did my mum want translated?"),
])
def test_a_question_about_what_was_handed_over_may_take_it_as_evidence(text, question):
    turns = [Turn(role="user", text=text, index=0)]
    assert text in grounding.evidence(turns, [Injection(page=None, turns=[0])], question=question)
    assert grounding.tells(text, question)


def test_an_answer_about_the_user_from_a_text_they_handed_over_is_not_remembered(fake_pager):
    said = ["Translate to Portuguese: I am allergic to Penicillin G.", *GARDEN[1:]]
    chat = _chat(fake_pager, "You are allergic to Penicillin G.", said=said, floor=SURE)
    result = chat.ask("Am I allergic to anything?")
    assert result.trace.decision == "unknown" and result.answer == NOT_IN_WHAT_I_FOUND
    assert result.trace.grounding["grounded"] is False


def test_evidence_told_keeps_a_lines_sentences_that_ask_nothing():
    turns = [Turn(role="user", text="My landlord is Mr Okafor. Should I ask him about the heating?", index=0),
             Turn(role="user", text="Is it worth renting a car?", index=1)]
    injections = [Injection(page=None, turns=[0, 1])]
    assert grounding.evidence(turns, injections, told=True) == "user: My landlord is Mr Okafor."


@pytest.mark.parametrize("question, told, stamped", [
    ("When did I call the plumber?", False, True),  # when something happened: the day it was told of answers
    ("What did we talk about on Friday?", False, True),  # nothing told asked for: the day may be restated
    ("When's the cutoff for my visa form?", False, False),  # a date still to come: what was said answers it
    ("What's my locker number?", True, False),  # a told value
])
def test_the_day_a_line_was_said_backs_only_an_answer_about_when_something_happened(question, told, stamped):
    assert grounding.stamps_answer(question, told) is stamped


def _stamped_chat(fake_pager, reply: str):
    """A chat whose turns were said on 6 December 2026, the first one promising the visa form without a date."""
    return _chat(fake_pager, reply, said=["I still have to send the visa form for the trip.",
                                          "The consulate wants a new photo for it.", "My new passport arrives tomorrow.",
                                          *GARDEN[3:]], time="2026-12-06T10:00:00")


def test_a_date_copied_from_the_day_a_line_was_said_is_no_told_date(fake_pager):
    """The recalled lines show the day each was said ("[6 December 2026] user: ..."), and a small model takes its
    dates from what it sees ("What date is the hallway painter coming?" got "... on December 26." from a line
    about the hallway). That day is no evidence for a date still to come; a date the user's words give, resolved
    from when they said it ("tomorrow [7 December 2026]"), is."""
    copied = _stamped_chat(fake_pager, "The cutoff for the visa form is December 6th.").ask(
        "When's the cutoff for my visa form?")
    assert copied.answer == NOT_IN_WHAT_I_FOUND
    assert copied.trace.grounding["unsupported"] == ["6", "December"]
    # a date the words give is still an answer (chosen among the dates the notes hold, so not checked again)
    resolved = _stamped_chat(fake_pager, "7 December 2026").ask("When does my new passport arrive?")
    assert resolved.answer == "7 December 2026"
    said = _stamped_chat(fake_pager, "6 December 2026").ask("When did I mention the visa form?")
    assert said.answer == "6 December 2026"  # when something was said: the day it was said answers


@pytest.mark.parametrize("text, pieces", [
    ("My mum wants me to translate this: 'I have a cat named Felix.' My sister is Freya.",
     ["My mum wants me to translate this: 'I have a cat named Felix.'", "My sister is Freya."]),
    ('We did a piece called "Finding Freedom." It was powerful.', ['We did a piece called "Finding Freedom."',
                                                                   "It was powerful."]),
    ("Dr. Patel is here. It costs 3.5 pounds.", ["Dr. Patel is here.", "It costs 3.5 pounds."]),
])
def test_a_sentence_ends_after_the_quotation_mark_its_stop_closes(text, pieces):
    """Read as one sentence, the frame's quotation took the sentence after it along: "My sister is Freya." was no
    fact and no evidence (``facts.handed_over`` read the whole as handed over)."""
    from localpager.core.text import sentences

    assert sentences(text) == pieces
    turns = [Turn(role="user", text=text, index=0)]
    if "Freya" in text:
        assert grounding.evidence(turns, [Injection(page=None, turns=[0])], question="Who is Freya?") == \
            "user: My sister is Freya."


def test_a_sentence_after_a_framed_quotation_is_still_the_users_fact():
    from localpager.core.facts import extract

    text = "My mum wants me to translate this: 'I have a cat named Felix.' My sister is Freya."
    assert [f.text for f in extract(Turn(role="user", text=text, index=0))] == ["My sister is Freya."]
