"""The side context keeps the focused answer's fixed part (issue 26, item 4), on the real model: after other
prompts ran there (the model's side work), a recall reads only its notes and question, and the same notes
asked again read only the question. Counts of tokens, never one generated string."""

from __future__ import annotations

import pytest

from localpager.backends.base import Message
from localpager.core.pager import PagingConfig
from localpager.lab.synthetic import generate_conversation
from localpager.memory.api import LocalPager
from localpager.runtime.prefixes import kept_parts
from localpager.runtime.prompts import answer_messages
from localpager.runtime.settings import RecallSettings

pytestmark = pytest.mark.model

NOTES = ("[8 May 2023 10:00] user: My sister Anna moved to Lisbon last week and loves the tiles.",
         "[2 June 2023 18:30] user: The dentist appointment is on Thursday at 9, room 4.")
SIDE_WORK = [Message("system", "Answer yes or no."), Message("user", "Is this page worth keeping? We talked about "
                                                                     "the weather and a train that was late.")]


@pytest.fixture(scope="module", params=[True, False], ids=["two-sequences", "one-sequence"])
def side(backend, request):
    """A fork, as ``LocalPager.side_backend`` is: its own KV cache and kept prefixes. With two sequences a
    prefix is saved from what the answer read; with one (no KV shift) it is read first, then saved."""
    from localpager.backends.llama import LlamaCppBackend

    return LlamaCppBackend(backend.model_path, n_ctx=backend.n_ctx, n_threads=backend.n_threads,
                           kv_shift=request.param)


def answer(side, notes: str, question: str):
    prompt = side.render(answer_messages("focused", notes, question))
    keep = kept_parts(side, "focused", notes, [], prompt)
    return prompt, keep, side.generate(prompt, max_tokens=4, keep=keep)


def test_parts_are_prefixes_of_the_prompt(side):
    prompt = side.render(answer_messages("focused", NOTES[0], "Where did my sister move?"))
    fixed, with_notes = kept_parts(side, "focused", NOTES[0], [], prompt)
    header = side.render([Message("system", "You are a helpful assistant.")], add_generation_prompt=False)
    assert len(header) < fixed < with_notes < len(prompt)
    assert "From earlier" in side.detokenize(prompt[:fixed]) and "Lisbon" not in side.detokenize(prompt[:fixed])
    assert "Lisbon" in side.detokenize(prompt[:with_notes])
    assert "sister" not in side.detokenize(prompt[with_notes - 2:with_notes])  # the question is not kept


def test_side_work_in_between_costs_only_notes_and_question(side):
    side.clear_cache()
    _, (fixed, _), first = answer(side, NOTES[0], "Where did my sister move?")
    assert first.restored == 0 and len(side.kept) == 2
    side.generate(side.render(SIDE_WORK), max_tokens=2)  # replaces the live cache
    assert side.cached_prefix(side.render(answer_messages("focused", NOTES[1], "When?"))) < fixed
    prompt, _, second = answer(side, NOTES[1], "When is the dentist appointment?")
    assert second.restored == fixed and second.reused == fixed
    assert second.evaluated == len(prompt) - fixed


def test_same_notes_again_read_only_the_question(side):
    side.clear_cache()
    answer(side, NOTES[0], "Where did my sister move?")
    side.generate(side.render(SIDE_WORK), max_tokens=2)
    prompt, (_, with_notes), again = answer(side, NOTES[0], "What does my sister love?")
    assert again.restored == with_notes and again.evaluated == len(prompt) - with_notes


def test_a_restored_prefix_answers_as_a_full_read_does(backend, side):
    """The kept state is the prefix's own keys and values: the first answer tokens match a context that reads
    the prompt whole (greedy; the first few tokens, where float rounding has not yet diverged anywhere seen)."""
    side.clear_cache()
    answer(side, NOTES[0], "Where did my sister move?")
    side.generate(side.render(SIDE_WORK), max_tokens=2)
    prompt, _, restored = answer(side, NOTES[1], "When is the dentist appointment?")
    fresh = backend.fork()
    full = fresh.generate(prompt, max_tokens=4)
    assert restored.restored > 0 and full.reused == 0
    assert len(restored.tokens) == len(full.tokens) > 0


def test_clear_cache_forgets_kept_prefixes(side):
    answer(side, NOTES[0], "Where did my sister move?")
    assert len(side.kept) > 0
    side.clear_cache()
    assert len(side.kept) == 0 and side.cached_tokens() == []


@pytest.mark.embedder
def test_a_recall_after_side_work_keeps_the_fixed_part(tmp_path):
    """Through ``ask``: the model's side work runs on the side context between two recalls, and the second
    focused answer reuses at least the fixed part (before, it read the whole prompt again)."""
    lp = LocalPager(tmp_path / "s.db", recall=RecallSettings(facts=False, abstain=False))  # the recall path alone
    try:
        chat = lp.conversation("c", create=True, config=PagingConfig(budget=256))
        conv = generate_conversation(0, n_turns=60)
        for turn in conv.turns:
            chat.add_turn(turn.role, turn.text, stamp=False)
        questions = [p.question for p in conv.probes if p.evidence][:2]
        first = chat.ask(questions[0], mode="always", remember=False).trace
        lp.assistant.worth("We talked about the weather and a train that was late.")  # side work in between
        second = chat.ask(questions[1], mode="always", remember=False).trace
    finally:
        lp.close()
    assert first.decision == second.decision == "recall"
    prompt = lp.side_backend.render(answer_messages("focused", "", ""))
    header = lp.side_backend.render([Message("system", "You are a helpful assistant.")], add_generation_prompt=False)
    assert second.tokens["answer"]["reused"] > len(header)
    assert second.tokens["answer"]["evaluated"] < second.tokens["answer_prompt"] - len(header)
    assert len(prompt) > len(header)
