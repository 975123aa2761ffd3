"""The user manages their memory over HTTP (issue 40, item 4, on `localpager serve`): remember a fact without a reply,
edit a fact's words, delete one, at a conversation's scope (``/v1/conversations/{id}/remember``, ``…/facts/{n}/edit``,
``…/facts/{n}/delete``) and at a user's (``/v1/users/{user}/remember``, ``…/facts/edit``, ``…/facts/delete``). An
edited or deleted fact's old words are in no byte of the store afterwards; another user's facts and another
namespace's cannot be reached; a dry run changes nothing. On the fakes (tests/fakes.py)."""

from __future__ import annotations


import pytest
from helpers import leaks, stored_words
from fakes import ScriptedBackend, answering

pytestmark = pytest.mark.both_stores
pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from localpager.serving.app import ServerOptions, create_app  # noqa: E402

SECRET = "Quillonfrazzle"
ALLERGY = f"I'm allergic to {SECRET}."
SISTER = "My sister Zorbavelle lives in Porto."
KEY = "the spare key is under the blue flowerpot"
A_KEY, B_KEY = "key-a-0123456789", "key-b-9876543210"


@pytest.fixture
def lp(fake_pager):
    return fake_pager(backend=ScriptedBackend(fallback=answering("Noted.")))


@pytest.fixture
def client(lp):
    with TestClient(create_app(lp, log=lambda line: None)) as c:
        yield c


def chat(client, conv: str, text: str, user: str | None = None, **headers):
    if user is not None:
        headers["X-Localpager-User"] = user
    r = client.post("/v1/chat/completions", headers={"X-Conversation-Id": conv, **headers},
                    json={"model": "localpager", "messages": [{"role": "user", "content": text}]})
    assert r.status_code == 200, r.text
    return r


def error(r) -> dict:
    body = r.json()["error"]
    assert set(body) == {"message", "type", "param", "code"} and "\n" not in body["message"]
    return body


def fact_of(client, path: str, text: str) -> dict:
    return next(f for f in client.get(path).json()["data"] if f["text"] == text)


def test_a_conversations_facts_remembered_edited_and_deleted_over_http(client, lp):
    chat(client, "c", f"Hi! {ALLERGY} {SISTER}")
    chat(client, "c", "What do you remember about me?")  # an answer quoting the fact: its words in a trace too
    assert stored_words(lp, SECRET) == ["c"]
    assert lp.store.kind != "sqlite" or leaks(lp, SECRET)  # what the check below could find

    r = client.post("/v1/conversations/c/remember", json={"text": KEY})
    assert r.status_code == 200, r.text
    assert r.json()["conversation"] == "c" and [(f["kind"], f["text"]) for f in r.json()["data"]] == [("stated", KEY)]
    turns = client.get("/v1/conversations/c/turns").json()["data"]
    assert (turns[-1]["role"], turns[-1]["text"]) == ("user", KEY)  # no reply after it
    before = len(lp.backend.calls)

    fact = fact_of(client, "/v1/conversations/c/facts", ALLERGY)
    dry = client.post(f"/v1/conversations/c/facts/{fact['fact_id']}/edit",
                      json={"text": "I'm allergic to peanuts.", "dry_run": True})
    assert dry.status_code == 200, dry.text
    body = dry.json()
    assert body["dry_run"] and body["fact"]["text"] == ALLERGY and [f["text"] for f in body["kept"]] == [SISTER]
    assert body["forgotten"][0]["turns"] and all(r["erased"] is False for r in body["forgotten"])
    assert stored_words(lp, SECRET) == ["c"]  # a dry run changes nothing

    done = client.post(f"/v1/conversations/c/facts/{fact['fact_id']}/edit", json={"text": "I'm allergic to peanuts."})
    assert done.status_code == 200, done.text
    assert [f["text"] for f in done.json()["facts"]] == ["I'm allergic to peanuts."] and not done.json()["dry_run"]
    facts = [f["text"] for f in client.get("/v1/conversations/c/facts").json()["data"]]
    assert facts == [KEY, SISTER, "I'm allergic to peanuts."]
    assert stored_words(lp, SECRET) == [] and leaks(lp, SECRET) == []

    sister = fact_of(client, "/v1/conversations/c/facts", SISTER)
    gone = client.post(f"/v1/conversations/c/facts/{sister['fact_id']}/delete")  # no body: not a dry run
    assert gone.status_code == 200 and gone.json()["text"] is None, gone.text
    assert SISTER not in [f["text"] for f in client.get("/v1/conversations/c/facts").json()["data"]]
    assert stored_words(lp, "Zorbavelle") == [] and leaks(lp, "Zorbavelle") == []
    assert len(lp.backend.calls) == before  # no model was asked for any of it


