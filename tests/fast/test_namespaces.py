"""Isolation between users of one server and one store (issue 25, item 5): a keys file maps each key to a
namespace, each namespace is a store of its own (a schema in PostgreSQL, a file beside a SQLite store), and
a request reaches only its own namespace, whatever conversation id it names. Two keys try to read, search,
export, correct, pin and forget each other's conversations by id; on SQLite and on PostgreSQL."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from fakes import ScriptedBackend, answering

from localpager.cli import cli
from localpager.serving.protocol import parse_api_keys

pytestmark = pytest.mark.both_stores
pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from localpager.serving.app import ServerOptions, create_app  # noqa: E402

ALICE, BOB = "alice-key-0123456789", "bob-key-9876543210"
KEYS = {ALICE: "alice", BOB: "bob"}
SECRET = "Quorvantheliumdisk"


@pytest.fixture
def lp(fake_pager):
    return fake_pager(backend=ScriptedBackend(fallback=answering("Noted.")))


@pytest.fixture
def client(lp):
    logs = []
    with TestClient(create_app(lp, ServerOptions(api_keys=KEYS, log=logs.append))) as c:
        c.logs = logs
        yield c


def as_(key):
    return {"Authorization": f"Bearer {key}"}


def chat(client, key, conv, text):
    return client.post("/v1/chat/completions", headers={**as_(key), "X-Conversation-Id": conv},
                       json={"messages": [{"role": "user", "content": text}]})


def test_two_keys_cannot_reach_each_others_conversations(client, lp):
    assert chat(client, ALICE, "diary", f"my locker code is {SECRET}").status_code == 200
    assert chat(client, ALICE, "diary", "and I like tea").status_code == 200
    alice = lp.namespace("alice")
    before = [(t.role, t.text) for t in alice.store.turns("diary")]
    assert SECRET in before[0][1]

    # bob names alice's conversation by id on every route: it does not exist for him
    for method, path, body in (
            ("GET", "/v1/conversations/diary/turns", None), ("GET", "/v1/conversations/diary/pages", None),
            ("GET", "/v1/conversations/diary/bookmarks", None), ("GET", "/v1/conversations/diary/log", None),
            ("GET", f"/v1/conversations/diary/search?q={SECRET}", None),
            ("GET", "/v1/conversations/diary/export", None),
            ("POST", "/v1/conversations/diary/forget", {"match": SECRET}),
            ("POST", "/v1/conversations/diary/correct", {"turn": 0, "text": "nothing"}),
            ("POST", "/v1/conversations/diary/pages/1/pin", {"pinned": True}),
            ("DELETE", "/v1/conversations/diary", None)):
        r = client.request(method, path, json=body, headers=as_(BOB))
        assert r.status_code == 404, (method, path, r.status_code, r.text)
        assert SECRET not in r.text
    listing = client.get("/v1/conversations", headers=as_(BOB)).json()["data"]
    assert listing == []
    assert [c["id"] for c in client.get("/v1/conversations", headers=as_(ALICE)).json()["data"]] == ["diary"]

    # bob's own "diary" is another conversation: chatting in it neither reads nor changes alice's
    r = chat(client, BOB, "diary", f"what is my locker code? {SECRET[:4]}")
    assert r.status_code == 200 and SECRET not in r.text
    assert [t.text for t in lp.namespace("bob").store.turns("diary")][0].startswith("what is my locker code")
    assert [(t.role, t.text) for t in alice.store.turns("diary")] == before
    assert SECRET not in client.get(f"/v1/conversations/diary/search?q={SECRET}", headers=as_(BOB)).text
    assert SECRET not in client.get("/v1/conversations/diary/export", headers=as_(BOB)).text
    r = client.delete("/v1/conversations/diary", headers=as_(BOB))
    assert r.status_code == 200 and r.json()["whole"]
    assert [(t.role, t.text) for t in alice.store.turns("diary")] == before  # bob's forget left alice's alone

    # alice still reads, searches and exports her own
    assert SECRET in client.get("/v1/conversations/diary/export", headers=as_(ALICE)).text
    assert client.get("/v1/conversations/diary/turns", headers=as_(ALICE)).json()["total"] == 4
    # the server's own store (no namespace) holds nothing of either
    assert lp.store.list_conversations() == []


def test_a_request_without_a_known_key_reaches_no_namespace(client):
    assert chat(client, "not-a-key", "diary", "hello").status_code == 401
    r = client.get("/v1/conversations")
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
    assert client.get("/health").status_code == 200  # no memory in it: served without a key
    assert client.get("/").status_code == 200


def test_a_namespace_is_a_store_of_its_own(lp):
    alice = lp.namespace("alice")
    assert alice is lp.namespace("alice") and alice.backend is lp.backend and alice.lock is lp.lock
    alice.conversation("c", create=True).add_turn("user", "hello")
    assert not lp.store.has_conversation("c") and not lp.namespace("bob").store.has_conversation("c")
    if lp.store.kind == "sqlite":
        assert alice.store.path == lp.store.path.parent / f"{lp.store.path.name}.namespaces" / "alice.db"
    else:
        assert alice.store.schema == "localpager_ns_alice"
    for bad in ("Alice", "../x", "", "a" * 41, "a b"):
        with pytest.raises(Exception, match="namespace"):
            lp.namespace(bad)


def test_serve_with_one_namespace_reaches_only_it(lp):
    lp.namespace("carol").conversation("mine", create=True).add_turn("user", "carol's words")
    lp.conversation("root", create=True)
    with TestClient(create_app(lp, ServerOptions(api_key="k", namespace="carol"))) as c:
        ids = [x["id"] for x in c.get("/v1/conversations", headers=as_("k")).json()["data"]]
        assert ids == ["mine"]
        assert c.get("/v1/conversations/root/turns", headers=as_("k")).status_code == 404


def test_keys_file_lines_are_checked():
    assert parse_api_keys("# users\nalice k1\n\nbob k2\nalice k3\n") == {"k1": "alice", "k2": "bob", "k3": "alice"}
    for text, problem in (("alice", "expected NAMESPACE KEY"), ("Alice k1", "namespace"),
                          ("alice k1\nbob k1", "already 'alice'"), ("# nothing", "holds no key")):
        with pytest.raises(ValueError, match=problem):
            parse_api_keys(text)


@pytest.mark.sqlite_only
def test_cli_serve_keys_file_is_checked_before_serving(tmp_path):
    keys = tmp_path / "keys"
    keys.write_text("alice\n")
    result = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "serve", "--api-keys-file", str(keys)])
    assert result.exit_code == 2 and "line 1: expected NAMESPACE KEY" in result.output
    keys.write_text("alice k1\n")
    result = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "serve", "--api-keys-file", str(keys),
                                      "--namespace", "bob"])
    assert result.exit_code == 2 and "give no --api-key" in result.output
    assert not (tmp_path / "s.db").exists()
