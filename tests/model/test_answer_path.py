"""The answer path with the real SmolLM2 GGUF, the real embedder, FAISS and SQLite: the focused prompt,
the repetition guard, the trigger, dated injection and newest-wins.

Greedy output differs between CPUs and builds (the same prompt ended with eos on another machine where it
looped here): these tests check what the model was given, the trace and the stored turns, and where they need
the model to say something (a loop) they make it say it with a constraint, so the real model generates it."""

from __future__ import annotations

import pytest
from helpers import Recording

from localpager.backends.constraints import OneOf
from localpager.core.dates import format_day
from localpager.core.pager import PagingConfig
from localpager.memory.api import LocalPager
from localpager.runtime.settings import RecallSettings
from localpager.runtime.guard import RepetitionGuard, loop_start, repeated_sentence
from localpager.runtime.prompts import LATEST, NOT_IN_WHAT_I_FOUND, answer_messages

pytestmark = [pytest.mark.model, pytest.mark.embedder]

FILLER = [
    ("Any tips for keeping basil alive on a windowsill?", "Water it when the top of the soil is dry and pinch off the flowers."),
    ("I watched a documentary about octopuses last night.", "They are remarkable; each arm has its own cluster of neurons."),
    ("The train was late again this morning.", "That is frustrating; maybe an earlier train gives you some slack."),
    ("I'm thinking of repainting the hallway a lighter colour.", "A lighter colour makes a narrow hallway feel wider."),
    ("My nephew started learning the violin.", "Lovely; the first year is the hardest for the neighbours."),
    ("We had pancakes for breakfast on Sunday.", "A good Sunday tradition; blueberries work well in them."),
]


# The loop greedy SmolLM2-135M fell into on one build for the reggae probe below; four copies, so that the
# guard (a run of words three times in a row) stops it before the constraint ends it.
LOOP = ", ".join(["I'm so glad you're here"] * 4)
KEPT = "I'm so glad you're here"  # what the guard keeps: everything before the second copy
REGGAE = ("user: I've been converted: reggae is my favorite music now.", "What should be playing at my surprise party?")