@pytest.mark.parametrize("method, path, body, status, code, says", [
    ("POST", "/v1/conversations/c/facts/99/delete", {}, 404, "fact_not_found", "no standing fact 99"),
    ("POST", "/v1/conversations/c/facts/99999999999999999999999/edit", {"text": "x"}, 404, "fact_not_found",
     "no standing fact"),
    ("POST", "/v1/conversations/gone/facts/1/delete", {}, 404, "conversation_not_found", "no conversation 'gone'"),
    ("POST", "/v1/conversations/gone/remember", {"text": "x"}, 404, "conversation_not_found", "no conversation"),
    ("POST", "/v1/conversations/c/remember", {"text": "   "}, 400, None, "nothing to remember"),
    ("POST", "/v1/conversations/c/facts/1/edit", {}, 400, None, "text"),
    ("POST", "/v1/users/alice/facts/edit", {"conversation": "c", "fact_id": 1}, 400, None, "new words"),
    ("POST", "/v1/users/alice/facts/delete", {"conversation": "c", "fact_id": 1, "text": "x"}, 400, None,
     "takes no text"),
    ("POST", "/v1/users/alice/facts/delete", {"conversation": "c", "fact_id": 99}, 404, "fact_not_found",
     "no standing fact 99"),
    ("POST", "/v1/users/alise/facts/delete", {"conversation": "c", "fact_id": 1}, 404, "user_not_found",
     "did you mean 'alice'?"),
    ("POST", "/v1/users/alice/facts/delete", {"conversation": "cc", "fact_id": 1}, 404, "conversation_not_found",
     "did you mean 'c'?"),
    ("POST", "/v1/users/alice/remember", {"text": "x", "conversation": "gone"}, 404, "conversation_not_found",
     "no conversation 'gone'"),
    ("POST", "/v1/users/%20alice/remember", {"text": "x"}, 400, "invalid_user", "starts or ends with a space"),
])
def test_fact_edit_errors_are_one_line_and_change_nothing(client, lp, method, path, body, status, code, says):
    chat(client, "c", ALLERGY, "alice")
    turns = [t.text for t in lp.store.turns("c")]
    r = client.request(method, path, json=body)
    assert r.status_code == status, r.text
    e = error(r)
    assert e["code"] == code and says in e["message"], e
    assert [t.text for t in lp.store.turns("c")] == turns and [c.id for c in lp.conversations()] == ["c"]


def test_a_users_facts_over_http_reach_all_their_conversations_and_no_one_elses(client, lp):
    chat(client, "mon", f"Hi! {ALLERGY} {SISTER}", "alice")
    chat(client, "tue", "What do you remember about me?", "alice")  # quotes monday's fact in tuesday's chat
    chat(client, "bob-1", ALLERGY, "bob")  # the same words, someone else's
    assert stored_words(lp, SECRET) == ["bob-1", "mon", "tue"]

    made = client.post("/v1/users/alice/remember", json={"text": KEY})
    assert made.status_code == 200, made.text
    assert made.json()["conversation"] == "alice-memory" and made.json()["data"][0]["conv_id"] == "alice-memory"
    assert lp.store.conversation_user("alice-memory") == "alice"
    there = client.post("/v1/users/alice/remember", json={"text": "I cycle to work.", "conversation": "tue"})
    assert there.status_code == 200 and there.json()["data"][0]["conv_id"] == "tue"

    fact = fact_of(client, "/v1/users/alice/facts", ALLERGY)
    target = {"conversation": fact["conv_id"], "fact_id": fact["fact_id"]}
    dry = client.post("/v1/users/alice/facts/delete", json={**target, "dry_run": True}).json()
    assert dry["dry_run"] and [r["conversation"] for r in dry["forgotten"]] == ["mon", "tue"]
    assert stored_words(lp, SECRET) == ["bob-1", "mon", "tue"]

    # bob's fact is not alice's to change, whichever way it is asked
    bobs = fact_of(client, "/v1/users/bob/facts", ALLERGY)
    mine = {"conversation": "bob-1", "fact_id": bobs["fact_id"]}
    refused = [client.post("/v1/users/alice/facts/delete", json=mine),
               client.post("/v1/users/alice/facts/edit", json={**mine, "text": "x"}),
               client.post("/v1/users/alice/remember", json={"text": "x", "conversation": "bob-1"}),
               client.post("/v1/users/bob/facts/delete", json=mine, headers={"X-Localpager-User": "alice"}),
               client.post("/v1/users/bob/remember", json={"text": "x"}, headers={"X-Localpager-User": "alice"}),
               client.post(f"/v1/conversations/bob-1/facts/{bobs['fact_id']}/delete",
                           headers={"X-Localpager-User": "alice"})]
    for r in refused:
        assert r.status_code == 403, r.text
        assert error(r)["code"] in ("conversation_of_another_user", "memory_of_another_user")
    assert "alice" in error(refused[3])["message"] and error(refused[3])["param"] == "X-Localpager-User"
    assert [error(r)["param"] for r in refused[:3]] == ["conversation"] * 3  # the body's field named another's

    done = client.post("/v1/users/alice/facts/delete", json=target)
    assert done.status_code == 200, done.text
    assert [r["conversation"] for r in done.json()["forgotten"]] == ["mon", "tue"]
    assert stored_words(lp, SECRET) == ["bob-1"]  # bob's words are bob's
    assert ALLERGY not in [f["text"] for f in client.get("/v1/users/alice/facts").json()["data"]]
    assert fact_of(client, "/v1/users/bob/facts", ALLERGY)

    sister = fact_of(client, "/v1/users/alice/facts", SISTER)
    edited = client.post("/v1/users/alice/facts/edit", headers={"X-Localpager-User": "alice"},
                         json={"conversation": sister["conv_id"], "fact_id": sister["fact_id"],
                               "text": "My sister Ana lives in Lisbon."})
    assert edited.status_code == 200, edited.text
    assert edited.json()["facts"][0]["text"] == "My sister Ana lives in Lisbon."
    texts = [f["text"] for f in client.get("/v1/users/alice/facts").json()["data"]]
    assert "My sister Ana lives in Lisbon." in texts and SISTER not in texts
    assert stored_words(lp, "Zorbavelle") == [] and leaks(lp, "Zorbavelle") == []
    if lp.store.kind == "sqlite":
        from faultkit import leaks as byte_leaks

        assert byte_leaks(lp.store.path, SECRET)  # bob's words stay in the file, alice's are gone from every turn

    # a new user with no conversation yet: remember makes their memory conversation
    carol = client.post("/v1/users/carol/remember", json={"text": KEY})
    assert carol.status_code == 200 and lp.store.conversation_user("carol-memory") == "carol"


