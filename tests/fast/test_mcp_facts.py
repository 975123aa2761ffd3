"""The standing facts as MCP tools (issue 40, item 4): ``facts`` lists them (a tool, since many apps never pass
resources to their model), ``remember`` keeps the user's words as one, ``edit_fact`` and ``delete_fact`` erase the old
words behind a confirmation token as ``forget`` does. With ``--user`` they reach all of that user's conversations and
no one else's. The old words are in no byte of the store afterwards. On the fakes, through the official SDK's client
in-process (tests/fast/test_mcp.py)."""

from __future__ import annotations

import asyncio

import pytest
from helpers import leaks, stored_words

pytest.importorskip("mcp", reason="the mcp extra: pip install 'localpager[mcp]'")

from fakes import answering  # noqa: E402
from mcp import Client  # noqa: E402

from localpager.serving.mcp import build_server  # noqa: E402

pytestmark = pytest.mark.both_stores

SECRET = "Quillonfrazzle"
ALLERGY = f"I'm allergic to {SECRET}."
SISTER = "My sister Zorbavelle lives in Porto."
KEY = "the spare key is under the blue flowerpot"
OWN = "alice-memory"


@pytest.fixture
def lp(fake_pager):
    return fake_pager(answering("Noted."))


def run(server, calls):
    async def main():
        async with Client(server) as client:
            return await calls(client)

    return asyncio.run(main())


def call(server, name: str, arguments: dict):
    """One tool call on ``server`` (a new client session each: a confirmation token crosses sessions)."""
    async def calls(client):
        return await client.call_tool(name, arguments)

    return run(server, calls)


def say(conv, *texts):
    for text in texts:
        conv.add_turn("user", text)
        conv.add_turn("assistant", "Noted.")


def test_the_fact_tools_schemas_and_annotations(lp):
    async def listing(client):
        return {t.name: t for t in (await client.list_tools()).tools}

    tools = run(build_server(lp), listing)
    assert tools["facts"].input_schema["required"] == ["conversation"] and tools["facts"].annotations.read_only_hint
    assert tools["edit_fact"].input_schema["required"] == ["conversation", "fact", "text"]
    assert set(tools["delete_fact"].input_schema["properties"]) == {"conversation", "fact", "dry_run", "confirm"}
    for name in ("edit_fact", "delete_fact"):
        assert tools[name].annotations.destructive_hint and "confirmation token" in tools[name].description
    assert "facts" in tools["remember"].output_schema["properties"]

    read_only = run(build_server(lp, read_only=True), listing)
    assert "facts" in read_only and "edit_fact" not in read_only and "delete_fact" not in read_only

    users = run(build_server(lp, user="alice"), listing)  # a fact's conversation is always named
    assert "conversation" not in users["facts"].input_schema.get("required", [])
    assert "all of their conversations" in users["facts"].description
    for name in ("edit_fact", "delete_fact"):
        assert "conversation" in users[name].input_schema["required"]
        assert "name the conversation the fact is in" in users[name].description


def test_a_conversations_facts_listed_remembered_edited_and_deleted_behind_a_token(lp):
    conv = lp.conversation("c", create=True)
    say(conv, f"Hi! {ALLERGY} {SISTER}")
    conv.ask("What do you remember about me?")  # an answer quoting the fact, and its trace
    assert stored_words(lp, SECRET) == ["c"] and (lp.store.kind != "sqlite" or leaks(lp, SECRET))
    server = build_server(lp)
    asked = len(lp.backend.calls)

    listed = call(server, "facts", {"conversation": "c"}).structured_content
    assert [f["text"] for f in listed["facts"]] == [ALLERGY, SISTER] and listed["conversation"] == "c"
    allergy = listed["facts"][0]
    assert allergy["conversation"] == "c" and allergy["fact_id"] >= 1

    made = call(server, "remember", {"conversation": "c", "text": KEY}).structured_content
    assert [(f["kind"], f["text"]) for f in made["facts"]] == [("stated", KEY)] and conv.turns[-1].remembered

    args = {"conversation": "c", "fact": allergy["fact_id"], "text": "I'm allergic to peanuts."}
    dry = call(server, "edit_fact", {**args, "dry_run": True}).structured_content
    assert dry["status"] == "preview" and dry["confirm_token"] is None and dry["turns"]
    first = call(server, "edit_fact", args).structured_content
    assert first["status"] == "confirm" and first["fact"]["text"] == ALLERGY and first["confirm_token"]
    assert [f["text"] for f in first["kept"]] == [SISTER]
    assert stored_words(lp, SECRET) == ["c"]  # nothing erased before the token comes back

    wrong = call(server, "delete_fact", {"conversation": "c", "fact": allergy["fact_id"],
                                         "confirm": first["confirm_token"]})
    assert wrong.is_error and "issued for another call" in wrong.content[0].text  # and the token is spent
    again = call(server, "edit_fact", args).structured_content
    done = call(server, "edit_fact", {**args, "confirm": again["confirm_token"]}).structured_content
    assert done["status"] == "edited" and [f["text"] for f in done["facts"]] == ["I'm allergic to peanuts."]
    assert stored_words(lp, SECRET) == [] and leaks(lp, SECRET) == []
    reused = call(server, "edit_fact", {**args, "confirm": again["confirm_token"]})
    assert reused.is_error and "no standing fact" in reused.content[0].text  # it is gone: nothing to erase again
    assert [f["text"] for f in call(server, "facts", {"conversation": "c"}).structured_content["facts"]] == [
        KEY, SISTER, "I'm allergic to peanuts."]  # the sister stated again after the key

    sister = next(f for f in lp.conversation("c").facts() if f.text == SISTER)
    target = {"conversation": "c", "fact": sister.fact_id}
    token = call(server, "delete_fact", target).structured_content["confirm_token"]
    gone = call(server, "delete_fact", {**target, "confirm": token}).structured_content
    assert gone["status"] == "deleted" and gone["text"] is None and "deleted fact" in gone["message"]
    assert stored_words(lp, "Zorbavelle") == [] and leaks(lp, "Zorbavelle") == []

    for bad, says in (({"conversation": "c", "fact": 99}, "no standing fact 99"),
                      ({"conversation": "nope", "fact": 1}, "no conversation 'nope'"),
                      ({**target, "dry_run": True, "confirm": "x"}, "dry_run only shows")):
        r = call(server, "delete_fact", bad)
        assert r.is_error and says in r.content[0].text, r.content[0].text
    assert len(lp.backend.calls) == asked  # no tool asked the model


