"""Issue 39 (b): a chat app's request stores the standing facts its messages state exactly as the library does.
The server stores a request's new history turns with ``Conversation.add_turn`` and its question with
``Conversation.ask``, the library's own calls, and the store extracts each turn's facts as it stores it; these
tests hold the two paths to the same facts: a new chat's first message, a whole history sent in one request, and
a chat streamed turn by turn. (Which sentences state a fact is the extractor's: tests/fast/test_facts.py.) On the
fakes: seconds."""

from __future__ import annotations

import pytest
from fakes import ScriptedBackend, shortest_sentence

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from localpager.serving.app import create_app  # noqa: E402

ANSWER = "Noted."
FIRST = "I'm allergic to shellfish."
ISSUE = "Hi, I'm allergic to shellfish and I only drink mint tea."  # the issue's first message
TALK = [FIRST, "My gym locker is number 12.", "What should I cook tonight?",
        "I switched, my gym locker is now number 40.", "My sister lives in Porto.", "Where does my sister live?"]


def reply(prompt: str, grammar: str | None) -> str:
    return shortest_sentence(grammar) if grammar else ANSWER


def facts(conv) -> list[tuple]:
    return [(f.fact_id, f.turn, f.kind, f.text, f.superseded_by) for f in conv.facts(all=True)]


def post(client, messages, stream=False):
    r = client.post("/v1/chat/completions", headers={"X-Conversation-Id": "app"},
                    json={"model": "localpager", "stream": stream, "messages": messages})
    assert r.status_code == 200, r.text
    return r


@pytest.fixture
def pair(fake_pager):
    """(the server's LocalPager and its test client, a library conversation beside it)."""
    server_lp = fake_pager(backend=ScriptedBackend(fallback=reply))
    library = fake_pager(backend=ScriptedBackend(fallback=reply)).conversation("lib", create=True)
    with TestClient(create_app(server_lp, log=lambda line: None)) as client:
        yield server_lp, client, library


def test_a_new_chat_s_first_message_leaves_its_fact(pair):
    lp, client, _ = pair
    post(client, [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": FIRST}])
    assert [(f.turn, f.text) for f in lp.conversation("app").facts()] == [(0, FIRST)]


@pytest.mark.parametrize("first", [FIRST, ISSUE])
def test_the_first_message_s_facts_are_the_library_s(pair, first):
    lp, client, library = pair
    post(client, [{"role": "user", "content": [{"type": "text", "text": first}]}])  # content as parts, as apps send
    library.ask(first)
    assert facts(lp.conversation("app")) == facts(library)


def test_a_whole_history_in_one_request_leaves_the_library_s_facts(pair):
    lp, client, library = pair
    history = [{"role": role, "content": text} for said in TALK[:-1] for role, text in (("user", said),
                                                                                       ("assistant", ANSWER))]
    r = post(client, [*history, {"role": "user", "content": TALK[-1]}])
    assert r.headers["x-localpager-history"] == "appended"
    for said in TALK[:-1]:
        library.add_turn("user", said)
        library.add_turn("assistant", ANSWER)
    library.ask(TALK[-1])
    assert facts(lp.conversation("app")) == facts(library)
    assert [f[3] for f in facts(library) if f[4] is None] == [FIRST, TALK[3], TALK[4]]  # the newest locker stands


def test_a_chat_streamed_turn_by_turn_leaves_the_library_s_facts(pair):
    lp, client, library = pair
    messages = []
    for said in TALK:
        messages.append({"role": "user", "content": said})
        post(client, messages, stream=True)
        messages.append({"role": "assistant", "content": lp.store.turns("app")[-1].text})
        library.ask(said)
    assert [(t.role, t.text) for t in lp.store.turns("app")] == [(t.role, t.text) for t in library.turns]
    assert facts(lp.conversation("app")) == facts(library)
