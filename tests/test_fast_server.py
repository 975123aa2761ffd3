"""The server's HTTP logic on the fakes (tests/fakes.py): conversation ids, history reconciliation, auth,
errors, limits, ordering, a client leaving mid-stream. No model file, no embedder: seconds in all."""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import threading
import time

import httpx
import pytest
from click.testing import CliRunner
from fakes import ScriptedBackend, shortest_sentence

from localpager.cli import cli
from localpager.pager import PagingConfig
from localpager.server import ServerOptions, create_app
from localpager.serving import ApiError, Msg, check_bind, reconcile, resolve_conversation_id

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

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
    for bad in ("a b", "a/b", "x" * 201, "tab\there"):
        with pytest.raises(ApiError, match="visible characters"):
            resolve_conversation_id({"x-conversation-id": bad}, {})


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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
    monkeypatch.delitem(sys.modules, "localpager.server", raising=False)
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
    assert set(client.get("/health").json()["features"]) == {"pin", "search", "forget", "correct", "export"}


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
