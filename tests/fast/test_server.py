"""The server's HTTP logic on the fakes (tests/fakes.py): conversation ids (any script, slashes), history
reconciliation and retries, auth, origins, errors, limits, ordering, a client leaving mid-stream, the
inspector's headers. No model file, no embedder: seconds in all."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from urllib.parse import quote

import httpx
import pytest
from click.testing import CliRunner
from fakes import ScriptedBackend, shortest_sentence
from helpers import free_port
from hypothesis import given, settings
from hypothesis import strategies as st

from localpager.cli import cli
from localpager.core.pager import PagingConfig
from localpager.serving.app import ServerOptions, create_app
from localpager.serving.protocol import (
    ApiError,
    Msg,
    check_bind,
    content_disposition,
    escape_controls,
    header_id,
    header_value,
    origin_allowed,
    reconcile,
    resolve_conversation_id,
    retried,
)

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

pytestmark = pytest.mark.both_stores  # the tests that take a store run on SQLite and on PostgreSQL
ANSWER = "Noted, thanks for telling me."


def reply(prompt: str, grammar: str | None) -> str:
    """The shortest reply a grammar allows (a decision step), else an answer."""
    return shortest_sentence(grammar) if grammar else ANSWER


@pytest.fixture
def lp(fake_pager):
    return fake_pager(backend=ScriptedBackend(fallback=reply))


@pytest.fixture
def logs():
    return []


@pytest.fixture
def client(lp, logs):
    with TestClient(create_app(lp, log=logs.append)) as c:
        yield c


def ask(client, messages, conv="c", **body):
    msgs = [{"role": r, "content": t} for r, t in messages]
    headers = {"X-Conversation-Id": conv} if conv else {}
    return client.post("/v1/chat/completions", json={"model": "localpager", "messages": msgs, **body}, headers=headers)


def stored(lp, conv="c") -> list[tuple[str, str]]:
    return [(t.role, t.text) for t in lp.store.turns(conv)]


# -- reconciliation (pure) ---------------------------------------------------------------------------
def m(*pairs) -> list[Msg]:
    return [Msg(r, t) for r, t in pairs]


S = m(("user", "a"), ("assistant", "b"), ("user", "c"), ("assistant", "d"))


@pytest.mark.parametrize("client_history,status,new", [
    ([], "in-sync", []),                                                        # only the new message
    (S, "in-sync", []),                                                         # the whole history, as stored
    (S[2:], "in-sync", []),                                                     # a trailing window
    (m(("user", "c"), ("assistant", "  d ")), "in-sync", []),                  # whitespace does not count
    (S + m(("user", "e"), ("assistant", "f")), "appended", m(("user", "e"), ("assistant", "f"))),
    (S[2:] + m(("user", "e")), "appended", m(("user", "e"))),
    (m(("user", "a"), ("assistant", "b"), ("user", "c"), ("assistant", "EDITED")), "diverged", []),
    (m(("user", "a"), ("assistant", "b")), "diverged", []),                     # behind the store
    (m(("user", "x"), ("assistant", "y")), "diverged", []),                     # another conversation
])
def test_reconcile_appends_only_what_the_store_lacks(client_history, status, new):
    result = reconcile(S, client_history)
    assert (result.status, result.new) == (status, new)


def test_reconcile_on_an_empty_store_takes_the_whole_history():
    assert reconcile([], S).new == S and reconcile([], S).status == "appended"


# -- conversation ids (pure) ---------------------------------------------------------------------------
def test_the_conversation_id_comes_from_the_header_then_the_body():
    body = {"user": "u1", "metadata": {"conversation_id": "m1"}}
    assert resolve_conversation_id({"x-conversation-id": "h1", "x-openwebui-chat-id": "w1"}, body) == "h1"
    assert resolve_conversation_id({"x-openwebui-chat-id": "w1"}, body) == "w1"
    assert resolve_conversation_id({}, body) == "m1"
    assert resolve_conversation_id({}, {"user": "u1"}) == "u1"
    assert resolve_conversation_id({}, {}, default="d") == "d"
    with pytest.raises(ApiError, match="X-Conversation-Id") as err:
        resolve_conversation_id({}, {})
    assert err.value.status == 400
    for bad, why in (("x" * 201, "at most 200"), ("tab\there", "control"), ("%E7%94", "not UTF-8")):
        with pytest.raises(ApiError, match=why) as err:
            resolve_conversation_id({"x-conversation-id": bad}, {})
        assert err.value.status == 400
    # any id the store takes: slashes and spaces inside, any script, percent-encoded or raw UTF-8 in a header
    assert resolve_conversation_id({"x-conversation-id": "notes/2024 q1"}, {}) == "notes/2024 q1"
    assert resolve_conversation_id({"x-conversation-id": "%C5%81ukasz"}, {}) == "Łukasz"
    assert resolve_conversation_id({"x-conversation-id": "田中".encode().decode("latin-1")}, {}) == "田中"
    assert resolve_conversation_id({}, {"user": "田中"}) == "田中"


def test_only_loopback_binds_without_the_flag():
    assert check_bind("127.0.0.1", False) is None and check_bind("localhost", False) is None
    assert check_bind("::1", False) is None
    for host in ("0.0.0.0", "192.168.1.5", "::", "example.org"):
        with pytest.raises(ValueError, match="--allow-remote"):
            check_bind(host, False)
        assert "warning" in check_bind(host, True)


# -- chat completions over HTTP ------------------------------------------------------------------------
def test_an_answer_is_stored_with_its_question_and_says_where_its_trace_is(client, lp, logs):
    r = ask(client, [("user", "Hello there, I like apricots.")])
    assert r.status_code == 200
    body = r.json()
    assert body["object"] == "chat.completion" and body["choices"][0]["message"]["content"] == ANSWER
    assert body["localpager"]["trace_id"] == "c:0" and r.headers["x-localpager-trace-id"] == "c:0"
    assert r.headers["x-localpager-history"] == "in-sync" and r.headers["x-conversation-id"] == "c"
    assert stored(lp) == [("user", "Hello there, I like apricots."), ("assistant", ANSWER)]
    trace = client.get("/v1/conversations/c/log", params={"turn": 0}).json()["data"]
    assert [t["trace_id"] for t in trace] == ["c:0"] and trace[0]["answer"] == ANSWER
    assert any(line.startswith("chat conv=c turn=0") and "no recall" in line for line in logs)


def test_a_resent_history_is_never_stored_twice(client, lp):
    ask(client, [("user", "first question")])
    r = ask(client, [("user", "first question"), ("assistant", ANSWER), ("user", "second question")])
    assert r.headers["x-localpager-history"] == "in-sync" and r.headers["x-localpager-appended"] == "0"
    assert stored(lp) == [("user", "first question"), ("assistant", ANSWER), ("user", "second question"),
                          ("assistant", ANSWER)]


def test_turns_the_store_lacks_are_appended_and_a_divergent_history_is_flagged(client, lp):
    r = ask(client, [("user", "from another app"), ("assistant", "an old reply"), ("user", "now this")], conv="n")
    assert r.headers["x-localpager-history"] == "appended" and r.headers["x-localpager-appended"] == "2"
    assert stored(lp, "n")[:3] == [("user", "from another app"), ("assistant", "an old reply"), ("user", "now this")]
    r = ask(client, [("user", "from another app"), ("assistant", "an EDITED reply"), ("user", "again")], conv="n")
    assert r.status_code == 200 and r.headers["x-localpager-history"] == "diverged"
    assert r.json()["localpager"]["history"] == "diverged"
    assert [t for t in stored(lp, "n") if "EDITED" in t[1]] == []  # the store is the truth
    assert len(stored(lp, "n")) == 6


def test_streaming_sends_chunks_then_the_memory_field_then_done(client, lp):
    r = ask(client, [("user", "Tell me something")], stream=True, stream_options={"include_usage": True})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    events = [line[6:] for line in r.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    pieces = [c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"]]
    assert "".join(pieces).strip() == ANSWER
    assert "." not in next(p for p in pieces if p)  # words reach the client before their sentence ends
    final = [c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"] == "stop"]
    assert final[0]["localpager"]["trace_id"] == "c:0"
    assert chunks[-1]["usage"]["completion_tokens"] > 0
    assert stored(lp) == [("user", "Tell me something"), ("assistant", ANSWER)]


def test_max_tokens_is_capped(lp, logs):
    with TestClient(create_app(lp, max_tokens_cap=5, log=logs.append)) as c:
        ask(c, [("user", "A long answer please")], max_tokens=1000)
    assert lp.backend.calls[-1].max_tokens == 5
    assert lp.runtime.settings.max_answer_tokens == 96  # the override was for that answer only


# -- errors, one line in OpenAI's shape ----------------------------------------------------------------
def error_of(r) -> dict:
    body = r.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    assert "\n" not in body["error"]["message"]
    return body["error"]


@pytest.mark.parametrize("payload,headers,code,match", [
    (b"{not json", {}, 400, "not valid JSON"),
    (b'{"messages": "hi"}', {}, 400, "messages"),
    (b'{"messages": []}', {}, 400, "messages"),
    (b'{"messages": [{"content": "no role"}]}', {}, 400, "role"),
    (b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 0}', {}, 400, "max_tokens"),
    (b'{"messages": [{"role": "user", "content": "hi"}]}', {"X-Conversation-Id": ""}, 400, "X-Conversation-Id"),
    (b'{"messages": [{"role": "assistant", "content": "hi"}]}', {}, 400, "last message"),
    (b'{"messages": [{"role": "user", "content": "hi"}], "n": 3}', {}, 400, "n must be 1"),
])
def test_a_malformed_request_is_a_one_line_4xx(client, lp, payload, headers, code, match):
    headers = {"X-Conversation-Id": "c", "Content-Type": "application/json", **headers}
    r = client.post("/v1/chat/completions", content=payload, headers=headers)
    assert r.status_code == code
    assert match in error_of(r)["message"]
    assert not lp.store.has_conversation("c")  # nothing stored, no conversation created


def test_a_text_part_that_is_no_string_is_a_400_and_stores_nothing(client, lp):
    r = ask(client, [("user", [{"type": "text", "text": 5}])])
    assert r.status_code == 400 and "string" in error_of(r)["message"]
    assert not lp.store.has_conversation("c") or stored(lp) == []


def test_a_body_over_the_limit_is_413(lp):
    with TestClient(create_app(lp, max_body_bytes=2000, log=lambda s: None)) as c:
        r = ask(c, [("user", "x" * 5000)])
    assert r.status_code == 413 and error_of(r)["code"] == "request_too_large"


def test_a_question_too_long_for_the_context_is_a_400(fake_pager):
    lp = fake_pager(backend=ScriptedBackend(fallback=reply, n_ctx=700))
    with TestClient(create_app(lp, log=lambda s: None)) as c:
        r = ask(c, [("user", "word " * 300)])
    assert r.status_code == 400 and error_of(r)["code"] == "context_length_exceeded"


def test_unknown_things_are_404s(client):
    assert error_of(client.get("/v1/conversations/nope/pages"))["code"] == "conversation_not_found"
    assert client.get("/v1/nothing").status_code == 404
    assert client.get("/static/secrets.txt").status_code == 404


# -- auth, hosts, CORS ---------------------------------------------------------------------------------
def test_the_api_key_is_required_on_v1_only(lp):
    with TestClient(create_app(lp, api_key="s3cret", log=lambda s: None)) as c:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}):
            r = c.get("/v1/models", headers=headers)
            assert r.status_code == 401 and error_of(r)["code"] == "invalid_api_key"
        r = c.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]},
                   headers={"X-Conversation-Id": "c", "Authorization": "Bearer nope"})
        assert r.status_code == 401 and not lp.store.has_conversation("c")
        assert c.get("/v1/models", headers={"Authorization": "Bearer s3cret"}).json()["data"][0]["id"] == "localpager"
        assert c.get("/").status_code == 200  # the inspector page holds no data; its requests carry the key


def test_a_foreign_host_header_is_refused_when_serving_loopback(lp):
    with TestClient(create_app(lp, allowed_hosts=("127.0.0.1", "localhost"), log=lambda s: None),
                    base_url="http://127.0.0.1:8765") as c:
        assert c.get("/v1/models").status_code == 200
        assert c.get("/v1/models", headers={"Host": "evil.example:8765"}).status_code == 400


def test_cors_is_off_unless_an_origin_is_given(lp, client):
    origin = {"Origin": "http://localhost:3000"}
    assert "access-control-allow-origin" not in client.get("/v1/models", headers=origin).headers
    with TestClient(create_app(lp, cors_origins=["http://localhost:3000"], api_key="k", log=lambda s: None)) as c:
        r = c.get("/v1/models", headers=origin)
        assert r.status_code == 401 and r.headers["access-control-allow-origin"] == "http://localhost:3000"
        pre = c.options("/v1/chat/completions", headers={**origin, "Access-Control-Request-Method": "POST",
                                                          "Access-Control-Request-Headers": "x-conversation-id"})
        assert pre.status_code == 200
        assert "access-control-allow-origin" not in c.get("/v1/models", headers={"Origin": "http://evil.example"}).headers


# -- memory endpoints ----------------------------------------------------------------------------------
def test_memory_endpoints_list_pages_bookmarks_and_pin(lp, client):
    chat = lp.conversation("m", create=True, config=PagingConfig(boundary="fixed_5", budget=60))
    for i in range(14):
        chat.add_turn("user" if i % 2 == 0 else "assistant", f"Turn {i} is about the Lisbon flight number {i}.")
    convs = client.get("/v1/conversations").json()["data"]
    assert [c["id"] for c in convs] == ["m"] and convs[0]["turns"] == 14
    pages = client.get("/v1/conversations/m/pages").json()["data"]
    assert any(p["evicted"] for p in pages) and any(p["in_prompt"] for p in pages)
    marks = client.get("/v1/conversations/m/bookmarks").json()["data"]
    assert [b["page_id"] for b in marks] == [p["page_id"] for p in pages] and marks[0]["bookmark"].startswith("[p1")
    resident = next(p for p in pages if not p["evicted"])
    r = client.post(f"/v1/conversations/m/pages/{resident['page_id']}/pin", json={"pinned": True})
    assert r.json() == {"page_id": resident["page_id"], "pinned": True, "evicted": False}
    assert next(p for p in lp.store.pages("m") if p.page_id == resident["page_id"]).pinned
    assert client.post("/v1/conversations/m/pages/99/pin", json={"pinned": True}).status_code == 404
    assert client.post("/v1/conversations/m/pages/1/pin", content=b"pinned", headers={"Content-Type": "text/plain"}
                       ).status_code == 400  # a cross-site form post cannot pin
    turns = client.get("/v1/conversations/m/turns", params={"offset": -2}).json()
    assert turns["total"] == 14 and [t["index"] for t in turns["data"]] == [12, 13]


def test_the_inspector_is_served_from_the_package(client):
    page = client.get("/")
    assert page.status_code == 200 and "memory inspector" in page.text and "https://" not in page.text
    js = client.get("/static/inspector.js")
    assert js.headers["content-type"].startswith("text/javascript") and "innerHTML" not in js.text


# -- concurrency ---------------------------------------------------------------------------------------
def test_requests_on_one_conversation_run_in_arrival_order_and_others_do_not_mix(lp):
    app = create_app(lp, log=lambda s: None)

    async def run():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
            async def one(conv, i):
                return await c.post("/v1/chat/completions", headers={"X-Conversation-Id": conv},
                                    json={"messages": [{"role": "user", "content": f"question {i} in {conv}"}]})
            return await asyncio.gather(*(one(conv, i) for i in range(4) for conv in ("a", "b")))

    responses = asyncio.run(run())
    assert all(r.status_code == 200 for r in responses)
    for conv in ("a", "b"):
        assert stored(lp, conv) == [t for i in range(4) for t in (("user", f"question {i} in {conv}"),
                                                                   ("assistant", ANSWER))]
        traces = lp.store.traces(conv)
        assert [t["turn"] for t in traces] == [0, 2, 4, 6]


@pytest.fixture
def live():
    """A real uvicorn server in a thread on a free loopback port; stopped at teardown."""
    import uvicorn

    servers = []

    def start(app) -> str:
        port = free_port()
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        servers.append((server, thread))
        deadline = time.monotonic() + 10
        while not server.started:
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.02)
        return f"http://127.0.0.1:{port}"

    yield start
    for server, thread in servers:
        server.should_exit = True
        thread.join(10)


class Gated(ScriptedBackend):
    """Streams its first sentence, then waits for ``gate`` before the rest (a client can leave meanwhile)."""

    gate = threading.Event()

    def generate(self, prompt, *, on_text=None, **options):
        def slowed(piece):
            stop = on_text(piece)
            if piece == " Second":  # the first sentence has gone out by now
                self.gate.wait(10)
            return stop

        return super().generate(prompt, on_text=slowed if on_text else None, **options)


def test_a_client_that_leaves_mid_stream_loses_no_turn(fake_pager, live, logs):
    full = "First sentence here. Second sentence follows it."
    backend = Gated(fallback=full)
    backend.gate.clear()
    lp = fake_pager(backend=backend)
    url = live(create_app(lp, log=logs.append))
    body = {"messages": [{"role": "user", "content": "Tell me two things"}], "stream": True}
    with httpx.Client(base_url=url, headers={"X-Conversation-Id": "d"}, timeout=10) as c:
        with c.stream("POST", "/v1/chat/completions", json=body) as r:
            seen = ""
            for line in r.iter_lines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    seen += json.loads(line[6:])["choices"][0]["delta"].get("content", "")
                if "First sentence" in seen:
                    break  # leave: the connection closes here
        assert stored(lp, "d") == [("user", "Tell me two things")]  # the question was stored before generation
        backend.gate.set()
        deadline = time.monotonic() + 10
        while len(lp.store.turns("d")) < 2:
            assert time.monotonic() < deadline, "the answer was not stored"
            time.sleep(0.02)
        assert stored(lp, "d") == [("user", "Tell me two things"), ("assistant", full)]
        # the client comes back with what it saw: its copy disagrees, the store keeps its own, nothing doubles
        r = c.post("/v1/chat/completions", json={"messages": [
            {"role": "user", "content": "Tell me two things"}, {"role": "assistant", "content": seen},
            {"role": "user", "content": "And a third?"}]})
        assert r.headers["x-localpager-history"] == "diverged"
    assert [t[0] for t in stored(lp, "d")] == ["user", "assistant", "user", "assistant"]


# -- the command ---------------------------------------------------------------------------------------
def test_serve_refuses_a_remote_bind_without_the_flag(tmp_path):
    result = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "serve", "--host", "0.0.0.0"])
    assert result.exit_code == 1 and "--allow-remote" in result.output
    assert not (tmp_path / "s.db").exists()


def test_serve_without_the_server_extra_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "fastapi", None)
    monkeypatch.delitem(sys.modules, "localpager.serving.app", raising=False)
    result = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "serve"])
    assert result.exit_code == 1
    assert result.output.strip() == "localpager serve needs the server extra: pip install 'localpager[server]'"


def test_server_options_are_plain_data():
    assert ServerOptions().max_tokens_cap == 512 and ServerOptions().api_key is None


# -- memory the user controls (issue 14's API) -----------------------------------------------------------
def test_search_forget_correct_and_export_go_through_the_open_conversation(client, lp):
    ask(client, [("user", "My locker code is 4417, remember it.")], conv="u")
    ask(client, [("user", "My locker code is 4417, remember it."), ("assistant", ANSWER),
                 ("user", "I also like the Lisbon flight.")], conv="u")
    hits = client.get("/v1/conversations/u/search", params={"q": "locker code"}).json()["data"]
    assert hits and hits[0]["turn"] == 0 and "4417" in hits[0]["text"]
    fixed = client.post("/v1/conversations/u/correct", json={"turn": 0, "text": "My locker code is now 5521."})
    assert fixed.status_code == 200 and fixed.json()["index"] == 4
    preview = client.post("/v1/conversations/u/forget", json={"match": "4417", "dry_run": True}).json()
    assert preview["turns"] == [0] and preview["dry_run"] and "4417" in stored(lp, "u")[0][1]
    assert client.post("/v1/conversations/u/forget", json={"match": "4417"}).json()["turns"] == [0]
    assert stored(lp, "u")[0] == ("user", "")
    line = client.get("/v1/conversations/u/export")
    assert line.headers["content-type"].startswith("application/x-ndjson")
    assert json.loads(line.text)["localpager"]["forgotten"] == [0] and "4417" not in line.text
    # the client still shows the forgotten turn: it is not stored again, and the history is in sync
    r = ask(client, [("user", "My locker code is 4417, remember it."), ("assistant", ANSWER),
                     ("user", "I also like the Lisbon flight."), ("assistant", ANSWER),
                     ("user", "My locker code is now 5521."), ("user", "What else?")], conv="u")
    assert r.headers["x-localpager-history"] == "in-sync"
    assert "4417" not in json.dumps(stored(lp, "u"))
    assert client.post("/v1/conversations/u/forget", json={"turn": 1, "page": 1}).status_code == 400
    assert client.post("/v1/conversations/u/correct", json={"turn": 99, "text": "x"}).status_code == 400


def test_a_conversation_can_be_deleted_and_starts_afresh(client, lp):
    ask(client, [("user", "Something private.")], conv="gone")
    assert client.delete("/v1/conversations/gone", params={"dry_run": True}).json()["dry_run"]
    assert lp.store.has_conversation("gone")
    assert client.delete("/v1/conversations/gone").json()["whole"]
    assert not lp.store.has_conversation("gone")
    assert client.get("/v1/conversations/gone/pages").status_code == 404
    ask(client, [("user", "Hello again.")], conv="gone")
    assert stored(lp, "gone") == [("user", "Hello again."), ("assistant", ANSWER)]


def test_the_health_check_lists_what_the_inspector_may_offer(client):
    assert set(client.get("/health").json()["features"]) == {"pin", "search", "forget", "correct", "export", "facts",
                                                           "users", "fact_edits"}


def test_the_standing_facts_are_listed_pinned_and_gone_with_their_turn(client, lp):
    ask(client, [("user", "I'm allergic to sesame."), ("assistant", ANSWER),
                 ("user", "My gym locker is number 12."), ("assistant", ANSWER),
                 ("user", "I switched, my gym locker is now number 40.")], conv="f")
    listed = client.get("/v1/conversations/f/facts").json()["data"]
    assert [(f["fact_id"], f["turn"], f["text"]) for f in listed] == [
        (1, 0, "I'm allergic to sesame."), (3, 4, "I switched, my gym locker is now number 40.")]
    every = client.get("/v1/conversations/f/facts", params={"all": True}).json()["data"]
    assert [(f["fact_id"], f["current"], f["superseded_by"]) for f in every] == [(1, True, None), (2, False, 3),
                                                                                (3, True, None)]
    pinned = client.post("/v1/conversations/f/facts/1/pin", json={"pinned": True})
    assert pinned.status_code == 200 and pinned.json()["pinned"] is True
    missing = client.post("/v1/conversations/f/facts/99/pin", json={"pinned": True})
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "fact_not_found"
    assert client.get("/v1/conversations/nope/facts").status_code == 404
    assert client.post("/v1/conversations/f/forget", json={"match": "sesame"}).status_code == 200
    assert [f["fact_id"] for f in client.get("/v1/conversations/f/facts").json()["data"]] == [3]


def test_a_model_that_fails_to_preload_is_reported_not_fatal(fake_pager, logs):
    from localpager.backends.base import BackendError

    class Broken(ScriptedBackend):
        def fork(self):
            raise BackendError("no model here")

    lp = fake_pager(backend=Broken(fallback=reply))
    with TestClient(create_app(lp, preload=True, log=logs.append)) as c:
        deadline = time.monotonic() + 5
        while not (health := c.get("/health").json())["preload_error"]:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert not health["preloaded"] and "no model here" in health["preload_error"]
    assert any("models failed to load" in line for line in logs)


# -- issue 22: state changes only from where they should come --------------------------------------------
FOREIGN = "http://evil.example"


def state_changes(client):
    """Every kind of request that changes memory, each with a body in a different content type."""
    return [
        ("POST", "/v1/conversations/c/forget", {"content": b'{"turn": 0}'}),  # no content type: no preflight
        ("POST", "/v1/conversations/c/forget", {"content": b'{"turn": 0}', "headers": {"Content-Type": "text/plain"}}),
        ("POST", "/v1/conversations/c/forget", {"json": {"turn": 0}}),
        ("POST", "/v1/conversations/c/correct", {"json": {"turn": 0, "text": "changed"}}),
        ("POST", "/v1/conversations/c/pages/1/pin", {"json": {"pinned": True}}),
        ("POST", "/v1/chat/completions", {"json": {"messages": [{"role": "user", "content": "store me"}]},
                                          "headers": {"X-Conversation-Id": "c"}}),
        ("DELETE", "/v1/conversations/c", {}),
    ]


def send(client, method, path, kwargs, origin):
    headers = {**kwargs.get("headers", {}), **({"Origin": origin} if origin else {})}
    return client.request(method, path, **{k: v for k, v in kwargs.items() if k != "headers"}, headers=headers)


@pytest.mark.parametrize("origin", [FOREIGN, "null", "http://localhost.evil.example", "file://"])
def test_a_foreign_web_page_changes_nothing_whatever_the_content_type(client, lp, origin):
    ask(client, [("user", "My locker code is 4417.")])
    before = stored(lp)
    for method, path, kwargs in state_changes(client):
        r = send(client, method, path, kwargs, origin)
        assert r.status_code == 403, (method, path, r.text)
        assert error_of(r)["code"] == "forbidden_origin"
        # a site is told how to allow it; a page with no site of its own (any page can be one) is not
        assert ("--cors-origin" in error_of(r)["message"]) == (origin in (FOREIGN, "http://localhost.evil.example"))
    assert stored(lp) == before and not any(p.pinned for p in lp.store.pages("c"))
    assert client.get("/v1/conversations/c/turns", headers={"Origin": origin}).status_code == 200  # reads: CORS


@pytest.mark.parametrize("origin", [None, "http://localhost:3000", "http://127.0.0.1:8765", "http://[::1]:5173",
                                    "http://testserver", "http://app.example"])
def test_loopback_the_server_itself_and_a_cors_origin_may_change_state(lp, origin):
    with TestClient(create_app(lp, cors_origins=["http://app.example"], log=lambda s: None)) as c:
        assert ask(c, [("user", "My locker code is 4417.")]).status_code == 200
        for method, path, kwargs in state_changes(c):
            r = send(c, method, path, kwargs, origin)
            assert r.status_code != 403, (method, path, r.text)


def test_fastapi_reads_a_body_as_json_only_when_it_says_json(client, lp):
    """pyproject pins fastapi>=0.132 for this: before it, a no-content-type POST erased a turn."""
    ask(client, [("user", "My locker code is 4417.")])
    r = client.post("/v1/conversations/c/forget", content=b'{"turn": 0}')
    assert r.status_code == 400 and "4417" in stored(lp)[0][1]


def test_cors_star_needs_an_api_key(lp, tmp_path):
    with pytest.raises(ValueError, match="needs --api-key"):
        create_app(lp, cors_origins=["*"])
    with TestClient(create_app(lp, cors_origins=["*"], api_key="k", log=lambda s: None)) as c:
        r = c.post("/v1/conversations/c/forget", json={"turn": 0}, headers={"Origin": FOREIGN})
        assert r.status_code == 401  # any page may call it, but only with the key
    result = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "serve", "--cors-origin", "*"],
                                env={"LOCALPAGER_API_KEY": ""})
    assert result.exit_code == 2 and "needs --api-key" in result.output
    assert not (tmp_path / "s.db").exists()


@pytest.fixture
def served(monkeypatch):
    """`localpager serve` up to the point where it would listen: the options it would serve with."""
    import localpager.serving.app as server

    seen = {}
    monkeypatch.setattr(server, "serve", lambda lp, host, port, options: seen.update(options=options))
    monkeypatch.delenv("LOCALPAGER_API_KEY", raising=False)
    return seen


def test_the_api_key_comes_from_a_file_or_the_environment(tmp_path, served):
    store = ["--store", str(tmp_path / "s.db"), "serve"]
    key_file = tmp_path / "key"
    key_file.write_text("s3cret-from-file\n")
    result = CliRunner().invoke(cli, [*store, "--api-key-file", str(key_file)])
    assert result.exit_code == 0 and served["options"].api_key == "s3cret-from-file" and "ps" not in result.stderr
    result = CliRunner().invoke(cli, store, env={"LOCALPAGER_API_KEY": "s3cret-env"})
    assert result.exit_code == 0 and served["options"].api_key == "s3cret-env" and "ps" not in result.stderr
    result = CliRunner().invoke(cli, [*store, "--api-key", "s3cret-argv"])
    assert served["options"].api_key == "s3cret-argv" and "visible to other users" in result.stderr
    assert CliRunner().invoke(cli, [*store, "--api-key", "a", "--api-key-file", str(key_file)]).exit_code == 2
    key_file.write_text("\n")
    assert "visible ASCII" in CliRunner().invoke(cli, [*store, "--api-key-file", str(key_file)]).output
    assert CliRunner().invoke(cli, [*store, "--api-key-file", str(tmp_path / "none")]).exit_code == 2
    text = " ".join(CliRunner().invoke(cli, ["serve", "--help"]).output.split())
    assert "LOCALPAGER_API_KEY" in text and "--api-key-file" in text and "(ps)" in text


def test_log_lines_cannot_be_forged(client, logs):
    client.get("/v1/conversations/x%0aPOST%20/v1/chat/completions%20200%201%20ms/pages")
    client.get("/v1/conversations/%1B[2J%E2%80%AEevil/pages")
    ask(client, [("user", "hi")], conv="tab%09id")  # refused: the error is logged too
    assert logs and all(line.isprintable() for line in logs)
    assert any("x\\nPOST /v1/chat/completions 200 1 ms/pages 404" in line for line in logs)
    assert any("\\x1b[2J\\u202eevil" in line for line in logs)


def test_the_inspector_cannot_be_framed_and_loads_only_its_own_files(client):
    import re

    page = client.get("/")
    csp = page.headers["content-security-policy"]
    assert page.headers["x-frame-options"] == "DENY" and "frame-ancestors 'none'" in csp
    for name in ("inspector.js", "inspector.css"):
        assert client.get(f"/static/{name}").headers["x-frame-options"] == "DENY"
    # what the page loads fits the policy: its own files and a data: icon, no inline script or style
    assert set(re.findall(r'(?:src|href)="([^"]+)"', page.text)) == {"/static/inspector.js", "/static/inspector.css",
                                                                     "data:,"}
    assert "script-src 'self'" in csp and "style-src 'self'" in csp and "img-src 'self' data:" in csp
    assert not re.search(r"<script>|<style|\sstyle=|\son[a-z]+=", page.text)
    js = client.get("/static/inspector.js").text
    assert "setAttribute(\"style\"" not in js and ".style." not in js and "eval(" not in js


# -- issue 22: any id, any text ----------------------------------------------------------------------------
def openai_client(http_client, conv: str | None = None):
    openai = pytest.importorskip("openai")
    headers = {"X-Conversation-Id": quote(conv, safe="")} if conv else {}
    return openai.OpenAI(base_url="http://testserver/v1", api_key="none", http_client=http_client,
                         default_headers=headers, max_retries=0)


@pytest.mark.parametrize("user", ["Łukasz", "田中", "José", "notes/2024 q1"])
def test_ids_in_any_script_work_end_to_end(client, lp, user):
    oa = openai_client(client)
    raw = oa.chat.completions.with_raw_response.create(model="localpager", user=user,
                                                       messages=[{"role": "user", "content": "Hello there."}])
    assert raw.http_response.status_code == 200 and raw.parse().choices[0].message.content == ANSWER
    assert header_id(raw.headers["x-conversation-id"]) == user and raw.headers["x-conversation-id"].isascii()
    assert header_id(raw.headers["x-localpager-trace-id"]) == f"{user}:0"
    stream = oa.chat.completions.create(model="localpager", user=user, stream=True, messages=[
        {"role": "user", "content": "Hello there."}, {"role": "assistant", "content": ANSWER},
        {"role": "user", "content": "Again."}])
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices).strip() == ANSWER
    # the same conversation by header (percent-encoded), and every memory endpoint by path
    again = openai_client(client, user).chat.completions.with_raw_response.create(
        model="localpager", messages=[{"role": "user", "content": "Third."}])
    assert again.parse().model_extra["localpager"]["turn"] == 4
    assert stored(lp, user)[-2:] == [("user", "Third."), ("assistant", ANSWER)]
    path = f"/v1/conversations/{quote(user, safe='')}"
    log = client.get(again.parse().model_extra["localpager"]["log"]).json()["data"]
    assert [t["turn"] for t in log] == [4]
    for what in ("pages", "bookmarks", "turns", "log", "search?q=hello"):
        assert client.get(f"{path}/{what}").status_code == 200, what
    export = client.get(f"{path}/export")
    assert export.status_code == 200 and json.loads(export.text)["id"] == user
    disposition = export.headers["content-disposition"]
    assert disposition.isascii() and f"filename*=UTF-8''{quote(user.replace('/', '_'), safe='')}.jsonl" in disposition
    assert client.post(f"{path}/pages/1/pin", json={"pinned": True}).status_code == 200
    assert client.delete(path).status_code == 200 and not lp.store.has_conversation(user)


def test_a_conversation_imported_with_a_slash_in_its_id_is_reachable(client, lp):
    for conv in ("notes/2024", "a/pages", "x/log"):
        lp.conversation(conv, create=True).add_turn("user", f"Stored by an import as {conv}.")
    assert {c["id"] for c in client.get("/v1/conversations").json()["data"]} == {"notes/2024", "a/pages", "x/log"}
    for conv in ("notes/2024", "a/pages", "x/log"):
        for path in (quote(conv, safe=""), conv):  # escaped as encodeURIComponent does, or not
            turns = client.get(f"/v1/conversations/{path}/turns").json()["data"]
            assert [t["text"] for t in turns] == [f"Stored by an import as {conv}."]
        r = ask(client, [("user", f"Stored by an import as {conv}."), ("user", "Go on.")], conv=quote(conv, safe=""))
        assert r.status_code == 200 and r.headers["x-localpager-history"] == "in-sync"
    assert client.get("/v1/conversations/a/pages").status_code == 404  # "a" is not "a/pages"


def test_a_retried_request_gets_the_stored_answer_and_stores_nothing(client, lp, logs):
    first = ask(client, [("user", "What makes a good locker code?")])
    calls = len(lp.backend.calls)
    for stream in (False, True):  # the client saw a 500 or timed out, and sends the same request again
        r = ask(client, [("user", "What makes a good locker code?")], stream=stream)
        assert r.status_code == 200 and r.headers["x-localpager-history"] == "retry"
        assert r.headers["x-localpager-trace-id"] == first.headers["x-localpager-trace-id"] == "c:0"
        if not stream:
            assert r.json()["choices"][0]["message"]["content"] == ANSWER and r.json()["localpager"]["replayed"]
        else:
            assert ANSWER.split()[0] in r.text and "[DONE]" in r.text
    assert stored(lp) == [("user", "What makes a good locker code?"), ("assistant", ANSWER)]
    assert len(lp.backend.calls) == calls  # the model did not run again
    assert any("retry: the stored answer" in line for line in logs)
    # with a history: sent twice, stored once
    follow = [("user", "What makes a good locker code?"), ("assistant", ANSWER), ("user", "And for a bike lock?")]
    for _ in range(2):
        assert ask(client, follow).status_code == 200
    assert len(stored(lp)) == 4
    # the client shows the answer and asks the same question again: that is a new question
    r = ask(client, [*follow, ("assistant", ANSWER), ("user", "And for a bike lock?")])
    assert r.headers["x-localpager-history"] == "in-sync" and len(stored(lp)) == 6


@pytest.mark.parametrize("history,question,expected", [
    ([], "q", 2),                                              # the first question, resent
    (m(("user", "a"), ("assistant", "b")), "q", 2),            # the whole history and the question
    (m(("assistant", "b")), "q", 2),                           # a trailing window of it
    (m(("user", "a"), ("assistant", "b")), "other", None),     # another question
    (m(("user", "a"), ("assistant", "b"), ("user", "q"), ("assistant", "A")), "q", None),  # asked once more
    (m(("user", "x"), ("assistant", "y")), "q", None),         # another history
])
def test_the_idempotency_rule(history, question, expected):
    assert retried(m(("user", "a"), ("assistant", "b"), ("user", "q"), ("assistant", "A")), history, question) == expected


def test_a_timed_out_client_that_retries_gets_the_answer_once(fake_pager, live):
    backend = Gated(fallback="First sentence here. Second sentence follows it.")
    backend.gate.clear()
    lp = fake_pager(backend=backend)
    url = live(create_app(lp, log=lambda s: None))
    body = {"messages": [{"role": "user", "content": "Tell me two things"}]}
    with httpx.Client(base_url=url, headers={"X-Conversation-Id": "t"}) as c:
        with pytest.raises(httpx.ReadTimeout):
            c.post("/v1/chat/completions", json={**body, "stream": True}, timeout=0.5).read()  # gave up waiting
        threading.Timer(0.5, backend.gate.set).start()
        r = c.post("/v1/chat/completions", json=body, timeout=10)  # queued behind the first, then replayed
    assert r.status_code == 200 and r.headers["x-localpager-history"] == "retry"
    assert r.json()["choices"][0]["message"]["content"] == "First sentence here. Second sentence follows it."
    assert [t[0] for t in stored(lp, "t")] == ["user", "assistant"]


# -- issue 22: the new user's edges ----------------------------------------------------------------------
def test_finish_reason_is_length_when_max_tokens_cut_the_answer(client):
    cut = ask(client, [("user", "Say a lot.")], max_tokens=3)
    assert cut.json()["choices"][0]["finish_reason"] == "length"
    whole = ask(client, [("user", "Say a lot."), ("assistant", cut.json()["choices"][0]["message"]["content"]),
                         ("user", "Say it all.")])
    assert whole.json()["choices"][0]["finish_reason"] == "stop"
    for max_tokens, reason in ((3, "length"), (None, "stop")):
        r = ask(client, [("user", f"Stream it ({max_tokens}).")], conv=f"s{max_tokens}", stream=True,
                **({"max_tokens": max_tokens} if max_tokens else {}))
        chunks = [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: {")]
        assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"][0]["finish_reason"]] == [reason]


def test_a_dry_run_never_says_erased(client, lp):
    ask(client, [("user", "My locker code is 4417.")])
    preview = client.post("/v1/conversations/c/forget", json={"match": "4417", "dry_run": True}).json()
    assert preview["dry_run"] and preview["erased"] is False and preview["turns"] == [0]
    whole = client.delete("/v1/conversations/c", params={"dry_run": True}).json()
    assert whole["dry_run"] and whole["erased"] is False and lp.store.has_conversation("c")
    done = client.post("/v1/conversations/c/forget", json={"match": "4417"}).json()
    assert not done["dry_run"] and done["turns"] == [0]


def test_serve_budget_pages_the_conversations_it_answers(lp):
    lines = [f"Turn {i} is about the Lisbon flights {i} and the hotel booking." for i in range(22)]  # no standing fact
    history = [("user" if i % 2 == 0 else "assistant", text) for i, text in enumerate(lines)]
    with TestClient(create_app(lp, budget=80, log=lambda s: None)) as c:
        assert ask(c, [*history, ("user", "Which flight?")], conv="small").status_code == 200
    with TestClient(create_app(lp, log=lambda s: None)) as c:
        assert ask(c, [*history, ("user", "Which flight?")], conv="default").status_code == 200
    evicted = {conv: sum(p.evicted for p in lp.store.pages(conv)) for conv in ("small", "default")}
    assert evicted["small"] > evicted["default"]
    assert lp.store.settings("small")["budget"] == lp.store.settings("default")["budget"] != 80  # not stored


def test_the_inspector_shows_a_turn_too_long_for_any_prompt_as_stored_only(fake_pager):
    lp = fake_pager(backend=ScriptedBackend(fallback=reply))
    huge = "word " * 3000  # longer than the 2,048-token context
    with TestClient(create_app(lp, log=lambda s: None)) as c:
        r = ask(c, [("user", "Read this."), ("user", huge), ("assistant", "That was long."),
                    ("user", "What was it about?")], conv="long")
        assert r.status_code == 200
        pages = c.get("/v1/conversations/long/pages").json()["data"]
    holding = [p for p in pages if p["first_turn"] <= 1 <= p["last_turn"]]
    assert holding[0]["too_long_turns"] == [1] and not holding[0]["in_prompt"] and holding[0]["state"] == "too long"
    assert all(p["too_long_turns"] == [] for p in pages if p is not holding[0])
    js = TestClient(create_app(lp, log=lambda s: None)).get("/static/inspector.js").text
    assert "too_long_turns" in js and "stored only" in js


def test_a_refused_first_question_leaves_no_conversation(client, lp):
    r = ask(client, [("user", "word " * 40_000)], conv="big")  # ~200 KB: under the body limit, over any prompt
    assert r.status_code == 400 and error_of(r)["code"] == "context_length_exceeded"
    assert not lp.store.has_conversation("big")
    assert client.get("/v1/conversations").json()["data"] == []
    assert ask(client, [("user", "A short one.")], conv="big").status_code == 200  # and the id is free


# -- issue 22: the pure pieces ------------------------------------------------------------------------------
def test_escape_controls_leaves_one_printable_line():
    assert escape_controls("GET /a\nforged\r\x1b[31m\u202e\x00 ok é 田中") == \
        "GET /a\\nforged\\r\\x1b[31m\\u202e\\x00 ok é 田中"


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=1, max_size=60))
def test_any_id_survives_a_header_both_ways(text):
    value = header_value(text)
    assert value.isascii() and value.isprintable()  # Latin-1 and no control character: any server sends it
    assert header_id(value) == text
    name = content_disposition(f"{text}.jsonl")
    assert name.isascii() and name.isprintable() and "\n" not in name


def test_origin_allowed():
    for origin in ("http://localhost:3000", "http://127.0.0.1", "https://[::1]:8443", "http://testserver"):
        assert origin_allowed(origin, "testserver", ()), origin
    for origin in ("http://evil.example", "null", "file://", "http://localhost.evil.example", "ftp://localhost",
                   "http://[::1"):
        assert not origin_allowed(origin, "testserver", ()), origin
    assert origin_allowed("http://app.example", "x", ["http://app.example"])
    assert origin_allowed("http://evil.example", "x", ["*"])


def test_a_remembered_turn_is_no_part_of_the_clients_history(client, lp):
    """A turn kept by ``remember`` (the CLI, the library) was never in the app's chat: the history the app sends
    still matches the store, and a retry still gets the stored answer."""
    first = ask(client, [("user", "What makes a good locker code?")])
    lp.conversation("c").remember("My gym locker code is 4417.")
    follow = [("user", "What makes a good locker code?"), ("assistant", ANSWER), ("user", "And for a bike lock?")]
    r = ask(client, follow)
    assert r.status_code == 200 and r.headers["x-localpager-history"] == "in-sync"
    assert first.status_code == 200
