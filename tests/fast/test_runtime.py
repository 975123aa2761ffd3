"""Every branch of the recall loop (``localpager/runtime.py``) on a scripted backend and a hashing embedder.

The long-term layer (standing facts) and the relevance floor are off here (``loop``): the facts these
conversations state would otherwise answer the questions first. tests/fast/test_facts.py tests them.

Each test builds a small conversation, checks the paging precondition it needs (which pages are evicted),
asks through ``Conversation.ask`` and asserts on the calls the ScriptedBackend recorded (which context ran
them, with which grammar and prompt) and on the trace. No model file, milliseconds per test.
"""

from __future__ import annotations

import pytest
from fakes import HashEmbedder, allows
import helpers
from helpers import DOG, STATEMENT, TALK

from localpager.backends.base import Message
from localpager.lab.selectors import lab_selector
from localpager.retrieval.rerank import RerankSelector
from localpager.runtime.recall import ContextOverflowError
from localpager.runtime.selector import PageSelector
from localpager.runtime.settings import RecallSettings
from localpager.runtime.trace import Candidate

FACT = "My dog is called Biscuit."
BISCUIT = "Biscuit chewed my slipper this morning."  # not a question, but about page 1


def loop(**settings) -> RecallSettings:
    """Recall settings with the long-term layer and the relevance floor off: the recall loop alone."""
    return RecallSettings(facts=False, abstain=False, **settings)


def open_chat(fake_pager, script=(), **options):
    options.setdefault("recall", loop())
    return helpers.open_chat(fake_pager, script, **options)


def grammar_calls(backend):
    return [c for c in backend.calls if c.grammar is not None]


def system_of(call) -> str:
    """The system message of a recorded prompt."""
    return call.text.split("<|im_start|>system\n", 1)[1].split("<|im_end|>", 1)[0]


def focused(notes: str, question: str) -> str:
    """The focused layout's prompt as the fake ChatML renders it (written out, not built by the code under test)."""
    return ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
            f"<|im_start|>user\nFrom earlier in this conversation:\n{notes}\n\nQuestion: {question}\n"
            "Answer in a few words.<|im_end|>\n<|im_start|>assistant\n")


# -- no page evicted ---------------------------------------------------------------------------------------
def test_nothing_evicted_a_message_that_asks_nothing_of_memory_is_one_plain_answer_on_the_chat_context(fake_pager):
    lp, chat = open_chat(fake_pager, ["Sunny and warm."], budget=1000, evicted=())
    result = chat.ask(STATEMENT)
    (call,) = lp.backend.calls
    assert call.backend == "main" and call.grammar is None
    assert "Bookmarks" not in call.text and call.text.count(FACT) == 1  # the fact is resident, in the chat
    assert call.text.endswith(f"<|im_start|>user\n{STATEMENT}<|im_end|>\n<|im_start|>assistant\n")
    t = result.trace
    assert (t.decision, t.trigger, t.rounds, t.answer) == ("answer", "none", 0, "Sunny and warm.")
    assert t.bookmarks == [] and t.injected_page_ids == [] and t.citations == [] and t.candidates == []
    assert chat.turns[-1].text == "Sunny and warm." and lp.backend.remaining == 0


def test_nothing_evicted_a_question_about_the_past_is_answered_from_its_turn_not_the_whole_chat(fake_pager):
    """The gate is asked with every page resident too (issue 38: a small model reading the whole chat invents a
    value nobody said): the turn it needs, in a focused prompt on the side context."""
    lp, chat = open_chat(fake_pager, ["Biscuit."], budget=1000, evicted=(), recall=RecallSettings(facts=False))
    t = chat.ask(DOG).trace
    (call,) = lp.backend.calls
    assert call.backend != "main" and "From earlier in this conversation:" in call.text and FACT in call.text
    assert (t.decision, t.trigger, t.answer) == ("recall", "gate", f'You told me: "{FACT}"') and t.bookmarks == []


