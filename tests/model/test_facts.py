"""The long-term layer with the real SmolLM2 GGUF, the real embedder and the fitted fact model and floor.

A user states who they are among small talk; the pages that hold it are evicted; then come questions that
depend on it without asking about the past, a general question, a change of a value, a forget and an overview.
The tests check what reached the model (the prompt, the quoted lead), the decision and the citations, never one
generated string (greedy output differs between CPUs and builds); the fitted models' verdicts are checked on
cases far from their thresholds. The statements and questions are written for these tests.
"""

from __future__ import annotations

import pytest
from helpers import Recording

from localpager.backends.constraints import OneOf
from localpager.core.pager import PagingConfig
from localpager.memory.api import LocalPager
from localpager.runtime.prompts import NOT_REMEMBERED
from localpager.runtime.settings import RecallSettings

pytestmark = [pytest.mark.model, pytest.mark.embedder]

SMALL_TALK = [
    ("Any tips for keeping basil alive on a windowsill?", "Water it when the top of the soil is dry."),
    ("I watched a documentary about octopuses.", "Each arm has its own cluster of neurons."),
    ("The hallway could use a lighter colour.", "A lighter colour makes a narrow hallway feel wider."),
    ("Pancakes or waffles, which is easier?", "Pancakes: no special iron needed."),
    ("What's a good stretch after running?", "A standing quad stretch, held for thirty seconds."),
]
SESAME = "I'm seriously allergic to sesame, even a trace sets me off."
LAPTOP_OLD = "My budget for the new laptop is $900."
LAPTOP_NEW = "Actually my laptop budget went up to $1,400."


