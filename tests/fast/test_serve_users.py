"""Users on `localpager serve` (issue 40, item 5): ``X-Localpager-User`` (default ``--user``) makes a new chat's
conversation the user's, so its first answer knows what they said in another chat, cited there; another user's
conversation, or nobody's, is refused; a bad name is a 400; the /v1/users endpoints; a keys file's namespaces stay
a wall between two users of one name. On the fakes (tests/fakes.py)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from fakes import ScriptedBackend, answering

from localpager.cli import cli

pytestmark = pytest.mark.both_stores
pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from localpager.serving.app import ServerOptions, create_app  # noqa: E402

REPLY = "Sounds good."
UTRECHT = "I live in Utrecht with my partner."
SECRET = "Quorvantheliumdisk"
A_KEY, B_KEY = "key-a-0123456789", "key-b-9876543210"


@pytest.fixture
def lp(fake_pager):
    return fake_pager(backend=ScriptedBackend(fallback=answering(REPLY)))


@pytest.fixture
def client(lp):
    with TestClient(create_app(lp, log=lambda line: None)) as c:
        yield c


def chat(client, conv: str, text: str, user: str | None = None, history=(), **headers):
    if user is not None:
        headers["X-Localpager-User"] = user
    messages = [*({"role": r, "content": t} for r, t in history), {"role": "user", "content": text}]
    return client.post("/v1/chat/completions", headers={"X-Conversation-Id": conv, **headers},
                       json={"model": "localpager", "messages": messages})


def error(r) -> dict:
    body = r.json()["error"]
    assert set(body) == {"message", "type", "param", "code"} and "\n" not in body["message"]
    return body


def test_a_users_new_chat_answers_from_what_they_said_in_another_cited_there(client, lp):
    assert chat(client, "mon", "Can you recommend a film?", "alice").status_code == 200
    r = chat(client, "mon", UTRECHT, "alice")
    assert r.status_code == 200 and r.json()["localpager"]["user"] == "alice"
    assert lp.store.conversation_user("mon") == "alice"

    r = chat(client, "tue", "Where do I live?", "alice")  # a new chat id: created as alice's
    assert r.status_code == 200, r.text
    assert lp.store.conversation_user("tue") == "alice"
    answer = r.json()
    assert UTRECHT in answer["choices"][0]["message"]["content"]
    (cited,) = answer["localpager"]["citations"]
    assert cited["conversation"] == "mon" and cited["page_id"] is None and UTRECHT in cited["text"]

    # another user's new chat, and a chat of nobody's, get nothing of it
    seen = len(lp.backend.calls)
    for conv, user in (("bob-1", "bob"), ("nobody", None)):
        r = chat(client, conv, "Where do I live?", user)
        assert r.status_code == 200 and "Utrecht" not in r.text
        assert lp.store.conversation_user(conv) == user
    assert all("Utrecht" not in call.text for call in lp.backend.calls[seen:])


def test_the_default_user_is_the_servers_and_the_header_overrides_it(lp):
    logs = []
    with TestClient(create_app(lp, ServerOptions(user="alice", log=logs.append))) as c:
        assert chat(c, "mon", UTRECHT).status_code == 200
        r = chat(c, "tue", "Where do I live?")
        assert r.status_code == 200 and UTRECHT in r.json()["choices"][0]["message"]["content"]
        assert chat(c, "bob-1", "Where do I live?", "bob").status_code == 200
        assert error(chat(c, "bob-1", "Hello again"))["code"] == "conversation_of_another_user"  # alice by default
    assert [(i.id, i.user) for i in lp.conversations()] == [("mon", "alice"), ("tue", "alice"), ("bob-1", "bob")]
    assert any(line.startswith("chat conv=tue user=alice turn=") for line in logs)


def test_a_conversation_of_another_user_or_of_nobody_is_refused_and_left_as_it_was(client, lp):
    assert chat(client, "mon", UTRECHT, "alice").status_code == 200
    assert chat(client, "old", "Hello", None).status_code == 200
    before = {c: [t.text for t in lp.store.turns(c)] for c in ("mon", "old")}
    for conv, user, whose in (("mon", "bob", "user 'alice'"), ("old", "alice", "no user")):
        r = chat(client, conv, "What did I say?", user)
        assert r.status_code == 403, r.text
        e = error(r)
        assert (e["type"], e["code"], e["param"]) == ("permission_error", "conversation_of_another_user",
                                                      "X-Localpager-User")
        assert e["message"].startswith(f"conversation {conv!r} belongs to {whose}, not to user {user!r}")
        # the memory endpoints refuse it too when the header says whose the request is; without it, as before
        r = client.get(f"/v1/conversations/{conv}/turns", headers={"X-Localpager-User": user})
        assert r.status_code == 403 and error(r)["code"] == "conversation_of_another_user"
        assert client.get(f"/v1/conversations/{conv}/turns").status_code == 200
    assert {c: [t.text for t in lp.store.turns(c)] for c in ("mon", "old")} == before
    assert chat(client, "mon", "And now?", "alice").status_code == 200  # her own goes on


@pytest.mark.parametrize("value, says", [
    ("", "non-empty"), (" alice", None), ("a" * 201, "at most 200"), ("al%0Aice", "control or invisible"),
    ("%E7%94", "not UTF-8")])
def test_a_bad_user_name_is_a_one_line_400_and_stores_nothing(client, lp, value, says):
    r = chat(client, "c", "Hello", value)
    if says is None:  # the header's surrounding spaces are not the name's
        assert r.status_code == 200 and lp.store.conversation_user("c") == "alice"
        return
    assert r.status_code == 400
    e = error(r)
    assert e["code"] == "invalid_user" and e["message"].startswith("X-Localpager-User") and says in e["message"]
    assert not lp.store.has_conversation("c")


def test_a_user_name_in_any_script_travels_percent_encoded(client, lp):
    assert chat(client, "mon", UTRECHT, "%C5%81ukasz").status_code == 200
    assert lp.store.conversation_user("mon") == "Łukasz"
    r = client.get("/v1/users/%C5%81ukasz/conversations")
    assert [c["id"] for c in r.json()["data"]] == ["mon"]


def test_the_users_endpoints(client, lp):
    chat(client, "mon", UTRECHT, "alice")
    chat(client, "tue", f"My locker code is {SECRET}.", "alice")
    chat(client, "bob-1", f"My locker code is {SECRET}.", "bob")
    chat(client, "nobody", "Hello", None)

    listing = client.get("/v1/conversations").json()["data"]
    assert [(c["id"], c["user"]) for c in listing] == [("mon", "alice"), ("tue", "alice"), ("bob-1", "bob"),
                                                       ("nobody", None)]
    assert client.get("/v1/users").json()["data"] == [{"id": "alice", "conversations": 2},
                                                      {"id": "bob", "conversations": 1}]
    mine = client.get("/v1/users/alice/conversations").json()["data"]
    assert [(c["id"], c["user"], c["turns"]) for c in mine] == [("mon", "alice", 2), ("tue", "alice", 2)]

    facts = client.get("/v1/users/alice/facts").json()["data"]
    assert [(f["conv_id"], f["text"]) for f in facts][0] == ("mon", UTRECHT)
    assert all(f["conv_id"] in ("mon", "tue") for f in facts)

    hits = client.get("/v1/users/alice/search", params={"q": f"locker code {SECRET}"}).json()["data"]
    assert hits and hits[0]["conversation"] == "tue" and SECRET in hits[0]["text"]
    assert {h["conversation"] for h in hits} <= {"mon", "tue"}

    lines = client.get("/v1/users/alice/export")
    assert lines.headers["content-type"].startswith("application/x-ndjson")
    assert 'filename="alice.jsonl"' in lines.headers["content-disposition"]
    exported = [json.loads(line) for line in lines.text.splitlines()]
    assert [(e["id"], e["user"]) for e in exported] == [("mon", "alice"), ("tue", "alice")]

    dry = client.post("/v1/users/alice/forget", json={"match": SECRET, "dry_run": True}).json()
    assert dry["dry_run"] and dry["turns"] == 1 and [r["conversation"] for r in dry["conversations"]] == ["tue"]
    assert all(r["erased"] is False for r in dry["conversations"])
    assert SECRET in lp.store.turns("tue")[0].text
    done = client.post("/v1/users/alice/forget", json={"match": SECRET}).json()
    assert done["turns"] == 1 and not done["dry_run"]
    assert lp.store.turns("tue")[0].text == ""
    assert SECRET in lp.store.turns("bob-1")[0].text  # bob's words are bob's

    refused = client.post("/v1/users/alice/forget", json={"conversation": "bob-1"})
    assert refused.status_code == 403 and error(refused)["code"] == "conversation_of_another_user"
    gone = client.post("/v1/users/alice/forget", json={"conversation": "mon"})
    assert gone.status_code == 200 and not lp.store.has_conversation("mon")
    assert [c["id"] for c in client.get("/v1/users/alice/conversations").json()["data"]] == ["tue"]
    assert chat(client, "mon", "Hello again", "alice").status_code == 200  # starts afresh, hers


@pytest.mark.parametrize("method, path, body, status, code, says", [
    ("GET", "/v1/users/alise/facts", None, 404, "user_not_found", "did you mean 'alice'?"),
    ("GET", "/v1/users/carol/conversations", None, 404, "user_not_found", "no user 'carol'"),
    ("GET", "/v1/users/alice/search?q=%20", None, 400, None, "search needs some words"),
    ("POST", "/v1/users/alice/forget", {}, 400, None, "exactly one of match or conversation"),
    ("POST", "/v1/users/alice/forget", {"match": "x", "conversation": "mon"}, 400, None, "exactly one"),
    ("POST", "/v1/users/alice/forget", {"conversation": "gone"}, 404, "conversation_not_found", "no conversation"),
    ("GET", "/v1/users/%20alice/facts", None, 400, "invalid_user", "starts or ends with a space"),
])
def test_the_users_endpoints_errors(client, lp, method, path, body, status, code, says):
    chat(client, "mon", UTRECHT, "alice")
    r = client.request(method, path, json=body)
    assert r.status_code == status, r.text
    e = error(r)
    assert e["code"] == code and says in e["message"]
    assert lp.store.has_conversation("mon")


def test_a_user_lives_inside_its_keys_namespace(lp):
    """alice under key A and alice under key B share nothing: not a fact, not a conversation, not a listing."""
    keys = {A_KEY: "a", B_KEY: "b"}
    with TestClient(create_app(lp, ServerOptions(api_keys=keys, log=lambda line: None))) as c:
        auth = lambda key: {"Authorization": f"Bearer {key}"}  # noqa: E731
        assert chat(c, "mon", UTRECHT, "alice", **auth(A_KEY)).status_code == 200
        assert chat(c, "tue", f"My locker code is {SECRET}.", "alice", **auth(A_KEY)).status_code == 200
        r = chat(c, "wed", "Where do I live?", "alice", **auth(B_KEY))
        assert r.status_code == 200 and "Utrecht" not in r.text and not r.json()["localpager"]["citations"]
        # the same conversation id under B is B's own, and B's alice is another person
        r = chat(c, "mon", "Where do I live?", "alice", **auth(B_KEY))
        assert r.status_code == 200 and "Utrecht" not in r.text
        for path in ("/v1/users/alice/facts", f"/v1/users/alice/search?q={SECRET}", "/v1/users/alice/export",
                     "/v1/users/alice/conversations"):
            r = c.get(path, headers=auth(B_KEY))
            assert r.status_code == 200 and SECRET not in r.text and "Utrecht" not in r.text, path
        assert [x["id"] for x in c.get("/v1/users/alice/conversations", headers=auth(B_KEY)).json()["data"]] == [
            "wed", "mon"]
        r = c.post("/v1/users/alice/forget", json={"match": "Utrecht"}, headers=auth(B_KEY))
        assert r.status_code == 200 and r.json()["turns"] == 0
        assert c.get("/v1/users/alice/facts", headers=auth(A_KEY)).json()["data"][0]["text"] == UTRECHT
        assert c.get("/v1/users", headers={}).status_code == 401
    a, b = lp.namespace("a"), lp.namespace("b")
    assert [t.text for t in a.store.turns("mon")][0] == UTRECHT
    assert all("Utrecht" not in t.text and SECRET not in t.text for i in b.conversations() for t in b.store.turns(i.id))


def test_serve_checks_its_user_option(tmp_path, monkeypatch):
    import localpager.serving.app as app

    seen = {}
    monkeypatch.setattr(app, "serve", lambda lp, host, port, options: seen.update(options=options))
    monkeypatch.delenv("LOCALPAGER_USER", raising=False)
    store = ["--store", str(tmp_path / "s.db")]
    bad = CliRunner().invoke(cli, ["serve", *store, "--user", " alice"])
    assert bad.exit_code == 1 and "user name ' alice' starts or ends with a space" in bad.output
    assert "options" not in seen
    for args in (["serve", *store, "--user", "alice"], ["--user", "alice", "serve", *store]):
        assert CliRunner().invoke(cli, args).exit_code == 0
        assert seen.pop("options").user == "alice"
    assert CliRunner().invoke(cli, ["serve", *store]).exit_code == 0 and seen["options"].user is None



OPEN_WEBUI = "X-OpenWebUI-User-Id"  # what Open WebUI sends with ENABLE_FORWARD_USER_INFO_HEADERS=true


def test_a_user_header_the_server_is_told_to_read_gives_each_open_webui_account_its_memory(lp):
    """``--user-header X-OpenWebUI-User-Id``: Open WebUI names the account on every request, and each of its new
    chats joins that account's memory; X-Localpager-User, when sent too, counts first."""
    options = ServerOptions(user_headers=("X-Localpager-User", OPEN_WEBUI), log=lambda line: None)
    with TestClient(create_app(lp, options)) as c:
        assert chat(c, "chat-1", UTRECHT, **{OPEN_WEBUI: "u-5f1c"}).status_code == 200
        r = chat(c, "chat-2", "Where do I live?", **{OPEN_WEBUI: "u-5f1c"})
        assert r.status_code == 200 and UTRECHT in r.json()["choices"][0]["message"]["content"]
        r = chat(c, "chat-3", "Where do I live?", **{OPEN_WEBUI: "u-77aa"})
        assert r.status_code == 200 and "Utrecht" not in r.text
        r = chat(c, "chat-1", "And now?", **{OPEN_WEBUI: "u-77aa"})  # another account's chat
        assert r.status_code == 403 and error(r)["code"] == "conversation_of_another_user"
        assert error(r)["param"] == OPEN_WEBUI  # the header that said whose, not one the app never sent
        r = c.get("/v1/conversations/chat-1/turns", headers={OPEN_WEBUI.lower(): "u-77aa"})  # any case
        assert r.status_code == 403 and error(r)["param"].lower() == OPEN_WEBUI.lower()
        assert chat(c, "chat-4", "Hi", "alice", **{OPEN_WEBUI: "u-5f1c"}).status_code == 200
        r = c.get("/v1/users/u-5f1c/conversations", headers={OPEN_WEBUI: "u-77aa"})
        assert r.status_code == 403 and error(r)["code"] == "memory_of_another_user"
        assert error(r)["param"] == OPEN_WEBUI
        e = error(chat(c, "chat-5", "Hi", **{OPEN_WEBUI: ""}))
        assert e["code"] == "invalid_user" and e["param"] == OPEN_WEBUI and e["message"].startswith(OPEN_WEBUI)
    assert [(i.id, i.user) for i in lp.conversations()] == [
        ("chat-1", "u-5f1c"), ("chat-2", "u-5f1c"), ("chat-3", "u-77aa"), ("chat-4", "alice")]