# -- the retrieval trigger -----------------------------------------------------------------------------------
def test_a_question_while_pages_are_evicted_is_answered_on_the_fork_from_the_recalled_turn(fake_pager):
    lp, chat = open_chat(fake_pager, ["It is sunny and warm.", "Biscuit."])
    backend = lp.backend
    chat.ask(STATEMENT)  # warms the chat's context: a decision and an answer on "main"
    assert [c.backend for c in backend.calls] == ["main", "main"]
    cache, main_calls = list(backend._cache), len(backend.calls_of("main"))
    assert cache, "the chat context must have something cached for this test"
    assert chat.pager.page(1).evicted

    streamed = []
    result = chat.ask(DOG, on_text=streamed.append)
    t = result.trace
    assert t.trigger == "gate" and t.decision == "recall" and t.rounds == 1
    assert len(backend.calls_of("main")) == main_calls  # no decision on the chat's context...
    assert backend._cache == cache  # ...and its KV cache untouched
    (call,) = backend.calls[main_calls:]
    assert call.backend == "fork1" and call.grammar is None
    assert call.text == focused(f"user: {FACT}", DOG)
    assert t.answer == result.answer == "Biscuit." == "".join(streamed)
    assert t.injected_page_ids == [1] and t.injected_turns == [0] and t.model_page_ids == []
    (cite,) = t.citations
    assert (cite.page_id, cite.turn, cite.text, cite.speaker, cite.time, cite.label) == (1, 0, FACT, "user", None, "")
    assert cite.used  # the answer repeats "Biscuit"
    assert t.candidates and t.candidates[0].page_id == 1 and t.candidates[0].injected
    assert chat.traces()[-1]["trigger"] == "gate"  # stored with the answer
    assert chat.pager.page(1).access_count == 1  # the recall counts as a use of the page


# -- the model's decision on a message that is not a question ----------------------------------------------
def test_a_statement_gets_the_models_decision_and_its_answer_continues_after_the_decision_tokens(fake_pager):
    lp, chat = open_chat(fake_pager, ["Sunny days are lovely. The weather is fine."])
    result = chat.ask(STATEMENT)
    decision, answer = lp.backend.calls
    assert decision.backend == answer.backend == "main"
    assert decision.grammar is not None and answer.grammar is None
    assert allows(decision.grammar, "recall(page_ids=[1])") and allows(decision.grammar, "Sunny")
    assert not allows(decision.grammar, "recall(page_ids=[4])")  # page 4 is resident
    assert "[p1:" in system_of(decision) and "reply only with recall(page_ids=[N])" in system_of(decision)
    assert decision.output == "Sunny" and decision.generation.stopped == "caller"  # stopped once it can't be a recall
    assert answer.prompt == decision.prompt + decision.generation.tokens  # continues after the decision tokens
    assert result.answer == "Sunny" + answer.output == "Sunny days are lovely. The weather is fine."
    t = result.trace
    assert (t.decision, t.trigger, t.injected_page_ids) == ("answer", "none", [])
    assert len(t.bookmarks) == 3 and t.tokens["generated"] == len(decision.generation.tokens) + len(answer.generation.tokens)
    assert lp.backend.remaining == 0


def test_a_statement_the_model_recalls_for_injects_the_named_page_and_answers_on_the_fork(fake_pager):
    lp, chat = open_chat(fake_pager, ["recall(page_ids=[1])", "Biscuit is naughty."])
    assert type(lp.selector(chat.id)) is RerankSelector  # the product's: the model's pages and the ranking's best
    result = chat.ask(BISCUIT)
    decision, answer = lp.backend.calls
    assert decision.backend == "main" and decision.grammar is not None and decision.output == "recall(page_ids=[1])"
    assert answer.backend == "fork1" and answer.grammar is None
    assert answer.text == focused(f"user: {FACT}", BISCUIT)
    t = result.trace
    assert (t.trigger, t.decision, t.model_page_ids, t.injected_page_ids) == ("model", "recall", [1], [1])
    named = [c for c in t.candidates if c.named_by_model]
    assert [(c.page_id, c.injected) for c in named] == [(1, True)]
    assert [(c.page_id, c.turn) for c in t.citations] == [(1, 0)]
    assert t.answer == "Biscuit is naughty."


# -- recall modes --------------------------------------------------------------------------------------------
def test_mode_always_forces_a_recall_even_for_a_question(fake_pager):
    lp, chat = open_chat(fake_pager, ["recall(page_ids=[1])", "Biscuit."], recall=loop(mode="always"))
    result = chat.ask(DOG)
    decision, answer = lp.backend.calls
    assert decision.backend == "main" and (answer.backend, answer.grammar) == ("fork1", None)
    assert "answer" not in decision.grammar  # no answer alternative
    assert allows(decision.grammar, "recall(page_ids=[1])") and allows(decision.grammar, "recall(page_ids=[2,3])")
    assert not allows(decision.grammar, "Biscuit") and not allows(decision.grammar, "recall(page_ids=[1,2,3])")
    t = result.trace
    assert (t.trigger, t.decision, t.model_page_ids, t.injected_page_ids) == ("forced", "recall", [1], [1])
    assert answer.text == focused(f"user: {FACT}", DOG)


