"""A conversation warmed up when it opens (a chat waiting for its first line) builds what a first recall
would in the background, and keeps embedding the pages later turns evict."""

from __future__ import annotations

from localpager.lab.synthetic import generate_conversation


def test_warm_up_embeds_the_evicted_pages_and_keeps_up_with_evictions(fake_pager, fake_embedder):
    lp = fake_pager(embedder=fake_embedder)
    chat = lp.conversation("c", create=True)
    turns = generate_conversation(5, n_turns=400).turns
    for t in turns[:300]:
        chat.add_turn(t.role, t.text, stamp=False)
    chat.warm_up().join(30)
    pager = chat.pager
    assert lp.index.update("c", pager.evicted, pager.turns, pager.bookmark) == 0  # nothing left to embed
    assert lp.lexical("c")._grown.n == 300
    before = len(pager.evicted)
    for t in turns[300:]:
        chat.add_turn(t.role, t.text, stamp=False)
    assert chat.warmed(30)
    pager = chat.pager
    assert len(pager.evicted) > before
    assert lp.index.update("c", pager.evicted, pager.turns, pager.bookmark) == 0  # embedded as they were evicted


def test_a_question_asked_during_the_warm_up_waits_for_it_and_is_answered(fake_pager):
    lp = fake_pager(script=["fine"] * 4)
    chat = lp.conversation("c", create=True)
    for t in generate_conversation(6, n_turns=200).turns:
        chat.add_turn(t.role, t.text, stamp=False)
    thread = chat.warm_up(models=True)
    answer = chat.ask("What am I allergic to?")
    thread.join(30)
    assert answer.answer


def test_an_app_opens_a_conversation_warm(fake_pager):
    lp = fake_pager()
    chat = lp.conversation("c", create=True)
    for t in generate_conversation(7, n_turns=160).turns:
        chat.add_turn(t.role, t.text, stamp=False)
    warm = lp.conversation("c", warm=True)
    assert warm.warmed(30)
    assert warm.warmer.keep_warm and lp.lexical("c")._grown.n == 160


def test_close_waits_for_the_warm_up_and_lets_go_of_the_side_context(fake_pager):
    """A closed LocalPager stops its warm-ups and drops the context it forked with what that keeps (read-ahead
    notes, up to 64 MB each): a process that opens many in turn, on one chat model, does not pile them up."""
    lp = fake_pager(script=["fine"] * 8)
    chat = lp.conversation("c", create=True)
    for t in generate_conversation(8, n_turns=200).turns:
        chat.add_turn(t.role, t.text, stamp=False)
    side = lp.side_backend
    cleared = []
    side.clear_cache = lambda: cleared.append(True)
    thread = chat.warm_up(models=True)
    lp.close()
    assert not thread.is_alive() and lp.models._side is None and cleared == [True]
    assert lp.backend is not side  # the chat model passed in is the caller's, and stays


def test_the_warm_up_loads_the_parser_before_a_message_needs_it(fake_pager):
    from localpager.core import syntax

    syntax.pipeline.cache_clear()
    lp = fake_pager()
    chat = lp.conversation("c", create=True)
    chat.add_turn("user", "Hello there.", stamp=False)
    assert chat.warm_up().join(60) is None and syntax.pipeline.cache_info().currsize == 1


def test_a_missing_parser_leaves_the_rest_of_the_warm_up_done(fake_pager, fake_embedder, monkeypatch):
    from localpager.core import syntax

    syntax.pipeline.cache_clear()
    monkeypatch.setenv("LOCALPAGER_PARSER", "/nonexistent-parser")
    lp = fake_pager(embedder=fake_embedder)
    chat = lp.conversation("c", create=True)
    for i in range(120):  # small talk only: no sentence of it needs a parse
        chat.add_turn("user" if i % 2 == 0 else "assistant", f"The weather was fine on day {i}.", stamp=False)
    chat.warm_up().join(30)
    pager = chat.pager
    assert pager.evicted and lp.index.update("c", pager.evicted, pager.turns, pager.bookmark) == 0
    syntax.pipeline.cache_clear()  # the next test loads the real one