def test_a_users_fact_tools_reach_all_their_conversations_and_no_one_elses(lp):
    mon = lp.conversation("webui-1", create=True, user="alice")
    say(mon, f"Hi! {ALLERGY} {SISTER}")
    tue = lp.conversation("webui-2", create=True, user="alice")
    tue.ask("What do you remember about me?")  # quotes monday's fact in tuesday's chat
    say(lp.conversation("bob-1", create=True, user="bob"), ALLERGY)  # the same words, bob's
    assert stored_words(lp, SECRET) == ["bob-1", "webui-1", "webui-2"]
    server = build_server(lp, user="alice")

    made = call(server, "remember", {"text": KEY}).structured_content
    assert made["conversation"] == OWN and made["facts"][0]["conversation"] == OWN

    listed = call(server, "facts", {}).structured_content
    assert listed["conversation"] is None
    assert [(f["conversation"], f["text"]) for f in listed["facts"]] == [
        ("webui-1", ALLERGY), ("webui-1", SISTER), (OWN, KEY)]
    own = call(server, "facts", {"conversation": OWN}).structured_content
    assert [f["text"] for f in own["facts"]] == [KEY]

    bobs = lp.conversation("bob-1").facts()[0]
    for name, extra in (("delete_fact", {}), ("edit_fact", {"text": "x"})):
        refused = call(server, name, {"conversation": "bob-1", "fact": bobs.fact_id, **extra})
        assert refused.is_error and "belongs to user 'bob', not to user 'alice'" in refused.content[0].text
    missing = call(server, "delete_fact", {"fact": 1})
    assert missing.is_error and "conversation" in missing.content[0].text

    allergy = listed["facts"][0]
    target = {"conversation": allergy["conversation"], "fact": allergy["fact_id"]}
    first = call(server, "delete_fact", target).structured_content
    assert first["status"] == "confirm" and {t["conversation"] for t in first["turns"]} == {"webui-1", "webui-2"}
    done = call(server, "delete_fact", {**target, "confirm": first["confirm_token"]}).structured_content
    assert done["status"] == "deleted"
    assert stored_words(lp, SECRET) == ["bob-1"]  # bob's words are bob's
    assert [f["text"] for f in call(server, "facts", {}).structured_content["facts"]] == [SISTER, KEY]
    if lp.store.kind == "sqlite":
        from faultkit import leaks as byte_leaks

        lp.store.erase()
        assert byte_leaks(lp.store.path, SECRET)  # in bob's conversation only
    assert [f.text for f in lp.user("bob").facts()] == [ALLERGY]


def test_an_empty_users_facts_and_a_pinned_server(lp):
    server = build_server(lp, user="carol")
    empty = call(server, "facts", {}).structured_content
    assert empty["facts"] == [] and "nothing" in empty["note"] and not lp.store.has_conversation("carol-memory")
    say(lp.conversation("desk", create=True), ALLERGY)
    pinned = build_server(lp, conversation="desk")
    listed = call(pinned, "facts", {}).structured_content
    assert listed["conversation"] == "desk" and [f["text"] for f in listed["facts"]] == [ALLERGY]
    token = call(pinned, "delete_fact", {"fact": listed["facts"][0]["fact_id"]}).structured_content["confirm_token"]
    assert call(pinned, "delete_fact", {"fact": listed["facts"][0]["fact_id"], "confirm": token}).structured_content[
        "status"] == "deleted"
    assert stored_words(lp, SECRET) == []