def test_mode_never_shows_no_bookmarks_and_asks_no_grammar(fake_pager):
    lp, chat = open_chat(fake_pager, ["I don't know."], recall=loop(mode="never"))
    result = chat.ask(DOG)
    (call,) = lp.backend.calls
    assert call.backend == "main" and call.grammar is None
    assert system_of(call) == "You are a helpful assistant. Answer briefly and only from what was said in this conversation."
    assert "[p1" not in call.text and "Biscuit" not in call.text
    t = result.trace
    assert (t.trigger, t.decision, t.bookmarks, t.candidates, t.answer) == ("none", "answer", [], [], "I don't know.")


def test_mode_selector_recalls_on_the_ranking_without_asking_the_model(fake_pager):
    lp, chat = open_chat(fake_pager, ["Biscuit.", "Lovely."], recall=loop(mode="selector"))
    t = chat.ask(DOG).trace
    (call,) = lp.backend.calls
    assert (call.backend, call.grammar) == ("fork1", None) and call.text == focused(f"user: {FACT}", DOG)
    assert (t.trigger, t.decision, t.injected_page_ids) == ("gate", "recall", [1])  # the trigger that fired
    # a statement: no trigger, and the model is not asked to decide either; the bookmarks stay in its prompt
    t = chat.ask(STATEMENT).trace
    call = lp.backend.calls[-1]
    assert (call.backend, call.grammar) == ("main", None)
    assert t.bookmarks and all(b in system_of(call) for b in t.bookmarks)
    assert (t.trigger, t.decision, t.answer) == ("none", "answer", "Lovely.")
    assert lp.backend.remaining == 0


# -- the inline layout ------------------------------------------------------------------------------------------
def test_inline_appends_the_recalled_turns_after_the_question_on_the_chat_context(fake_pager):
    lp, chat = open_chat(fake_pager, ["Biscuit."], recall=loop(layout="inline"))
    t = chat.ask(DOG).trace
    (call,) = lp.backend.calls
    assert (call.backend, call.grammar) == ("main", None)
    question_turn = f"<|im_start|>user\n{DOG}<|im_end|>\n"
    injected = (f"<|im_start|>user\nEarlier in this conversation:\nuser: {FACT}\n\n{DOG}<|im_end|>\n"
                "<|im_start|>assistant\n")
    assert call.text.endswith(question_turn + injected)  # after the question, at the very end
    assert "[p1:" in system_of(call)  # the chat's own prompt, bookmarks and all
    assert (t.trigger, t.decision, t.rounds, t.injected_page_ids, t.answer) == ("gate", "recall", 1, [1], "Biscuit.")
    assert [(c.page_id, c.turn, c.text) for c in t.citations] == [(1, 0, FACT)]


def _inline(max_rounds):
    return dict(recall=loop(layout="inline", max_rounds=max_rounds))


def _model_pages(lp, chat):
    """The lab's selector of exactly the pages the model named (``eval --page-choice model``)."""
    return lab_selector(lp.index, chat.id, lp.rerank, lp.lexical(chat.id), page_choice="model")


def test_inline_a_second_round_injects_a_page_not_injected_yet(fake_pager):
    lp, chat = open_chat(fake_pager, ["recall(page_ids=[1])", "recall(page_ids=[3])", "Biscuit, at seven."],
                         **_inline(2))
    t = chat.ask("Tell me about Biscuit and the Lisbon trip.", selector=_model_pages(lp, chat)).trace
    first, second, answer = lp.backend.calls
    assert {c.backend for c in (first, second, answer)} == {"main"}
    assert allows(first.grammar, "recall(page_ids=[1])")
    assert not allows(second.grammar, "recall(page_ids=[1])")  # round two offers only what is not injected yet
    assert allows(second.grammar, "recall(page_ids=[3])") and allows(second.grammar, "recall(page_ids=[2])")
    assert "Earlier in this conversation:\n" in second.text and "Lisbon flight" not in second.text
    assert answer.grammar is None and answer.text.count("Earlier in this conversation:\n") == 2
    assert answer.text.index("Biscuit") < answer.text.index("The Lisbon flight leaves at seven.")
    assert (t.trigger, t.rounds, t.model_page_ids, t.injected_page_ids) == ("model", 2, [1, 3], [1, 3])
    assert t.answer == "Biscuit, at seven." and {c.page_id for c in t.citations} == {1, 3}


