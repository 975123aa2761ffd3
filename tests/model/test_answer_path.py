"""The answer path with the real SmolLM2 GGUF, the real embedder, FAISS and SQLite: the focused prompt,
the repetition guard, the trigger, dated injection and newest-wins."""

from __future__ import annotations

import pytest

from localpager.core.pager import PagingConfig
from localpager.memory.api import LocalPager
from localpager.runtime.guard import RepetitionGuard, loop_start, repeated_sentence
from localpager.runtime.layouts import LATEST, answer_messages

pytestmark = [pytest.mark.model, pytest.mark.embedder]

FILLER = [
    ("Any tips for keeping basil alive on a windowsill?", "Water it when the top of the soil is dry and pinch off the flowers."),
    ("I watched a documentary about octopuses last night.", "They are remarkable; each arm has its own cluster of neurons."),
    ("The train was late again this morning.", "That is frustrating; maybe an earlier train gives you some slack."),
    ("I'm thinking of repainting the hallway a lighter colour.", "A lighter colour makes a narrow hallway feel wider."),
    ("My nephew started learning the violin.", "Lovely; the first year is the hardest for the neighbours."),
    ("We had pancakes for breakfast on Sunday.", "A good Sunday tradition; blueberries work well in them."),
]


def chat_with(tmp_path, backend, facts: dict[int, str], n_turns: int = 60, times: dict[int, str] | None = None,
              **options):
    """A conversation of ``n_turns`` filler turns with ``facts`` (turn index -> user text) planted in it."""
    lp = LocalPager(tmp_path / "s.db", backend=backend, **options)
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
    assert "Ingrid Novak" in result.answer
    (cited,) = result.citations
    assert (cited.turn, cited.page_id, cited.used) == (12, chat.pager.page_of_turn(12).page_id, True)
    assert repeated_sentence(result.answer) is None


def test_small_talk_is_not_paged_in_and_a_question_is(tmp_path, backend):
    lp, chat = chat_with(tmp_path, backend, {12: "I'm seriously allergic to peanuts, I always carry an EpiPen."})
    assert chat.pager.evicted
    small_talk = chat.ask("That reminds me, I should water the plants tonight.")
    assert small_talk.trace.trigger == "none" and small_talk.trace.decision == "answer"
    probe = chat.ask("Which snack should I never eat?")
    assert probe.trace.trigger == "gate" and probe.trace.injected_turns == [12]


def test_recalled_turns_show_their_date(tmp_path, backend):
    times = {i: ("1:56 pm on 8 May, 2023" if i < 30 else "10:37 am on 27 June, 2023") for i in range(60)}
    lp, chat = chat_with(tmp_path, backend, {12: "I ran my first half marathon yesterday, in under two hours!"},
                         times=times)
    result = chat.ask("When did I run my first half marathon?")
    assert result.trace.injected_turns == [12]
    assert result.citations[0].time == "1:56 pm on 8 May, 2023"
    side = lp.side_backend
    prompt = side.detokenize(side._llm._input_ids[: side._llm.n_tokens])
    assert "[1:56 pm on 8 May, 2023] user: I ran my first half marathon yesterday" in prompt
    # (whether the 135M model then answers with the date is measured, not asserted: LoCoMo's temporal F1)


def test_the_newest_statement_of_a_fact_wins(tmp_path, backend):
    lp, chat = chat_with(tmp_path, backend, {8: "My yoga class is on Mondays at 6pm.",
                                             30: "Actually my yoga class moved to Thursdays at 7pm."})
    assert chat.pager.page_of_turn(8).evicted and chat.pager.page_of_turn(30).evicted
    result = chat.ask("When is my yoga class?")
    assert result.trace.injected_turns == [30]
    assert result.citations[0].label == LATEST
    assert "Thursday" in result.answer and "Monday" not in result.answer


def test_the_guard_stops_a_real_loop(backend):
    # a generated probe on which greedy SmolLM2-135M loops ("I'm so glad you're here, I'm so glad ...")
    prompt = backend.render(answer_messages("focused", "user: I've been converted: reggae is my favorite music now.",
                                            "What should be playing at my surprise party?"))
    raw = backend.generate(prompt, max_tokens=96)
    assert raw.stopped == "length" and loop_start(raw.text) is not None
    guard = RepetitionGuard()
    gen = backend.generate(prompt, max_tokens=96, on_text=guard)
    assert guard.tripped and gen.stopped == "caller" and len(gen.tokens) < 40
    assert guard.text and loop_start(guard.text) is None and raw.text.startswith(guard.text)