def test_a_user_header_is_read_only_when_the_server_is_told_to(client, lp):
    assert chat(client, "chat-1", UTRECHT, **{OPEN_WEBUI: "u-5f1c"}).status_code == 200
    assert lp.store.conversation_user("chat-1") is None  # as before: nobody's


def test_serve_checks_its_user_header_option(tmp_path, monkeypatch):
    import localpager.serving.app as app

    seen = {}
    monkeypatch.setattr(app, "serve", lambda lp, host, port, options: seen.update(options=options))
    store = ["--store", str(tmp_path / "s.db")]
    bad = CliRunner().invoke(cli, ["serve", *store, "--user-header", "X-User Id"])
    assert bad.exit_code == 2 and "--user-header 'X-User Id' is not a header name" in bad.output
    assert CliRunner().invoke(cli, ["serve", *store, "--user-header", OPEN_WEBUI]).exit_code == 0
    assert seen.pop("options").user_headers == ("X-Localpager-User", OPEN_WEBUI)
    monkeypatch.setenv("LOCALPAGER_USER_HEADER", OPEN_WEBUI)
    assert CliRunner().invoke(cli, ["serve", *store]).exit_code == 0
    assert seen.pop("options").user_headers == ("X-Localpager-User", OPEN_WEBUI)


def test_a_users_history_is_embedded_between_requests(lp, monkeypatch):
    """An imported history: a request of the user embeds a share of it (``USER_EMBED_PER_ANSWER``), and the server
    embeds the rest after the answer, a step at a time under the model lock, not a share per question."""
    import localpager.memory.conversation as conversation
    import localpager.serving.jobs as jobs
    from localpager.lab.synthetic import generate_conversation

    for name, seed in (("old", 1), ("mid", 2), ("new", 3)):
        chat_ = lp.conversation(name, create=True, user="alice")
        for t in generate_conversation(seed, n_turns=60).turns:
            chat_.add_turn(t.role, t.text, stamp=False)
    monkeypatch.setattr(conversation, "USER_EMBED_PER_ANSWER", 10)
    monkeypatch.setattr(jobs, "IDLE_EMBED_TURNS", 20)
    embedded = lambda: sum(sum(lp.store.embedded_turn_counts(n, lp.index.embedder.name).values())  # noqa: E731
                           for n in ("old", "mid", "new"))
    app = create_app(lp, log=lambda line: None)
    with TestClient(app) as c:
        assert chat(c, "today", "Where do I live?", "alice").status_code == 200
        app.state.served.runner.join_embedding(timeout=60)
        assert embedded() == 180  # every turn of the three, none waiting for a question
        assert chat(c, "today", "And my sister?", "alice").status_code == 200
        app.state.served.runner.join_embedding(timeout=60)  # nothing left: the next one ends at once
        assert not app.state.served.runner._embedding.is_alive() and embedded() == 180


def test_the_inspector_offers_a_user_picker_over_the_users_endpoints(client):
    page = client.get("/").text
    assert 'id="user"' in page and 'id="user-facts"' in page
    js = client.get("/static/inspector.js").text
    assert "/v1/users/${encodeURIComponent(state.user)}" in js and "${base}/facts" in js and "c.user" in js
    assert "${base}/facts/edit" in js and "${base}/facts/delete" in js  # driven in a browser: test_inspector_facts.py
    assert "users" in client.get("/health").json()["features"]