def test_inline_stops_asking_when_no_evicted_page_remains(fake_pager):
    script = ["recall(page_ids=[1])", "recall(page_ids=[2])", "recall(page_ids=[3])", "All three."]
    lp, chat = open_chat(fake_pager, script, **_inline(5))
    t = chat.ask("Tell me everything.", selector=_model_pages(lp, chat)).trace
    assert [c.grammar is not None for c in lp.backend.calls] == [True, True, True, False]  # no fourth decision
    assert (t.rounds, t.injected_page_ids, t.answer) == (3, [1, 2, 3], "All three.")
    assert lp.backend.remaining == 0


def test_inline_a_second_round_may_answer_and_the_answer_continues_after_it(fake_pager):
    lp, chat = open_chat(fake_pager, ["recall(page_ids=[1])", "Biscuit is the dog."], **_inline(2))
    t = chat.ask("Tell me about Biscuit.", selector=_model_pages(lp, chat)).trace
    first, second, rest = lp.backend.calls
    assert second.grammar is not None and second.output == "Biscuit" and rest.grammar is None
    assert rest.prompt == second.prompt + second.generation.tokens
    assert (t.rounds, t.injected_page_ids, t.answer) == (1, [1], "Biscuit is the dog.")


def test_inline_a_second_round_with_the_default_selector_injects_the_named_page(fake_pager):
    lp, chat = open_chat(fake_pager, ["recall(page_ids=[1])", "recall(page_ids=[3])", "Biscuit, at seven."],
                         recall=loop(layout="inline", max_rounds=2))
    t = chat.ask(BISCUIT).trace
    assert t.model_page_ids == [1, 3]  # the model asked for page 3 in round two...
    assert t.injected_page_ids == [1, 3]  # ...and should get it


# -- the focused layouts -----------------------------------------------------------------------------------------
def test_focused_recent_puts_the_last_exchange_before_the_notes(fake_pager):
    lp, chat = open_chat(fake_pager, ["Biscuit."], recall=loop(layout="focused+recent"))
    chat.ask(DOG)
    (call,) = lp.backend.calls
    assert call.backend == "fork1"
    assert call.text == (
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
        "<|im_start|>user\nThe piano lessons start next week.<|im_end|>\n"
        "<|im_start|>assistant\nPractice a little every day.<|im_end|>\n"
        f"<|im_start|>user\nFrom earlier in this conversation:\nuser: {FACT}\n\nQuestion: {DOG}\n"
        "Answer in a few words.<|im_end|>\n<|im_start|>assistant\n")


def test_notes_system_puts_the_notes_in_the_system_message(fake_pager):
    lp, chat = open_chat(fake_pager, ["Biscuit."], recall=loop(layout="notes-system"))
    t = chat.ask(DOG).trace
    (call,) = lp.backend.calls
    assert call.backend == "fork1"
    assert call.text == ("<|im_start|>system\nYou are a helpful assistant.\nNotes from earlier in this conversation:\n"
                         f"user: {FACT}<|im_end|>\n<|im_start|>user\n{DOG}<|im_end|>\n<|im_start|>assistant\n")
    assert t.trigger == "gate" and t.answer == "Biscuit."


def test_a_layout_chosen_per_question_overrides_the_settings(fake_pager):
    lp, chat = open_chat(fake_pager, ["Biscuit."])
    chat.ask(DOG, layout="notes-system")
    assert "Notes from earlier in this conversation:" in system_of(lp.backend.calls[0])


# -- the repetition guard ----------------------------------------------------------------------------------------
LOOP = "Your dog is called Biscuit. He is a very good boy. He is a very good boy. He is a very good boy."
KEPT = "Your dog is called Biscuit. He is a very good boy."


@pytest.mark.parametrize("budget,evicted,context,message", [(160, (1, 2, 3), "fork1", DOG),
                                                            (1000, (), "main", STATEMENT)])