def test_a_foreign_web_page_cannot_change_a_fact(client, lp):
    chat(client, "c", ALLERGY, "alice")
    fact = fact_of(client, "/v1/conversations/c/facts", ALLERGY)
    evil = {"Origin": "https://evil.example"}
    for path, body in ((f"/v1/conversations/c/facts/{fact['fact_id']}/delete", {}),
                       (f"/v1/conversations/c/facts/{fact['fact_id']}/edit", {"text": "x"}),
                       ("/v1/conversations/c/remember", {"text": "x"}),
                       ("/v1/users/alice/facts/delete", {"conversation": "c", "fact_id": fact["fact_id"]}),
                       ("/v1/users/alice/remember", {"text": "x"})):
        r = client.post(path, json=body, headers=evil)
        assert r.status_code == 403 and error(r)["code"] == "forbidden_origin", path
    assert stored_words(lp, SECRET) == ["c"] and [c.id for c in lp.conversations()] == ["c"]


def test_another_namespaces_facts_cannot_be_reached(lp):
    keys = {A_KEY: "a", B_KEY: "b"}
    auth = lambda key: {"Authorization": f"Bearer {key}"}  # noqa: E731
    with TestClient(create_app(lp, ServerOptions(api_keys=keys, log=lambda line: None))) as c:
        chat(c, "mon", f"Hi! {ALLERGY}", "alice", **auth(A_KEY))
        fact = fact_of_with(c, "/v1/users/alice/facts", ALLERGY, auth(A_KEY))
        target = {"conversation": "mon", "fact_id": fact["fact_id"]}
        for path, body, code in (
                ("/v1/users/alice/facts/delete", target, "user_not_found"),
                ("/v1/users/alice/facts/edit", {**target, "text": "x"}, "user_not_found"),
                (f"/v1/conversations/mon/facts/{fact['fact_id']}/delete", {}, "conversation_not_found"),
                (f"/v1/conversations/mon/facts/{fact['fact_id']}/edit", {"text": "x"}, "conversation_not_found"),
                ("/v1/conversations/mon/remember", {"text": "x"}, "conversation_not_found")):
            r = c.post(path, json=body, headers=auth(B_KEY))
            assert r.status_code == 404 and error(r)["code"] == code, (path, r.text)
        assert c.post("/v1/users/alice/facts/delete", json=target).status_code == 401  # no key: nothing
        # B's alice is another person: what she remembers is hers, in B's store
        assert c.post("/v1/users/alice/remember", json={"text": KEY}, headers=auth(B_KEY)).status_code == 200
        assert c.post("/v1/users/alice/facts/delete", json=target, headers=auth(A_KEY)).status_code == 200
    a, b = lp.namespace("a"), lp.namespace("b")
    assert [i.id for i in b.conversations()] == ["alice-memory"] and [f.text for f in b.user("alice").facts()] == [KEY]
    assert all(SECRET not in t.text for i in a.conversations() for t in a.store.turns(i.id))


def fact_of_with(client, path: str, text: str, headers: dict) -> dict:
    return next(f for f in client.get(path, headers=headers).json()["data"] if f["text"] == text)


def test_health_names_the_fact_edits(client):
    assert "fact_edits" in client.get("/health").json()["features"]
