"""A new process loads the chat model on a background thread while it reads its memory (``LocalPager.preload``):
the model and its side context are adopted when first used, and an unused preload is not saved on close."""

from __future__ import annotations

import pytest

from localpager import LocalPager
from localpager.runtime.settings import RecallSettings

pytestmark = [pytest.mark.model, pytest.mark.embedder]


# the recall path these tests measure, without the long-term layer (which would answer a planted fact first) or
# the relevance floor
RECALL_ONLY = RecallSettings(facts=False, abstain=False)


def test_a_preloaded_model_is_the_one_used(tmp_path):
    lp = LocalPager(tmp_path / "s.db")
    lp.preload()
    lp.preload()  # once is enough: a second call starts nothing
    backend = lp.backend
    assert not lp.models.preloading and backend is lp.backend
    assert lp.side_backend is not backend and lp.counter().count("hello there") > 0
    lp.close()


def test_an_unused_preload_leaves_no_saved_state(tmp_path):
    lp = LocalPager(tmp_path / "s.db")
    lp.preload()
    lp.close()
    assert lp.models.loaded is None and not list(tmp_path.glob("s.db.kv-*"))


def test_a_warmed_chat_reads_only_its_question(tmp_path):
    from localpager.lab.synthetic import generate_conversation

    lp = LocalPager(tmp_path / "s.db")
    chat = lp.conversation("c", create=True)
    for t in generate_conversation(2, n_turns=60).turns[:40]:
        chat.add_turn(t.role, t.text, stamp=False)
    chat.warm_up(models=True)
    assert chat.warmed(300)
    trace = chat.ask("Okay, let's move on.", mode="never").trace
    assert trace.tokens["reused"] > 0.8 * trace.tokens["prompt"]  # the memory was read while it waited
    lp.close()



def test_after_a_recall_a_warmed_chat_reads_the_recalled_exchange_while_it_waits(tmp_path):
    """A recall the gate decides is answered on the side context, so the chat's cache has not read that question
    and its answer; a warmed chat reads them after the answer, and the next plain turn reads its own line and
    the template around it, not the exchange before it."""
    from localpager.lab.synthetic import generate_conversation

    conv = generate_conversation(2, n_turns=200)
    lp = LocalPager(tmp_path / "s.db", recall=RECALL_ONLY)
    chat = lp.conversation("c", create=True)
    for t in conv.turns[:160]:
        chat.add_turn(t.role, t.text, stamp=False)
    chat.set_budget(1200)  # room for the exchanges below: no eviction (which would warm the chat up anyway)
    assert chat.pager.evicted
    chat.warm_up(models=True)
    assert chat.warmed(300)
    question = next(p.question for p in conv.probes if p.evidence and p.evidence[0] < 100)
    recall = chat.ask(question).trace
    assert recall.decision == "recall" and recall.tokens["decision"]["evaluated"] == 0  # nothing on the chat's cache
    assert chat.warmed(300)
    line = "Okay, thanks."
    trace = chat.ask(line, mode="never").trace
    counter = lp.counter()
    exchange = counter.count(question) + counter.count(recall.answer) + counter.count(line)
    assert trace.tokens["answer"]["evaluated"] < exchange
    lp.close()