def test_a_repeated_sentence_is_cut_and_never_streamed(fake_pager, budget, evicted, context, message):
    lp, chat = open_chat(fake_pager, [LOOP], budget=budget, evicted=evicted)
    streamed = []
    result = chat.ask(message, on_text=streamed.append)
    (call,) = lp.backend.calls
    assert call.backend == context
    assert call.generation.stopped == "caller" and call.output != LOOP  # the guard stopped the generation
    assert result.answer == KEPT == "".join(streamed)
    assert chat.turns[-1].text == KEPT  # the stored answer is the kept one


def test_a_phrase_loop_after_the_decision_is_cut(fake_pager):
    lp, chat = open_chat(fake_pager, ["Sunny in Mali, Morocco, Morocco, Morocco, Morocco, Morocco"])
    streamed = []
    result = chat.ask(STATEMENT, on_text=streamed.append)
    decision, answer = lp.backend.calls
    assert decision.grammar is not None and answer.generation.stopped == "caller"
    assert result.answer == "Sunny in Mali, Morocco" == "".join(streamed)


# -- a selection of nothing ---------------------------------------------------------------------------------------
class SelectsNothing(PageSelector):
    """A PageSelector that always wants to recall and never finds anything."""

    def __init__(self):
        self.asked = []

    def should_recall(self, question, pager):
        return True

    def select(self, question, named, pager, room):
        self.asked.append(list(named))
        return [], [Candidate(page_id=1, score=0.0, reason="nothing fits")]


@pytest.mark.parametrize("layout", ["focused", "inline"])
def test_retrieval_that_selects_nothing_falls_back_to_a_direct_answer(fake_pager, layout):
    lp, chat = open_chat(fake_pager, ["I am not sure."])
    selector = SelectsNothing()
    t = chat.ask(DOG, selector=selector, layout=layout).trace
    (call,) = lp.backend.calls
    assert (call.backend, call.grammar) == ("main", None) and selector.asked == [[]]
    assert "Earlier in this conversation" not in call.text and t.rounds == 0
    assert (t.decision, t.answer, t.injected_page_ids, t.citations) == ("answer", "I am not sure.", [], [])
    assert [c.reason for c in t.candidates] == ["nothing fits"]
    assert t.trigger == "selector"  # its own rule fired (it names no trigger), though nothing was injected


def test_a_model_recall_that_selects_nothing_falls_back_to_a_direct_answer(fake_pager):
    lp, chat = open_chat(fake_pager, ["recall(page_ids=[2])", "I am not sure."])
    selector = SelectsNothing()
    selector.should_recall = lambda question, pager: False
    t = chat.ask(STATEMENT, selector=selector).trace
    decision, answer = lp.backend.calls
    assert decision.grammar is not None and selector.asked == [[2]]
    assert (answer.backend, answer.grammar) == ("main", None)
    assert answer.prompt == decision.prompt  # the recall call is not part of the answer's prompt
    assert (t.trigger, t.decision, t.model_page_ids, t.answer) == ("model", "answer", [2], "I am not sure.")


# -- prompts that do not fit -----------------------------------------------------------------------------------
def test_a_question_longer_than_the_context_is_refused_before_anything_is_stored(fake_pager):
    lp, chat = open_chat(fake_pager)
    turns = len(chat.turns)
    with pytest.raises(ContextOverflowError, match="leaves room for"):
        chat.ask("word " * 2000 + "?")
    assert lp.backend.calls == [] and len(chat.turns) == len(lp.store.turns("c")) == turns


def test_a_pending_question_that_cannot_fit_overflows_in_the_runtime(fake_pager):
    lp, chat = open_chat(fake_pager)
    with pytest.raises(ContextOverflowError, match="even with every older page evicted"):
        lp.runtime.answer(chat.pager, "word " * 2000 + "?", pending=True)
    assert lp.backend.calls == []