def chat_with(tmp_path, backend, facts: dict[int, str], n_turns: int = 60, times: dict[int, str] | None = None,
              **options):
    """A conversation of ``n_turns`` filler turns with ``facts`` (turn index -> user text) planted in it, on
    ``Recording(backend)`` (``lp.backend.side.prompts[-1]``: the focused prompt an answer was generated from)."""
    # the tests look at prompts, not answers; the recall path alone (the long-term layer's own tests: test_facts.py)
    options.setdefault("recall", RecallSettings(max_answer_tokens=24, facts=False, abstain=False))
    lp = LocalPager(tmp_path / "s.db", backend=Recording(backend), **options)
    chat = lp.conversation("c", create=True, config=PagingConfig(boundary="fixed_10", budget=256))
    for i in range(n_turns):
        user, assistant = FILLER[(i // 2) % len(FILLER)]
        if i % 2 == 0:
            chat.add_turn("user", facts.get(i, user), time=(times or {}).get(i))
        else:
            chat.add_turn("assistant", "Noted, thanks for telling me." if i - 1 in facts else assistant,
                          time=(times or {}).get(i))
    return lp, chat


def test_a_question_about_an_evicted_fact_is_answered_from_a_focused_prompt(tmp_path, backend):
    lp, chat = chat_with(tmp_path, backend, {12: "My accountant this year is Ingrid Novak; she handles all my taxes."})
    assert chat.pager.page_of_turn(12).evicted
    result = chat.ask("Who is handling my taxes this year?")
    trace = result.trace
    assert trace.trigger == "gate" and trace.injected_turns == [12]
    (cited,) = result.citations
    assert (cited.turn, cited.page_id, cited.used) == (12, chat.pager.page_of_turn(12).page_id, True)
    # the model answered from a focused prompt holding the fact and the question, on its own context; what it
    # then says differs between builds (whether a 135M model names her is measured by eval, not asserted)
    focused = lp.backend.side.inner.detokenize(lp.backend.side.prompts[-1])
    assert "is Ingrid Novak; she handles all my taxes." in focused  # ("this year" gets its year beside it)
    assert focused.count("Who is handling my taxes this year?") == 1 and "Bookmarks" not in focused
    assert result.answer and repeated_sentence(result.answer) is None  # the guard lets no sentence come twice
    assert chat.turns[-1].text == result.answer  # what was said is what is stored


def test_a_checked_answer_about_the_user_is_their_words_quoted(tmp_path, backend):
    # the answer is held back and checked (``abstain``); once it passes, it is the user's turn it took its words
    # from, quoted as said, whatever the model wrote (``RecallSettings.quote_recalls``); or "not remembered" when
    # the check finds it took nothing from that turn
    said = "My accountant this year is Ingrid Novak; she handles all my taxes."
    lp, chat = chat_with(tmp_path, backend, {12: said}, recall=RecallSettings(max_answer_tokens=24, facts=False))
    result = chat.ask("Who is handling my taxes this year?")
    assert result.trace.decision in ("recall", "unknown") and result.trace.injected_turns == [12]
    day = format_day(chat.turns[12].time)  # "this year" counts from the day it was said: the quote names it
    assert result.answer in (f'You told me on {day}: "{said}"', NOT_IN_WHAT_I_FOUND), result.answer


def test_an_answer_taken_from_a_request_quotes_what_the_user_asked_for(tmp_path, backend):
    # a request tells nothing, yet names what it was for; the model is made to take its words from it (its own
    # answer differs between builds), and the checked answer quotes the request as asked, not as told
    asked = "Write me a cover letter for the data analyst job at Acme Foods."
    lp, chat = chat_with(tmp_path, backend, {12: asked}, recall=RecallSettings(max_answer_tokens=24, facts=False))
    lp.backend.force = OneOf(("You applied for the data analyst job at Acme Foods.",))
    result = chat.ask("Which job did I apply for?")
    assert result.trace.decision == "recall" and result.trace.injected_turns == [12]
    assert result.answer == f'You asked me: "{asked}"'


def test_small_talk_is_not_paged_in_and_a_question_is(tmp_path, backend):
    lp, chat = chat_with(tmp_path, backend, {12: "I'm seriously allergic to peanuts, I always carry an EpiPen."})
    assert chat.pager.evicted
    small_talk = chat.ask("That reminds me, I should water the plants tonight.")
    assert small_talk.trace.trigger == "none" and small_talk.trace.decision == "answer"
    probe = chat.ask("Which snack should I never eat?")
    assert probe.trace.trigger == "gate" and probe.trace.injected_turns == [12]


# the 60 turns of ``chat_with``: the first 30 said on one day, the rest on another
TWO_DAYS = {i: ("1:56 pm on 8 May, 2023" if i < 30 else "10:37 am on 27 June, 2023") for i in range(60)}


def test_recalled_turns_show_their_date(tmp_path, backend):
    lp, chat = chat_with(tmp_path, backend, {12: "I ran my first half marathon yesterday, in under two hours!"},
                         times=TWO_DAYS)
    result = chat.ask("When did I run my first half marathon?")
    assert result.trace.injected_turns == [12]
    assert result.citations[0].time == "1:56 pm on 8 May, 2023"
    side = lp.side_backend
    prompt = side.detokenize(side._llm._input_ids[: side._llm.n_tokens])
    assert "[1:56 pm on 8 May, 2023] user: I ran my first half marathon yesterday" in prompt
    # (whether the 135M model then answers with the date is measured, not asserted: LoCoMo's temporal F1)


def test_asked_when_they_mentioned_something_the_answer_is_the_day_they_said_it(tmp_path, backend):
    # the turn speaks of last year; the question asks when it was said, so that day is the only date offered
    lp, chat = chat_with(tmp_path, backend, {12: "My plumber is Nadia Petrova, she fixed the boiler last year."},
                         times=TWO_DAYS)
    result = chat.ask("When did I mention my plumber?")
    assert result.trace.injected_turns == [12]
    assert "8 May 2023" in result.answer and "2022" not in result.answer


def test_the_newest_statement_of_a_fact_wins(tmp_path, backend):
    lp, chat = chat_with(tmp_path, backend, {8: "My yoga class is on Mondays at 6pm.",
                                             30: "Actually my yoga class moved to Thursdays at 7pm."})
    assert chat.pager.page_of_turn(8).evicted and chat.pager.page_of_turn(30).evicted
    result = chat.ask("When is my yoga class?")
    assert result.trace.injected_turns == [30]
    assert result.citations[0].label == LATEST
    # the model is shown the newest statement, marked latest, and never the one it replaced (what a 135M model
    # then says differs between builds: newest-wins accuracy is measured by eval, not asserted)
    focused = lp.backend.side.inner.detokenize(lp.backend.side.prompts[-1])
    assert "Actually my yoga class moved to Thursdays at 7pm." in focused and "(latest)" in focused
    assert "Mondays" not in focused


def test_the_guard_stops_a_real_loop(backend):
    """The real model generates the loop (held to it by a constraint: greedy decoding loops on some builds and
    not on others) and the real guard stops the generation at the repeat."""
    prompt = backend.render(answer_messages("focused", *REGGAE))
    loop = OneOf((LOOP,))
    raw = backend.generate(prompt, max_tokens=len(LOOP), constraint=loop)  # a token is at least one character
    assert raw.text == LOOP and loop_start(raw.text) is not None
    guard = RepetitionGuard()
    gen = backend.generate(prompt, max_tokens=len(LOOP), constraint=loop, on_text=guard)
    assert guard.tripped and gen.stopped == "caller" and len(gen.tokens) < len(raw.tokens)
    assert guard.text == KEPT and loop_start(guard.text) is None and raw.text.startswith(guard.text)


def test_an_answer_that_loops_is_cut_at_the_repeat_streamed_and_stored_without_it(tmp_path, backend):
    """The answer path runs every answer under the guard: the model made to loop, the answer, the streamed text
    and the stored turn are what comes before the repeat."""
    lp = LocalPager(tmp_path / "s.db", backend=Recording(backend, force=OneOf((LOOP,))))
    chat = lp.conversation("c", create=True)
    chat.add_turn("user", REGGAE[0].removeprefix("user: "))
    chat.add_turn("assistant", "Noted, thanks for telling me.")
    shown: list[str] = []
    result = chat.ask(REGGAE[1], mode="never", on_text=shown.append)
    assert result.trace.stopped == "caller" and result.answer == KEPT
    assert "".join(shown).strip() == KEPT  # the client never saw the loop
    assert chat.turns[-1].role == "assistant" and chat.turns[-1].text == KEPT