@pytest.fixture
def chat(tmp_path, backend):
    lp = LocalPager(tmp_path / "s.db", backend=Recording(backend), recall=RecallSettings(max_answer_tokens=24))
    chat = lp.conversation("c", create=True, config=PagingConfig(boundary="fixed_4", budget=256))
    planted = {2: SESAME, 8: LAPTOP_OLD, 20: LAPTOP_NEW}
    for i in range(28):
        user, assistant = SMALL_TALK[(i // 2) % len(SMALL_TALK)]
        if i % 2 == 0:
            chat.add_turn("user", planted.get(i, user))
        else:
            chat.add_turn("assistant", "Noted." if i - 1 in planted else assistant)
    assert all(chat.pager.page_of_turn(t).evicted for t in (2, 8)), "the precondition of these tests"
    yield lp, chat
    lp.close()


def test_a_question_that_depends_on_who_the_user_is_is_answered_from_the_fact(chat):
    lp, chat = chat
    t = chat.ask("I'm packing snacks for a long flight. Anything I should stay away from?").trace
    assert t.decision == "fact"
    assert t.facts[0]["text"] == SESAME and t.facts[0]["probability"] >= 0.6
    assert t.answer == f'You told me: "{SESAME}"'  # the user's words and nothing a model adds after them
    assert [c.turn for c in t.citations] == [2] and t.tokens["answer"]["generated"] == 0


def test_a_request_in_words_no_list_names_is_answered_with_the_fact_and_the_models_work(chat):
    # no question, no word of the task lexicon: the claim model reads that it asks rather than tells
    lp, chat = chat
    t = chat.ask("Plan a snack box for my long flight, skipping whatever I should stay away from.").trace
    assert t.decision == "fact" and t.facts[0]["text"] == SESAME and t.facts[0]["probability"] >= 0.6
    quote = f'You told me: "{SESAME}"'
    assert t.answer.startswith(quote)
    # then the model's work: the quote is sent first, not put in its prompt, where the turn read as done and the
    # model ended it at once (no work at all)
    assert t.tokens["answer"]["generated"] > 0 and len(t.answer) > len(quote) + 1
    quoted = lp.backend.tokenize(quote)
    answered = lp.backend.side or lp.backend  # the context that answers recalls, when it has its own
    assert answered.prompts[-1][-len(quoted):] != quoted
    assert [c.turn for c in t.citations] == [2]
    assert not chat.facts()[-1].text.startswith("Plan")  # and the request itself is no fact


def test_the_models_work_after_the_quote_is_stopped_when_it_loops(chat):
    # the model is made to loop (its own greedy output differs between builds); the repetition guard stops it
    # at the third copy, and the stop reaches llama.cpp
    lp, chat = chat
    lp.backend.force = OneOf((" Pack: " + ", ".join(["rice crackers"] * 4),))
    t = chat.ask("Plan a snack box for my long flight, skipping whatever I should stay away from.").trace
    assert t.decision == "fact" and t.stopped == "caller"
    assert t.answer == f'You told me: "{SESAME}" Pack: rice crackers'


def test_a_request_full_of_the_users_details_is_no_memory(chat):
    # the claim model reads it as a claim and the cues find a schedule in it; its parse reads a request
    lp, chat = chat
    chat.ask("Schedule my piano lesson for Tuesdays at 5pm.")
    assert not any("piano" in f.text for f in chat.facts())
    t = chat.ask("When is my piano lesson?").trace
    assert t.decision != "fact" and "You told me" not in t.answer


def test_a_request_for_something_never_told_is_not_remembered_and_a_request_for_help_is_helped(chat):
    lp, chat = chat
    t = chat.ask("Give me the code for my bike lock.").trace  # asked as a request, never told
    assert t.decision == "unknown" and t.answer.startswith("I don't remember that")
    t = chat.ask("Suggest a gift for my mum.").trace  # a request for work, nothing about it told
    assert t.decision != "unknown"


def test_a_general_request_reaches_no_fact(chat):
    lp, chat = chat
    t = chat.ask("Recommend a podcast about astronomy.").trace
    assert t.decision != "fact" and t.facts == []


def test_a_general_question_reaches_no_fact(chat):
    lp, chat = chat
    t = chat.ask("How long should I boil an egg for a runny yolk?").trace
    assert t.decision != "fact" and t.facts == []
    assert t.injected_page_ids == []


def test_the_newer_value_is_the_one_shown_and_answered_from(chat):
    lp, chat = chat
    current = [f.text for f in chat.facts()]
    assert LAPTOP_NEW in current and LAPTOP_OLD not in current
    t = chat.ask("Which laptop should I buy for video editing?").trace
    assert t.decision in ("fact", "recall", "answer")
    if t.decision == "fact":
        assert t.facts[0]["text"] == LAPTOP_NEW and [r["text"] for r in t.facts[0]["replaced"]] == [LAPTOP_OLD]
    prompts = lp.backend.prompts + (lp.backend.side.prompts if lp.backend.side else [])
    assert all("$900" not in lp.backend.inner.detokenize(p) for p in prompts)  # the old value reaches the model nowhere
    assert "$900" not in t.answer


def test_a_forgotten_fact_is_gone_and_its_question_is_not_answered_from_it(chat):
    lp, chat = chat
    chat.forget(match="sesame")
    assert all("sesame" not in f.text.lower() for f in chat.facts(all=True))
    t = chat.ask("I'm packing snacks for a long flight. Anything I should stay away from?").trace
    assert t.decision != "fact" and all("sesame" not in (f["text"]).lower() for f in t.facts)
    prompts = lp.backend.prompts + (lp.backend.side.prompts if lp.backend.side else [])
    assert all("sesame" not in lp.backend.inner.detokenize(p).lower() for p in prompts)


def test_a_question_about_something_never_said_is_not_answered_from_an_unrelated_turn(chat):
    lp, chat = chat
    t = chat.ask("What did I say my cat's name was?").trace
    assert t.decision == "unknown" and t.answer == NOT_REMEMBERED
    assert t.answerable["probability"] < t.answerable["threshold"]


def test_what_do_you_remember_about_me_lists_the_current_facts(chat):
    lp, chat = chat
    calls = len(lp.backend.prompts)
    t = chat.ask("What do you remember about me?").trace
    assert t.decision == "overview" and len(lp.backend.prompts) == calls  # written out, no model
    assert SESAME in t.answer and LAPTOP_NEW in t.answer and LAPTOP_OLD not in t.answer


def test_a_question_about_the_user_never_answered_is_memory_or_nothing_never_the_models_guess(chat):
    """After the allergy is forgotten, "Am I allergic to anything?" asks about the user: the model alone would
    answer (before: "No", or an invented allergy); it goes through the recall and its floor instead."""
    lp, chat = chat
    chat.forget(match="sesame")
    t = chat.ask("Am I allergic to anything?").trace
    assert t.trigger in ("personal", "gate") and t.decision in ("unknown", "recall")
    assert "sesame" not in t.answer.lower()
    if t.decision == "recall":  # what it was given is a remembered turn, cited
        assert t.citations


def test_a_new_chat_does_not_know_the_user_and_says_so_without_the_model(tmp_path, backend):
    lp = LocalPager(tmp_path / "new.db", backend=Recording(backend))
    chat = lp.conversation("new", create=True)
    calls = len(lp.backend.prompts)
    t = chat.ask("What is my sister's name?").trace
    assert t.trigger == "personal" and t.answer == NOT_REMEMBERED and len(lp.backend.prompts) == calls
    t = chat.ask("How do I keep basil alive on a windowsill?").trace
    assert t.trigger == "none" and t.decision == "answer" and not t.answer.lower().startswith("you told me")
    lp.close()


@pytest.mark.parametrize("question", ["What is my husband's name?", "What colour did I want for my hallway?",
                                      "What was my documentary about?", "Which herb was on my windowsill?"])
def test_an_answer_about_the_user_from_a_recall_states_only_values_it_was_shown(chat, question):
    """Whatever the model says to a question about the user after a recall, every number and name of it is in
    the recalled turns or the question, or the answer is "not remembered" (``runtime.grounding``)."""
    from localpager.core.dates import format_day
    from localpager.runtime.grounding import values

    lp, chat = chat
    t = chat.ask(question).trace
    if t.decision != "recall":
        assert t.decision in ("unknown", "fact", "answer")
        return
    assert t.grounding is not None
    if not t.grounding["grounded"]:  # the floor was sure of a line of the user's: it answers, quoted, not the model
        from localpager.runtime.recall import SURE_FLOOR

        assert t.answerable["probability"] >= SURE_FLOOR and t.answer.startswith('You told me'), t.answer
    # what the model read: each recalled turn with its day ("[6 December 2026] user: ..."), and the question
    shown = " ".join(f"{format_day(c.time) if c.time else ''} {c.text}" for c in t.citations) + " " + question
    assert all(v.casefold() in shown.casefold() or v.lstrip("0") in shown for v in values(t.answer)), t.answer


@pytest.mark.parametrize("question", ["What date is the hallway painter coming?", "When is my hallway being painted?",
                                      "When is my visa form due?"])
def test_an_answer_for_a_date_never_told_takes_no_value_from_the_day_a_line_was_said(chat, question):
    """The recalled lines show the day each was said, and a small model takes its dates from what it sees ("The
    hallway painter is coming on December 26.", its month from the day the hallway line was said). That day backs
    only an answer about when something happened (``grounding.stamps_answer``): any value of a recall's answer
    here is in the user's words or the question (the first two reach a recall of the hallway turns)."""
    from localpager.core.dates import annotate, format_day
    from localpager.runtime.grounding import values

    lp, chat = chat
    t = chat.ask(question).trace
    if t.decision != "recall":
        assert t.decision in ("unknown", "fact", "answer")
        return
    # the user's words as the model read them, relative dates resolved ("tomorrow [7 December 2026]"); a quoted
    # answer may say which day words like "tomorrow" were said ('You told me on 6 December 2026: "..."'): that day
    # is what it says it is, and no other value may come from it
    said = " ".join(annotate(c.text, c.time) for c in t.citations) + " " + question
    answer = t.answer
    for c in t.citations:
        answer = answer.replace(f" on {format_day(c.time)}:", ":") if c.time else answer
    assert all(v.casefold() in said.casefold() or v.lstrip("0") in said for v in values(answer)), t.answer


def _told(tmp_path, backend, first: list[str], then: list[str]):
    """A new store and chat in which the user tells ``first``, the small talk, then ``then``, each line answered
    "Noted."; the caller closes the store."""
    lp = LocalPager(tmp_path / "s.db", backend=Recording(backend), recall=RecallSettings(max_answer_tokens=24))
    chat = lp.conversation("c", create=True, config=PagingConfig(boundary="fixed_4", budget=256))
    for text in [*first, *[u for u, _ in SMALL_TALK], *then]:
        chat.add_turn("user", text)
        chat.add_turn("assistant", "Noted.")
    return lp, chat


def test_a_change_told_as_an_event_replaces_the_older_value(tmp_path, backend):
    """"I cancelled that membership and joined PureGym instead." is an event to the fact model; it is the newest
    value of the gym all the same, and the older one no longer answers."""
    old, new = ("The only gym membership I keep paying for is at Anytime Fitness.",
                "I cancelled that membership and joined PureGym instead.")
    lp, chat = _told(tmp_path, backend, [old], [new])
    current = [f.text for f in chat.facts()]
    assert new in current and old not in current
    t = chat.ask("Which gym am I a member of?").trace
    assert "Anytime" not in t.answer
    if t.decision == "fact":
        assert t.facts[0]["text"] == new
    lp.close()


def test_a_change_told_without_an_i_is_a_fact_and_the_newer_value_answers(tmp_path, backend):
    """"New dentist: Dr Amara Osei at Parkside, since the old one retired." has no first person, but tells that
    something changed and names what it is now (``facts._changes_own``): it is the user's fact, and the older
    dentist no longer answers. Without the rule it was no fact, and the question quoted the old dentist."""
    old, new = ("My dentist is Dr Priya Kaur on the high street.",
                "New dentist: Dr Amara Osei at Parkside, since the old one retired.")
    lp, chat = _told(tmp_path, backend, [old], [new])
    assert new in [f.text for f in chat.facts()]
    t = chat.ask("Who is my dentist?").trace
    assert "Kaur" not in t.answer
    if t.decision == "fact":
        assert t.facts[0]["text"] == new
    lp.close()


def test_two_things_of_one_kind_both_answer_and_one_changed_value_answers_alone(tmp_path, backend):
    """Two allergies both stand and "What am I allergic to?" quotes both; a flight changed in words supersession
    reads ("Change of plans: ... now ...") quotes the newer only, and a question about one allergy only that one."""
    peanuts, penicillin = "I'm allergic to peanuts.", "I'm also allergic to penicillin."
    flight, changed = "My flight is BA 117 on Friday.", "Change of plans: I'm now on flight KL 119 on Friday."
    lp, chat = _told(tmp_path, backend, [peanuts], [penicillin, flight, changed])
    t = chat.ask("What am I allergic to?").trace
    assert t.decision == "fact" and sorted(f["text"] for f in t.facts) == sorted([peanuts, penicillin])
    assert t.answer.startswith("You told me: ") and peanuts in t.answer and penicillin in t.answer
    assert t.tokens["answer"]["generated"] == 0 and len(t.citations) == 2
    medicine = chat.ask("Which medicines can't I take?").trace
    assert [f["text"] for f in medicine.facts] == [penicillin] and peanuts not in medicine.answer
    t = chat.ask("What's my flight number?").trace
    assert t.decision == "fact" and [f["text"] for f in t.facts] == [changed] and "BA 117" not in t.answer
    lp.close()


def test_the_assistants_words_passed_back_never_answer_as_memory(tmp_path, backend):
    """Issue 38's "a made-up answer must never come back as memory": a user passing back what the assistant said
    ("You said my husband's name is Ethan.") gives no fact, and "Ethan" in the model's answer is backed by nothing
    the user told. Before, the line was a fact and both questions were answered with it quoted as the user's."""
    lp = LocalPager(tmp_path / "relay.db", backend=backend)
    chat = lp.conversation("relay", create=True)
    for text in ["My sister is called Freya and she lives in Porto.", "You said my husband's name is Ethan.",
                 "Any tips for keeping basil alive on a windowsill?"]:
        chat.add_turn("user", text)
    assert not [f for f in chat.facts() if "Ethan" in f.text]
    for question in ("What is my husband's name?", "Who is my husband?"):
        answer = chat.ask(question)
        assert "ethan" not in answer.answer.lower() and answer.trace.decision != "fact"
    assert "Freya" in chat.ask("What's my sister called?").answer  # the user's own word still answers
    lp.close()


def test_a_statement_set_in_a_made_up_world_never_answers_as_memory(tmp_path, backend):
    """Issue 38 item 2's "a hypothetical": a statement set in a story or a game ("For the improv game tonight, I'm
    allergic to sesame.") is no fact, so the user's own allergy is the one the answer quotes. Before, both lines
    were facts and the answer quoted all three, the screenplay's "I'm not allergic to anything." first."""
    lp = LocalPager(tmp_path / "scene.db", backend=backend)
    chat = lp.conversation("scene", create=True)
    for text in ["I'm allergic to penicillin.", "In the screenplay I'm writing, I'm not allergic to anything.",
                 "For the improv game tonight, I'm allergic to sesame.",
                 "Any tips for keeping basil alive on a windowsill?"]:
        chat.add_turn("user", text)
    assert [f.text for f in chat.facts() if f.current] == ["I'm allergic to penicillin."]
    trace = chat.ask("What am I allergic to?").trace
    assert trace.decision == "fact" and [f["text"] for f in trace.facts] == ["I'm allergic to penicillin."]
    lp.close()