def test_a_long_pending_question_drops_the_oldest_resident_turns_first(fake_pager):
    lp, chat = open_chat(fake_pager, ["Fine."], recall=loop(mode="never"))
    runtime, backend = lp.runtime, lp.backend
    limit = backend.n_ctx - runtime.settings.max_answer_tokens - runtime.settings.decision_tokens
    question = "word " * 1850 + "?"
    full = runtime.messages(chat.pager, question, show_bookmarks=False)
    assert len(backend.render(full)) > limit >= len(backend.render([full[0], full[-1]]))  # the precondition
    t = runtime.answer(chat.pager, question, pending=True)
    (call,) = backend.calls
    assert len(call.prompt) <= limit and t.answer == "Fine."
    assert call.text.startswith("<|im_start|>system\nYou are a helpful assistant.")
    assert call.text.endswith(f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n")
    assert "My sister Hartley plays the cello." not in call.text  # the oldest resident turn went first


def test_a_budget_that_leaves_no_room_names_the_budget_option(fake_pager):
    lp, chat = open_chat(fake_pager, budget=1950, evicted=())
    with pytest.raises(ValueError, match="--budget"):
        chat.ask(DOG)
    assert lp.backend.calls == [] and len(chat.turns) == len(TALK)


# -- newest wins ----------------------------------------------------------------------------------------------
GYM_OLD = "My gym membership costs 30 dollars a month."
GYM_NEW = "Actually my gym membership costs 45 dollars a month now."
GYM = [("user", GYM_OLD), ("assistant", "That is a fair price."), *TALK[2:4],
       ("user", GYM_NEW), ("assistant", "Prices keep going up."), *TALK[6:]]


def test_newest_wins_only_the_latest_statement_is_injected_and_labelled(fake_pager):
    lp, chat = open_chat(fake_pager, ["45 dollars."], talk=GYM, budget=170)
    old, new = HashEmbedder().encode([GYM_OLD, GYM_NEW])
    assert float(old @ new) >= lp.rerank.same_slot_similarity  # the precondition: the same slot
    assert chat.pager.page_of_turn(0).page_id == 1 and chat.pager.page_of_turn(4).page_id == 3
    question = "How much does my gym membership cost?"
    t = chat.ask(question).trace
    (call,) = lp.backend.calls
    assert call.backend == "fork1"
    assert call.text == focused(f"user: {GYM_NEW} (latest)", question)
    assert GYM_OLD not in call.text
    assert [(c.page_id, c.turn, c.text, c.label) for c in t.citations] == [(3, 4, GYM_NEW, "latest")]
    assert t.injected_page_ids == [3] and t.injected_turns == [4]


def test_newest_wins_the_candidates_agree_with_what_was_injected(fake_pager):
    lp, chat = open_chat(fake_pager, ["45 dollars."], talk=GYM, budget=170)
    t = chat.ask("How much does my gym membership cost?").trace
    assert t.injected_page_ids == [3]
    assert sorted(c.page_id for c in t.candidates if c.injected) == t.injected_page_ids


def test_a_later_mention_that_changes_nothing_does_not_win(fake_pager):
    """The same topic later without a change cue (a new event, not a correction) leaves the best turn alone."""
    later = "My gym membership costs 45 dollars a month, the sauna is included."
    talk = [GYM[0], GYM[1], *TALK[2:4], ("user", later), GYM[5], *TALK[6:]]
    lp, chat = open_chat(fake_pager, ["30 dollars."], talk=talk, budget=170)
    old, new = HashEmbedder().encode([GYM_OLD, later])
    assert float(old @ new) >= lp.rerank.same_slot_similarity  # similar enough, but no "actually", "changed", ...
    t = chat.ask("How much does my gym membership cost per month, 30?").trace
    assert t.injected_turns == [0] and not any(c.label for c in t.citations)


# -- dated turns ----------------------------------------------------------------------------------------------
def test_a_dated_recalled_turn_shows_its_time_in_the_prompt_and_the_citation(fake_pager):
    talk = [(role, text, f"{i + 1} May 2023") for i, (role, text) in enumerate(TALK)]
    lp, chat = open_chat(fake_pager, ["Biscuit."], talk=talk)
    t = chat.ask(DOG).trace
    (call,) = lp.backend.calls
    assert call.text == focused(f"[1 May 2023] user: {FACT}", DOG)
    (cite,) = t.citations
    assert (cite.turn, cite.time, cite.text) == (0, "1 May 2023", FACT)
    assert chat.traces()[-1]["citations"][0]["time"] == "1 May 2023"


def test_message_roles_of_resident_turns_reach_the_chat_prompt(fake_pager):
    """The chat prompt holds the resident turns as their own messages, in order, after the bookmarks."""
    lp, chat = open_chat(fake_pager, ["Sunny."])
    chat.ask(STATEMENT)
    call = lp.backend.calls[0]
    expected = lp.backend.detokenize(lp.backend.render(
        [Message(role, text) for role, text in TALK[6:]] + [Message("user", STATEMENT)]))
    assert call.text.endswith(expected)