def test_a_warmed_chat_first_recall_reads_only_its_notes_and_question(tmp_path):
    """The warm-up embeds the resident turns (a question ranks them too) and reads the answer prompt's fixed part
    into the side context: the first recall embeds no turn while the user waits and reuses that part, as later
    recalls do (before, it embedded about 30 turns, 250 ms, and read the whole answer prompt)."""
    from localpager.lab.synthetic import generate_conversation

    conv = generate_conversation(2, n_turns=200)
    lp = LocalPager(tmp_path / "s.db", recall=RECALL_ONLY)
    chat = lp.conversation("c", create=True)
    for t in conv.turns[:160]:
        chat.add_turn(t.role, t.text, stamp=False)
    assert chat.pager.evicted
    embedder = lp.index.embedder
    embedder._cache.clear()  # the process's embedder, shared with earlier tests: nothing of theirs counts
    chat.warm_up(models=True)
    assert chat.warmed(300)
    encoded: list[str] = []
    encode = embedder.encode
    embedder.encode = lambda texts, *a, **k: (encoded.extend(t for t in texts if t not in embedder._cache),
                                              encode(texts, *a, **k))[1]
    question = next(p.question for p in conv.probes if p.evidence and p.evidence[0] < 100)
    trace = chat.ask(question).trace
    lp.close()
    assert trace.decision == "recall"
    assert encoded[0] == question  # then its answer, embedded by the warm-up after it
    assert not set(encoded) & {t.text for t in conv.turns[:160]}  # every turn it was ranked against was embedded before
    assert trace.tokens["answer"]["reused"] > 0


def test_a_warmed_chat_reads_the_likeliest_recalls_ahead(tmp_path):
    """The warm-up reads the newest telling turns of evicted pages into the side context as a recall's first note
    (``Runtime.read_ahead``): a recall of one of them reuses its note too, and reads little more than its question.
    Counts of tokens only."""
    from localpager.lab.synthetic import generate_conversation
    from localpager.retrieval.ranking import tells
    from localpager.runtime.prefixes import kept_parts
    from localpager.runtime.prompts import answer_messages

    conv = generate_conversation(3, n_turns=120)
    lp = LocalPager(tmp_path / "s.db", recall=RECALL_ONLY)
    chat = lp.conversation("c", create=True)
    for t in conv.turns[:100]:
        chat.add_turn(t.role, t.text, stamp=False)
    chat.warm_up(models=True)
    assert chat.warmed(300)
    pager = chat.pager
    ahead = [i for p in reversed(pager.evicted) for i in reversed(p.turn_range) if tells(pager.turns[i])][:32]
    # a probe whose recall injects a turn read ahead (the ranking's quality is measured elsewhere)
    probe = next(p for p in conv.probes if p.evidence and p.evidence[0] in ahead
                 and chat.search(p.question, 1)[0].turn == p.evidence[0])
    side = lp.side_backend
    fixed = kept_parts(side, "focused", "x", [], side.render(answer_messages("focused", "x", "y")))[0]
    trace = chat.ask(probe.question, mode="always").trace
    lp.close()
    first = trace.injected_turns[0]
    assert trace.decision == "recall" and first in ahead
    note = side.count_tokens(pager.turns[first].text)
    assert trace.tokens["answer"]["reused"] > fixed + note - 4  # the fixed part and the note were read ahead
    assert trace.tokens["answer"]["evaluated"] < side.count_tokens(probe.question) + 20  # and the frame after it


def test_the_read_ahead_stops_where_the_kept_prefixes_are_full(tmp_path):
    """A bigger model's notes take more memory a token, and fewer fit in the kept prefixes' bytes: the read-ahead
    stops where the next note would push another prefix out, instead of reading 32 notes round after round into
    room for a few."""
    from localpager.lab.synthetic import generate_conversation

    lp = LocalPager(tmp_path / "s.db")
    chat = lp.conversation("c", create=True)
    for t in generate_conversation(3, n_turns=120).turns[:100]:
        chat.add_turn(t.role, t.text, stamp=False)
    side = lp.side_backend
    lp.runtime.prime_answer()
    one = side.kept.nbytes  # the fixed part alone
    side.kept.max_bytes = one * 5  # the fixed part and about three notes (each longer than the fixed part)
    read = chat.warmer.read_ahead()
    assert 1 <= read <= 4 and len(side.kept) == read + 1  # every note read is still kept, the fixed part too
    calls = []
    generate = side.generate
    side.generate = lambda *a, **k: (calls.append(1), generate(*a, **k))[1]
    assert chat.warmer.read_ahead() == read and not calls  # kept: nothing read again
    lp.close()
